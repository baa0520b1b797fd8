package eventlog

import (
	"encoding/binary"
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func TestOptionsValidate(t *testing.T) {
	require.NoError(t, (*Options)(nil).Validate())
	require.NoError(t, (&Options{}).Validate())
	err := (&Options{CacheSize: -1, MaxPayloadBytes: -2}).Validate()
	require.ErrorContains(t, err, "CacheSize")
	require.ErrorContains(t, err, "MaxPayloadBytes", "Validate reports every problem at once")
	_, err = Open("db", &Options{FS: vfs.NewMem(), MaxPayloadBytes: 1 << 30})
	require.ErrorContains(t, err, "MaxPayloadBytes")
}

func TestAppendAssignsGaplessPositionsAndVersions(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()

	first, err := l.Append(Write{Events: evs("a", 2)}, Write{Events: evs("b", 1)})
	require.NoError(t, err)
	require.EqualValues(t, 1, first)
	ws := []Write{{Events: []Event{ev("a", "x"), ev("b", "y"), ev("a", "z")}}}
	first, err = l.Append(ws...)
	require.NoError(t, err)
	require.EqualValues(t, 4, first)
	require.EqualValues(t, []uint64{4, 5, 6}, []uint64{ws[0].Events[0].Position, ws[0].Events[1].Position, ws[0].Events[2].Position})
	require.EqualValues(t, []uint64{3, 2, 4}, []uint64{ws[0].Events[0].StreamVersion, ws[0].Events[1].StreamVersion, ws[0].Events[2].StreamVersion})

	all := readAll(t, l)
	require.Len(t, all, 6)
	for i, e := range all {
		require.EqualValues(t, i+1, e.Position)
	}
	pos, hash := l.Head()
	require.EqualValues(t, 6, pos)
	require.Equal(t, all[5].Hash, hash)
	require.Equal(t, ws[0].Events[2].Hash, hash, "Append reports the hash it stored")
}

func TestAppendRejectsInvalidInput(t *testing.T) {
	big := ev("a", "t")
	big.Payload = make([]byte, DefaultMaxPayloadBytes+1)
	long := string(make([]byte, 300))
	cases := map[string][]Write{
		"no writes":                nil,
		"empty write":              {{}},
		"no stream":                {{Events: []Event{{Type: "t"}}}},
		"stream too long":          {{Events: []Event{{Stream: long, Type: "t"}}}},
		"no type":                  {{Events: []Event{{Stream: "a"}}}},
		"payload too large":        {{Events: []Event{big}}},
		"command id too long":      {{CommandID: long, Events: evs("a", 1)}},
		"actor too long":           {{Events: []Event{{Stream: "a", Type: "t", ActorTask: long}}}},
		"second write bad":         {{Events: evs("a", 1)}, {Events: []Event{{Stream: "a"}}}},
		"duplicate id in one call": {{CommandID: "c", Events: evs("a", 1)}, {CommandID: "c"}},
		"event of another command": {{CommandID: "c", Events: []Event{{Stream: "a", Type: "t", CommandID: "d"}}}},
		"event id, no write id":    {{Events: []Event{{Stream: "a", Type: "t", CommandID: "d"}}}},
	}
	for name, ws := range cases {
		t.Run(name, func(t *testing.T) {
			l, _ := openMem(t)
			defer l.Close()
			_, err := l.Append(ws...)
			want := ErrInvalid
			if name == "duplicate id in one call" {
				want = ErrDuplicateCommand
			}
			require.ErrorIs(t, err, want)
			// No trace, no gap: the next append starts at position 1.
			first, err := l.Append(Write{Events: evs("a", 1)})
			require.NoError(t, err)
			require.EqualValues(t, 1, first)
			all := readAll(t, l)
			require.Len(t, all, 1)
			require.EqualValues(t, 1, all[0].StreamVersion)
		})
	}
}

func TestExpectedVersion(t *testing.T) {
	cases := []struct {
		name     string
		expected int64
		conflict bool
	}{
		{"any", Any, false},
		{"exact current", 2, false},
		{"exact stale", 1, true},
		{"exact future", 3, true},
		{"no stream on existing", NoStream, true},
		{"negative garbage", -7, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := openMem(t)
			defer l.Close()
			_, err := l.Append(Write{Events: evs("s", 2)})
			require.NoError(t, err)
			_, err = l.Append(Write{Expected: []Expectation{{"s", c.expected}}, Events: evs("s", 1)})
			if !c.conflict {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrConflict)
			var ce *ConflictError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "s", ce.Stream)
			require.EqualValues(t, 2, ce.Actual)
			require.Len(t, readAll(t, l), 2, "a conflicting append leaves no trace")
		})
	}
	t.Run("no stream on new stream", func(t *testing.T) {
		l, _ := openMem(t)
		defer l.Close()
		_, err := l.Append(Write{Expected: []Expectation{{"new", NoStream}}, Events: evs("new", 1)})
		require.NoError(t, err)
	})
	t.Run("sees earlier writes of the same append", func(t *testing.T) {
		l, _ := openMem(t)
		defer l.Close()
		_, err := l.Append(Write{Events: evs("s", 2)}, Write{Expected: []Expectation{{"s", 2}}, Events: evs("s", 1)})
		require.NoError(t, err)
		_, err = l.Append(Write{Events: evs("s", 2)}, Write{Expected: []Expectation{{"s", 3}}, Events: evs("s", 1)})
		require.ErrorIs(t, err, ErrConflict)
	})
	t.Run("survives reopen", func(t *testing.T) {
		fs := vfs.NewMem()
		l, err := Open("db", &Options{FS: fs})
		require.NoError(t, err)
		_, err = l.Append(Write{Events: evs("s", 3)})
		require.NoError(t, err)
		require.NoError(t, l.Close())
		l, err = Open("db", &Options{FS: fs})
		require.NoError(t, err)
		defer l.Close()
		_, err = l.Append(Write{Expected: []Expectation{{"s", 3}}, Events: evs("s", 1)})
		require.NoError(t, err)
		all := readAll(t, l)
		require.EqualValues(t, 4, all[3].StreamVersion)
	})
}

