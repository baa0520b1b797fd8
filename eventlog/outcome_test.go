package eventlog

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// No two (principal, command id) pairs share an outcome key, whatever bytes
// they hold, and every key parses back to its pair.
func TestOutcomeKeyIsUnambiguous(t *testing.T) {
	pairs := []struct{ principal, id string }{
		{"", ""}, {"", "a"}, {"a", ""}, {"a", "b"}, {"ab", ""}, {"", "ab"},
		{"o\x01R", "x"}, {"o\x01", "Rx"}, {"o", "\x01Rx"},
		{"w\x01R\x01T", "id"}, {"w\x01R", "\x01Tid"}, {"\x00", "\x00"}, {"\x00\x00", ""},
		{string(make([]byte, 300)), "k"}, {string(make([]byte, 299)), "\x00k"},
	}
	seen := map[string]int{}
	for i, p := range pairs {
		k := outcomeKey(p.principal, p.id)
		require.Equal(t, byte(prefixOutcome), k[0])
		if j, dup := seen[string(k)]; dup {
			t.Fatalf("pairs %d and %d share the key %q", j, i, k)
		}
		seen[string(k)] = i
		principal, id, ok := parseOutcomeKey(k)
		require.True(t, ok, "pair %d", i)
		require.Equal(t, p.principal, principal, "pair %d", i)
		require.Equal(t, p.id, id, "pair %d", i)
	}
	for _, bad := range [][]byte{nil, {prefixOutcome}, {prefixCommand, 0}, {prefixOutcome, 5, 'a'}, {prefixOutcome, 0x80}} {
		_, _, ok := parseOutcomeKey(bad)
		require.False(t, ok, "%q", bad)
	}
}

// Outcome looks a command id up under its principal only: the same id of
// another principal is another command, and each keeps its own answer and
// fingerprint.
func TestOutcomePerPrincipal(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	writes := []Write{
		{Principal: "oA", CommandID: "create-task-1", Events: evs("A", 1), Result: []byte(`"A"`), Fingerprint: []byte{1}},
		{Principal: "oB", CommandID: "create-task-1", Events: evs("B", 2), Result: []byte(`"B"`), Fingerprint: []byte{2}},
		{Principal: "e", CommandID: "expire:A:gc-1", Code: "bad-params", Reason: "r"},
	}
	_, err := l.Append(writes...)
	require.NoError(t, err)

	cases := []struct {
		name, principal, id string
		want                *Outcome
	}{
		{"first principal", "oA", "create-task-1", &Outcome{Principal: "oA", CommandID: "create-task-1", First: 1, Count: 1,
			Result: []byte(`"A"`), Fingerprint: []byte{1}}},
		{"second principal, same id", "oB", "create-task-1", &Outcome{Principal: "oB", CommandID: "create-task-1", First: 2,
			Count: 2, Result: []byte(`"B"`), Fingerprint: []byte{2}}},
		{"engine rejection without events", "e", "expire:A:gc-1", &Outcome{Principal: "e", CommandID: "expire:A:gc-1",
			Code: "bad-params", Reason: "r", Result: []byte{}}},
		{"a third principal", "wA\x00T", "create-task-1", nil},
		{"a client asking for the engine's id", "oA", "expire:A:gc-1", nil},
		{"the empty principal", "", "create-task-1", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := l.Outcome(c.principal, c.id)
			if c.want == nil {
				require.ErrorIs(t, err, ErrNotFound)
				return
			}
			require.NoError(t, err)
			require.Equal(t, *c.want, o)
		})
	}

	_, err = l.Append(Write{Principal: "oA", CommandID: "create-task-1"})
	require.ErrorIs(t, err, ErrDuplicateCommand, "a principal's recorded id is refused")
	_, err = l.Append(Write{Principal: "oC", CommandID: "create-task-1"}, Write{Principal: "oC", CommandID: "create-task-1"})
	require.ErrorIs(t, err, ErrDuplicateCommand, "twice in one append under one principal")
	_, err = l.Append(Write{Principal: "oC", CommandID: "create-task-1", Events: evs("C", 1)})
	require.NoError(t, err, "a new principal's first use of the id")

	_, err = l.Append(Write{Principal: string(make([]byte, MaxPrincipalLen+1)), CommandID: "x"})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = l.Append(Write{Principal: "a", CommandID: "x", Fingerprint: make([]byte, MaxFingerprintLen+1)})
	require.ErrorIs(t, err, ErrInvalid)

	rep, err := l.Verify(&VerifyOptions{Principal: principalByStream})
	require.NoError(t, err)
	require.Equal(t, 4, rep.Commands)
}