func TestCommandOutcomes(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	_, err = l.Append(Write{Events: evs("a", 1)})
	require.NoError(t, err)
	_, err = l.Append(
		Write{CommandID: "ok-1", Events: evs("a", 2), Result: []byte(`{"grandchildTaskRef":"gc-1"}`)},
		Write{CommandID: "denied-1", Events: evs("a", 2), Code: "policy-denied", Reason: "slots-exhausted"},
		Write{CommandID: "bad-1", Code: "bad-params", Reason: "prompt is empty"},
	)
	require.NoError(t, err)

	check := func(l *Log) {
		o, err := l.Outcome("", "ok-1")
		require.NoError(t, err)
		require.True(t, o.Accepted())
		require.Equal(t, Outcome{CommandID: "ok-1", First: 2, Count: 2, Result: []byte(`{"grandchildTaskRef":"gc-1"}`)}, o)
		o, err = l.Outcome("", "denied-1")
		require.NoError(t, err)
		require.False(t, o.Accepted())
		require.Equal(t, Outcome{CommandID: "denied-1", First: 4, Count: 2, Code: "policy-denied", Reason: "slots-exhausted", Result: []byte{}}, o)
		o, err = l.Outcome("", "bad-1")
		require.NoError(t, err)
		require.Equal(t, Outcome{CommandID: "bad-1", Code: "bad-params", Reason: "prompt is empty", Result: []byte{}}, o)
		_, err = l.Outcome("", "never")
		require.ErrorIs(t, err, ErrNotFound)
	}
	check(l)
	_, err = l.Append(Write{CommandID: "ok-1", Events: evs("a", 1)})
	require.ErrorIs(t, err, ErrDuplicateCommand)
	require.NoError(t, l.Close())

	l, err = Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	check(l) // looked up forever, across restarts
	_, err = l.Append(Write{CommandID: "bad-1"})
	require.ErrorIs(t, err, ErrDuplicateCommand)
	e, err := l.Event(2)
	require.NoError(t, err)
	require.Equal(t, "ok-1", e.CommandID, "events carry their command id")
}

func TestIterators(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	for i := 0; i < 10; i++ {
		_, err := l.Append(Write{Events: []Event{ev("a", "x"), ev("b", "y"), ev("a", "z")}})
		require.NoError(t, err)
	}
	t.Run("by position from the middle", func(t *testing.T) {
		it := l.Read(28)
		var got []uint64
		for it.Next() {
			got = append(got, it.Event().Position)
		}
		require.NoError(t, it.Close())
		require.Equal(t, []uint64{28, 29, 30}, got)
	})
	t.Run("past the end", func(t *testing.T) {
		it := l.Read(31)
		require.False(t, it.Next())
		require.NoError(t, it.Close())
	})
	t.Run("by stream", func(t *testing.T) {
		it := l.ReadStream("a", 18)
		var vers, pos []uint64
		for it.Next() {
			require.Equal(t, "a", it.Event().Stream)
			vers = append(vers, it.Event().StreamVersion)
			pos = append(pos, it.Event().Position)
		}
		require.NoError(t, it.Close())
		require.Equal(t, []uint64{18, 19, 20}, vers)
		require.Equal(t, []uint64{27, 28, 30}, pos)
	})
	t.Run("unknown stream", func(t *testing.T) {
		it := l.ReadStream("nope", 1)
		require.False(t, it.Next())
		require.NoError(t, it.Close())
	})
	t.Run("stream that prefixes another", func(t *testing.T) {
		_, err := l.Append(Write{Events: evs("ab", 2)})
		require.NoError(t, err)
		n := 0
		it := l.ReadStream("a", 1)
		for it.Next() {
			n++
		}
		require.NoError(t, it.Close())
		require.Equal(t, 20, n)
	})
	t.Run("events stay valid after Next", func(t *testing.T) {
		it := l.Read(1)
		require.True(t, it.Next())
		kept := *it.Event()
		for it.Next() {
		}
		require.NoError(t, it.Close())
		require.Equal(t, "a", kept.Stream)
		require.EqualValues(t, 1, kept.Position)
		require.Equal(t, ev("a", "x").Payload, kept.Payload)
	})
	t.Run("closed log", func(t *testing.T) {
		l2, _ := openMem(t)
		require.NoError(t, l2.Close())
		it := l2.Read(1)
		require.False(t, it.Next())
		require.ErrorIs(t, it.Close(), ErrClosed)
		_, err := l2.Append(Write{Events: evs("a", 1)})
		require.ErrorIs(t, err, ErrClosed)
		require.ErrorIs(t, l2.Close(), ErrClosed)
	})
}

func TestSnapshotSlot(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	_, err := l.LatestSnapshot()
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, l.SaveSnapshot(1, []byte("x")), ErrInvalid, "beyond the head")

	_, err = l.Append(Write{Events: evs("a", 5)})
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(2, []byte("two")))
	require.NoError(t, l.SaveSnapshot(5, []byte("five")))
	s, err := l.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, Snapshot{Position: 5, Data: []byte("five")}, s)

	// Corrupt it behind the log's back: reported, never trusted.
	flipLastByte(t, l, snapshotChunkKey(5, 1))
	_, err = l.LatestSnapshot()
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = l.Verify(nil)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestFormatVersion(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	f, err := l.Format()
	require.NoError(t, err)
	require.Equal(t, CurrentFormat, f)
	require.NoError(t, l.db.Set(keyFormat, encodeFormat(CurrentFormat+1), pebble.Sync))
	require.NoError(t, l.Close())

	_, err = Open("db", &Options{FS: fs})
	require.ErrorIs(t, err, ErrFormatTooNew)
	require.ErrorContains(t, err, "newer crewlog")
}