// Verify with a principal mapping refuses an outcome whose events another
// principal wrote.
func TestVerifyChecksOutcomePrincipal(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	_, err := l.Append(Write{Principal: "oA", CommandID: "c", Events: evs("A", 2)})
	require.NoError(t, err)
	byStream := &VerifyOptions{Principal: principalByStream}
	_, err = l.Verify(byStream)
	require.NoError(t, err)

	// The same outcome moved to another principal.
	v := rawGet(t, l, outcomeKey("oA", "c"))
	require.NoError(t, l.db.Set(outcomeKey("oB", "c"), v, pebble.Sync))
	_, err = l.Verify(nil)
	require.NoError(t, err, "without a mapping only the command id is checked")
	_, err = l.Verify(byStream)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Reason, `principal "oB" points to position 1, written by principal "oA"`)
}

// toLegacy rewrites every outcome in the format-2 layout, as a format-2
// build wrote it, and sets the marker to 2.
func toLegacy(t *testing.T, l *Log) {
	t.Helper()
	b := l.db.NewBatch()
	require.NoError(t, l.stageLegacyOutcomes(b))
	require.NoError(t, b.Set(keyFormat, encodeFormat(FormatStreamCatalog), nil))
	require.NoError(t, b.Commit(pebble.Sync))
	require.NoError(t, b.Close())
}

// The step to format 3 moves each outcome to the principal of its first
// event (or the fallback when it wrote none), drops nothing, is idempotent
// after a step that died half way, and the result verifies.
func TestMoveOutcomes(t *testing.T) {
	l, _ := openMem(t)
	_, err := l.Append(
		Write{CommandID: "a", Events: evs("A", 2), Result: []byte("ra")},
		Write{CommandID: "b", Events: evs("B", 1)},
		Write{CommandID: "rej", Code: "bad-params", Reason: "no"},
	)
	require.NoError(t, err)
	toLegacy(t, l)
	_, err = l.Verify(nil)
	require.NoError(t, err, "a format-2 command table verifies")
	_, err = l.Outcome("", "a")
	require.ErrorIs(t, err, ErrNotFound, "a legacy outcome is not an outcome of any principal")
	require.NoError(t, l.Close())

	fs := l.opts.FS
	l, err = Open("db", &Options{FS: fs, AllowOlderFormat: true})
	require.NoError(t, err)
	defer l.Close()
	principalOf := func(first *Event) string {
		if first == nil {
			return "admin"
		}
		return "o" + first.Stream
	}
	boom := errors.New("boom")
	err = l.Upgrade(FormatStreamCatalog, FormatPrincipalOutcomes, func(u *Upgrade) error {
		n, err := u.MoveOutcomes(principalOf)
		require.Equal(t, 3, n)
		require.NoError(t, err)
		return boom
	}, nil)
	require.ErrorIs(t, err, boom)
	f, err := l.Format()
	require.NoError(t, err)
	require.Equal(t, FormatStreamCatalog, f, "a failed step leaves the format")

	var moved int
	require.NoError(t, l.Upgrade(FormatStreamCatalog, FormatPrincipalOutcomes, func(u *Upgrade) error {
		moved, err = u.MoveOutcomes(principalOf)
		return err
	}, nil))
	require.LessOrEqual(t, moved, 3)
	for _, c := range []struct{ principal, id string }{{"oA", "a"}, {"oB", "b"}, {"admin", "rej"}} {
		o, err := l.Outcome(c.principal, c.id)
		require.NoError(t, err, c.id)
		require.Nil(t, o.Fingerprint, "a moved outcome has no fingerprint")
	}
	o, err := l.Outcome("oA", "a")
	require.NoError(t, err)
	require.Equal(t, Outcome{Principal: "oA", CommandID: "a", First: 1, Count: 2, Result: []byte("ra")}, o)
	rep, err := l.Verify(&VerifyOptions{Principal: principalByStream})
	require.NoError(t, err)
	require.Equal(t, 3, rep.Commands)

	// A legacy outcome left in a format-3 store is corruption.
	require.NoError(t, l.db.Set(legacyCommandKey("zz"), (&Outcome{}).encodeLegacy(), pebble.Sync))
	_, err = l.Verify(nil)
	require.ErrorIs(t, err, ErrCorrupt)
}

// A step to format 3 that stops after a chunk committed (here on a principal too long, the third outcome) leaves each
// outcome in one layout: its new key and the deletion of its old one commit in the same chunk. The new key was set in
// one chunk and the old one deleted in the next whenever the set filled a chunk, so the store held an outcome under
// both keys until the step ran again.
func TestMoveOutcomesMovesEachOutcomeInOneChunk(t *testing.T) {
	defer func(n int) { upgradeChunk = n }(upgradeChunk)
	upgradeChunk = 3
	l, _ := openMem(t)
	defer l.Close()
	_, err := l.Append(
		Write{CommandID: "a", Events: evs("A", 1)},
		Write{CommandID: "b", Events: evs("B", 1)},
		Write{CommandID: "rej", Code: "bad-params", Reason: "no"},
	)
	require.NoError(t, err)
	toLegacy(t, l)
	principalOf := func(first *Event) string {
		if first == nil {
			return strings.Repeat("p", MaxPrincipalLen+1)
		}
		return "o" + first.Stream
	}
	err = l.Upgrade(FormatStreamCatalog, FormatPrincipalOutcomes, func(u *Upgrade) error {
		_, err := u.MoveOutcomes(principalOf)
		return err
	}, nil)
	require.ErrorIs(t, err, ErrInvalid)

	has := func(k []byte) bool {
		_, closer, err := l.db.Get(k)
		if errors.Is(err, pebble.ErrNotFound) {
			return false
		}
		require.NoError(t, err)
		require.NoError(t, closer.Close())
		return true
	}
	for _, c := range []struct{ principal, id string }{{"oA", "a"}, {"oB", "b"}} {
		require.NotEqual(t, has(legacyCommandKey(c.id)), has(outcomeKey(c.principal, c.id)),
			"%s is in exactly one layout", c.id)
	}
	require.True(t, has(outcomeKey("oA", "a")), "the first chunk committed")
}

// An outcome sealed in place after other bytes (an append's scratch buffer)
// is the sealed value a fresh encoding makes, and decodes back whole, in both
// layouts.
func TestOutcomeSealedInPlace(t *testing.T) {
	o := Outcome{First: 7, Count: 3, Code: "bad-params", Reason: "r", Result: []byte(`{"x":1}`), Fingerprint: []byte{1, 2, 3}}
	for _, fields := range []int{outcomeFields, legacyOutcomeFields} {
		prefix := []byte("scratch")
		v := o.appendSealed(append([]byte(nil), prefix...), fields)
		require.Equal(t, prefix, v[:len(prefix)])
		require.Equal(t, o.encodeFields(fields), v[len(prefix):])
		got, err := decodeOutcomeValue([]byte("k"), v[len(prefix):], fields)
		require.NoError(t, err)
		want := o
		if fields == legacyOutcomeFields {
			want.Fingerprint = nil
		}
		require.Equal(t, want, got)
		v[len(v)-1] ^= 1
		_, err = decodeOutcomeValue([]byte("k"), v[len(prefix):], fields)
		require.ErrorIs(t, err, ErrCorrupt, "the checksum covers the payload")
	}
}