func TestReadOnly(t *testing.T) {
	fs := vfs.NewMem()
	_, err := Open("db", &Options{FS: fs, ReadOnly: true})
	// NB: pebble reports a read-only open of a missing store without a
	// sentinel (its ErrDBDoesNotExist is for ErrorIfNotExists), so the
	// text is what says which error it is.
	require.ErrorContains(t, err, `database "db" does not exist`, "an empty store cannot be opened read-only")

	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	_, err = l.Append(Write{Events: evs("a", 3)})
	require.NoError(t, err)
	require.NoError(t, l.Close())

	r, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	defer r.Close()
	require.Len(t, readAll(t, r), 3)
	_, err = r.Append(Write{Events: evs("a", 1)})
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, r.SaveSnapshot(1, nil), ErrReadOnly)
	require.ErrorIs(t, r.Checkpoint("copy"), ErrReadOnly)
}

func TestCheckpoint(t *testing.T) {
	l, fs := openMem(t)
	_, err := l.Append(Write{Events: evs("a", 4)})
	require.NoError(t, err)
	require.NoError(t, l.Checkpoint("backup"))
	_, err = l.Append(Write{Events: evs("a", 1)})
	require.NoError(t, err)
	require.NoError(t, l.Close())

	b, err := Open("backup", &Options{FS: fs})
	require.NoError(t, err)
	defer b.Close()
	rep, err := b.Verify(nil)
	require.NoError(t, err)
	require.EqualValues(t, 4, rep.Head)
	require.ErrorIs(t, b.Checkpoint("backup"), iofs.ErrExist, "the destination must not exist")
}

// TestCheckpointInsideTheStoreIsRefused: a copy is never made inside the store, by its path or through a symbolic
// link to it (ErrInsideStore): it would lie among Pebble's files and go with the store. Nothing is made there, and a
// copy beside the store is made.
func TestCheckpointInsideTheStoreIsRefused(t *testing.T) {
	parent := t.TempDir()
	store := filepath.Join(parent, "store")
	l, err := Open(store, nil)
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Append(Write{Events: evs("a", 2)})
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(store, link))
	for _, dir := range []string{filepath.Join(store, "copy"), filepath.Join(link, "copy")} {
		require.ErrorIs(t, l.Checkpoint(dir), ErrInsideStore, dir)
	}
	require.NoDirExists(t, filepath.Join(store, "copy"))
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no staging directory beside the store")
	require.NoError(t, l.Checkpoint(filepath.Join(parent, "copy")))
}

func TestOpenDetectsDamagedHead(t *testing.T) {
	// The position each damage must be reported at.
	at := map[string]uint64{"record beyond head": 3, "head hash differs": 2, "head points past the log": 9}
	cases := map[string]func(l *Log){
		"record beyond head": func(l *Log) {
			e := ev("a", "x")
			e.Position, e.StreamVersion = 3, 3
			require.NoError(t, l.db.Set(eventKey(3), appendRecord(nil, &[32]byte{}, &e), pebble.Sync))
		},
		"head hash differs": func(l *Log) {
			h := head{Position: 2}
			require.NoError(t, l.db.Set(keyHead, h.encode(), pebble.Sync))
		},
		"head points past the log": func(l *Log) {
			h := head{Position: 9}
			require.NoError(t, l.db.Set(keyHead, h.encode(), pebble.Sync))
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			l, err := Open("db", &Options{FS: fs})
			require.NoError(t, err)
			_, err = l.Append(Write{Events: evs("a", 2)})
			require.NoError(t, err)
			damage(l)
			require.NoError(t, l.Close())
			_, err = Open("db", &Options{FS: fs})
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, ErrCorrupt)
			require.Equal(t, at[name], ce.Position, "%v", err)
		})
	}
}

// TestOpenReportsATruncatedTableAsCorrupt: a table shorter than its manifest
// says is damage, for a writer and a read-only opener alike; Pebble reports it
// with a plain error, which read as a store that merely could not be opened.
func TestOpenReportsATruncatedTableAsCorrupt(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = l.Append(Write{Events: evs("a", 20)})
	require.NoError(t, err)
	require.NoError(t, l.db.Flush())
	require.NoError(t, l.Close())
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	st, err := os.Stat(tables[0])
	require.NoError(t, err)
	require.NoError(t, os.Truncate(tables[0], st.Size()-1))

	for _, ro := range []bool{false, true} {
		_, err = Open(dir, &Options{ReadOnly: ro})
		require.ErrorIs(t, err, ErrCorrupt, "read-only %v", ro)
		require.ErrorContains(t, err, filepath.Base(tables[0]))
	}
}