// An outcome the step to format 3 moves is a duplicate to Append at once, though Outcome looked its new key up and
// found nothing before the step moved it: the lookup's "unrecorded", which lets Append skip its own read until the
// next append, holds only until the next write of an outcome, and the step writes outcomes too (here with no record
// of the step, so no append follows its writes).
func TestAnOutcomeLookedUpBeforeItsMoveIsADuplicateAfterIt(t *testing.T) {
	l, fs := openMem(t)
	_, err := l.Append(Write{CommandID: "a", Events: evs("A", 1)})
	require.NoError(t, err)
	toLegacy(t, l)
	require.NoError(t, l.Close())

	l, err = Open("db", &Options{FS: fs, AllowOlderFormat: true})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Outcome("oA", "a")
	require.ErrorIs(t, err, ErrNotFound, "not moved yet")
	require.NoError(t, l.Upgrade(FormatStreamCatalog, FormatPrincipalOutcomes, func(u *Upgrade) error {
		_, err := u.MoveOutcomes(func(*Event) string { return "oA" })
		return err
	}, nil))
	_, err = l.Outcome("oA", "a")
	require.NoError(t, err, "moved")
	_, err = l.Append(Write{Principal: "oA", CommandID: "a", Events: evs("A", 1)})
	require.ErrorIs(t, err, ErrDuplicateCommand)
}

// TestDecodeOutcomeRefusesAWellSealedValueOfAnotherShape: the seal covers whatever payload a writer sealed, so a value
// sealed by a faulty writer (or by hand) reaches the outcome's own checks: its array header must name exactly the
// fields of its layout (six, or five in the table of formats 1 and 2) and no byte may follow them.
func TestDecodeOutcomeRefusesAWellSealedValueOfAnotherShape(t *testing.T) {
	// payloadOf is an outcome's payload of header fields holding the first n of [first, count, code, reason, result,
	// fingerprint].
	payloadOf := func(header, n int) []byte {
		b := appendArrayHeader(nil, header)
		b = appendUint(b, 3)
		b = appendUint(b, 2)
		b = appendStr(b, "")
		b = appendStr(b, "")
		b = appendBin(b, []byte("result"))
		if n == outcomeFields {
			b = appendBin(b, []byte("fingerprint"))
		}
		return b
	}
	key, legacyKey := outcomeKey("p", "c"), legacyCommandKey("c")
	six, five := payloadOf(outcomeFields, outcomeFields), payloadOf(legacyOutcomeFields, legacyOutcomeFields)
	cases := map[string]struct {
		legacy  bool
		payload []byte
		reason  string // "" when the outcome decodes
	}{
		"six fields":                      {payload: six},
		"a header of 7 over six fields":   {payload: payloadOf(7, outcomeFields), reason: "outcome has 7 fields, want 6"},
		"a header of 5 over six fields":   {payload: payloadOf(5, outcomeFields), reason: "outcome has 5 fields, want 6"},
		"a byte after the six fields":     {payload: append(six, 0xc0), reason: "trailing bytes"},
		"five fields of the older layout": {legacy: true, payload: five},
		"a header of 6 over five fields": {legacy: true, payload: payloadOf(6, legacyOutcomeFields),
			reason: "outcome has 6 fields, want 5"},
		"a byte after the five fields": {legacy: true, payload: append(five, 0xc0), reason: "trailing bytes"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			k, decode := key, decodeOutcome
			if c.legacy {
				k, decode = legacyKey, decodeLegacyOutcome
			}
			o, err := decode(k, seal(c.payload))
			if c.reason == "" {
				require.NoError(t, err)
				require.Equal(t, []uint64{3, 2}, []uint64{o.First, o.Count})
				require.Equal(t, "result", string(o.Result))
				return
			}
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, keyString(k), ce.Key)
			require.Contains(t, ce.Reason, c.reason)
		})
	}
}

// TestOutcomeRemembersAtMostMaxAbsentUnrecordedIds: a lookup that reads the store and finds no outcome remembers the
// key until the next append, so that the append of that id does not read the store again; the ids looked up are
// the caller's, as many as it likes, and what is remembered stops at maxAbsent keys.
func TestOutcomeRemembersAtMostMaxAbsentUnrecordedIds(t *testing.T) {
	l, _ := openMem(t) // no append yet: the filter proves nothing, and every lookup reads the store
	defer l.Close()
	for i := range maxAbsent + 2 {
		_, err := l.Outcome("p", strconv.Itoa(i))
		require.ErrorIs(t, err, ErrNotFound)
	}
	l.outcomesMu.Lock()
	defer l.outcomesMu.Unlock()
	require.Len(t, l.absent, maxAbsent)
}