func TestKeys(t *testing.T) {
	k := appendStreamKey(nil, "run-1", 7)
	s, v, ok := parseStreamKey(k)
	require.True(t, ok)
	require.Equal(t, "run-1", s)
	require.EqualValues(t, 7, v)
	_, _, ok = parseStreamKey(k[:len(k)-1])
	require.False(t, ok)
	require.Equal(t, `s/"run-1"/7`, keyString(k))
	require.Equal(t, "e/5", keyString(eventKey(5)))
	require.Equal(t, []byte{'t'}, prefixUpper([]byte{'s'}))
	require.Equal(t, []byte{'a', 1}, prefixUpper([]byte{'a', 0, 0xff}))
	require.Nil(t, prefixUpper([]byte{0xff}))
	require.EqualValues(t, 9, binary.BigEndian.Uint64(eventKey(9)[1:]))
}

// A command id looked up just before its append is not looked up again by
// the append, and every duplicate is still refused.
func TestAppendTrustsAFreshAbsentLookup(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	_, err := l.Outcome("", "a")
	require.ErrorIs(t, err, ErrNotFound)
	require.Contains(t, l.absent, string(outcomeKey("", "a")))
	_, err = l.Append(Write{CommandID: "a", Events: evs("s", 1)})
	require.NoError(t, err)
	require.Empty(t, l.absent, "an append makes every earlier observation stale")

	_, err = l.Outcome("", "b")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = l.Append(Write{CommandID: "c", Events: evs("s", 1)})
	require.NoError(t, err)
	_, err = l.Append(Write{CommandID: "a"})
	require.ErrorIs(t, err, ErrDuplicateCommand, "a recorded id is refused")
	_, err = l.Append(Write{CommandID: "b"}, Write{CommandID: "b"})
	require.ErrorIs(t, err, ErrDuplicateCommand, "twice in one append is refused")

	_, err = l.Outcome("", "a")
	require.NoError(t, err, "recorded ids are never remembered as absent")
	require.NotContains(t, l.absent, string(outcomeKey("", "a")))
}

func TestOpenReportsALockedStore(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, nil)
	require.NoError(t, err)
	defer l.Close()
	_, err = Open(dir, &Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrLocked)
	_, err = Open(t.TempDir()+"/missing/deeper", &Options{ReadOnly: true})
	require.ErrorContains(t, err, "missing/deeper\" does not exist")
	require.NotErrorIs(t, err, ErrLocked)
}

// SaveSnapshotFrom stores what write wrote, sealed, as SaveSnapshot stores
// the same bytes; an error from write, or a count of bytes that is not what
// it wrote, saves nothing and leaves the older snapshot in place.
func TestSaveSnapshotFromStoresWhatWasWritten(t *testing.T) {
	l, _ := openMem(t)
	_, err := l.Append(Write{Events: []Event{ev("s", "x"), ev("s", "y")}})
	require.NoError(t, err)
	n, err := l.SaveSnapshotFrom(1, func(w io.Writer) (int64, error) {
		k, err := io.WriteString(w, "hel")
		k2, _ := io.WriteString(w, "lo")
		return int64(k + k2), err
	})
	require.NoError(t, err)
	require.EqualValues(t, 5, n)
	snap, err := l.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, Snapshot{Position: 1, Data: []byte("hello")}, snap)

	boom := errors.New("boom")
	_, err = l.SaveSnapshotFrom(2, func(w io.Writer) (int64, error) {
		_, _ = io.WriteString(w, "half")
		return 4, boom
	})
	require.ErrorIs(t, err, boom)
	_, err = l.SaveSnapshotFrom(2, func(w io.Writer) (int64, error) {
		_, _ = io.WriteString(w, "four")
		return 5, nil
	})
	require.ErrorIs(t, err, ErrInvalid)
	snap, err = l.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, Snapshot{Position: 1, Data: []byte("hello")}, snap, "the failed saves dropped nothing")
	_, err = l.Verify(nil)
	require.NoError(t, err)
}
