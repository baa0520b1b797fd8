package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Every kind of command survives forwarding: the writer fingerprints and
// decides the same request the follower was given.
func TestForwardedRequestsRoundTrip(t *testing.T) {
	given := forwardedCommands()
	for kind, mk := range commandKinds {
		c := mk()
		require.Equal(t, kind, c.Kind())
		given = append(given, c)
	}
	for _, m := range Methods() {
		require.Contains(t, commandKinds, m, "method %s cannot be forwarded", m)
	}
	for _, c := range given {
		r := forwardedRequest(c)
		b, err := EncodeRequest(r)
		require.NoError(t, err)
		got, err := DecodeRequest(b)
		require.NoError(t, err)
		require.Equal(t, r, got, c.Kind())
		fp1, err := fingerprint(c)
		require.NoError(t, err)
		fp2, err := fingerprint(got.Command)
		require.NoError(t, err)
		require.Equal(t, fp1, fp2)
	}

	rep := Reply{Result: []byte(`{"ok":true}`), Position: 9, Replayed: true}
	b, err := EncodeReply(rep, nil)
	require.NoError(t, err)
	got, err := DecodeReply(b)
	require.NoError(t, err)
	require.Equal(t, rep, got)
	rej := Reply{Rejected: &RejectedError{Code: "policy-denied", Reason: "slots-exhausted", Message: "m"}}
	b, err = EncodeReply(rej, nil)
	require.NoError(t, err)
	got, err = DecodeReply(b)
	require.NoError(t, err)
	require.Equal(t, rej, got)
	b, err = EncodeReply(Reply{}, errors.New("boom"))
	require.NoError(t, err)
	_, err = DecodeReply(b)
	require.ErrorIs(t, err, ErrRemote)
	require.NotErrorIs(t, err, ErrNoSpace)

	// The writer's disk is short of space: it decided nothing, and the
	// follower's client is answered so (disk-full), not with a failure.
	b, err = EncodeReply(Reply{}, fmt.Errorf("%w: %w", ErrNoSpace, errors.New("12 MiB free of a 64 MiB minimum")))
	require.NoError(t, err)
	_, err = DecodeReply(b)
	require.ErrorIs(t, err, ErrNoSpace)
	require.Equal(t,
		"commands: too little free disk space; retry later: 12 MiB free of a 64 MiB minimum (on the writer)",
		err.Error())

	// A node that is not the writer decided nothing: the request may be
	// sent again. An engine's failure that quotes such an answer (the
	// commit error that stopped it) is a failure, in doubt; so is one that
	// quotes a low-space refusal.
	b, err = EncodeReply(Reply{}, ErrNotWriter)
	require.NoError(t, err)
	_, err = DecodeReply(b)
	require.ErrorIs(t, err, ErrNotWriter)
	// A result the forwarder could not carry was refused before anything was
	// applied: its client is owed oversize-frame, not a failure.
	b, err = EncodeReply(Reply{}, fmt.Errorf("%w: run.create answers 90 bytes, 40 fit", ErrResultTooLarge))
	require.NoError(t, err)
	_, err = DecodeReply(b)
	require.ErrorIs(t, err, ErrResultTooLarge)
	require.NotErrorIs(t, err, ErrRemote)
	// A cold run the writer could not read back was refused before anything was decided: its client is owed
	// replay-failed, as from one crewd, not a failure.
	b, err = EncodeReply(Reply{}, fmt.Errorf("%w: run r: summary: corrupt", projections.ErrNotReadBack))
	require.NoError(t, err)
	_, err = DecodeReply(b)
	require.ErrorIs(t, err, projections.ErrNotReadBack)
	require.NotErrorIs(t, err, ErrRemote)
	for _, quoted := range []error{ErrNotWriter, ErrNoSpace, ErrResultTooLarge, projections.ErrNotReadBack} {
		b, err = EncodeReply(Reply{}, fmt.Errorf("%w: %v", ErrFailed, quoted))
		require.NoError(t, err)
		_, err = DecodeReply(b)
		require.ErrorIs(t, err, ErrRemote)
		require.NotErrorIs(t, err, ErrNotWriter)
		require.NotErrorIs(t, err, ErrNoSpace)
		require.NotErrorIs(t, err, ErrResultTooLarge)
		require.NotErrorIs(t, err, projections.ErrNotReadBack)
	}
}

// Forwarded bytes that declare more than they hold are refused before anything is sized by the declaration:
// msgpack makes a byte field at its declared length before reading it, so a 6-byte reply would ask for 4 GiB, a
// fatal error that no recover catches.
func TestForwardedLengthsAreBackedByBytes(t *testing.T) {
	for name, decode := range map[string]func([]byte) error{
		"request": func(b []byte) error { _, err := DecodeRequest(b); return err },
		"reply":   func(b []byte) error { _, err := DecodeReply(b); return err },
	} {
		// An array of the five fields whose first is a bin32 of 4 GiB, then nothing.
		b := []byte{0x95, 0xc6, 0xff, 0xff, 0xff, 0xff}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := decode(b)
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, errLengths, name)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), name)
	}
}

// A forwarded import with a nil in place of an event is refused: msgpack would decode it to an event without a
// payload, which the writer could neither fingerprint nor forward again.
func TestForwardedImportRefusesANilEvent(t *testing.T) {
	c, err := msgpack.Marshal(map[string]any{"Source": "picrew", "RunID": "r", "Events": []any{nil}})
	require.NoError(t, err)
	b, err := marshalArray(&forwarded{Principal: events.EnginePrincipal(), Kind: "import.append", Command: c})
	require.NoError(t, err)
	_, err = DecodeRequest(b)
	require.ErrorContains(t, err, "event 0 is nil")
}

// forwardedCommands are commands with their fields set, of the kinds whose fields are not all strings: pointers,
// slices, raw JSON and the imported events' typed payloads.
func forwardedCommands() []Command {
	budget, desc, timeout := int64(7), "d", 1.5
	return []Command{
		&RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w", BudgetTotal: &budget, OrchestratorDigest: "ab"},
		&TaskCreate{RunID: "r", TaskID: "t1", Role: "executor", DependsOn: []string{"t0"}},
		&DelegateRequest{RunID: "r", TaskID: "t1", Prompt: "p", Description: &desc, TimeoutSec: &timeout},
		// cut for its frame
		&DelegateSettle{RunID: "r", SubID: "gc-1", Outcome: OutcomeOK, Text: "<", SentText: "<<"},
		&ProxyRequest{RunID: "r", TaskID: "t1", JobID: "J", RequestID: "q", RequestIDChars: 1, NonceDigest: "ab",
			Tool: "read", Args: json.RawMessage(`{"a":1}`)},
		&JobCreate{RunID: "r", JobID: "J", TaskID: "t1", Tools: json.RawMessage(`[]`), NonceDigest: "ab"},
		&Import{Source: "picrew", RunID: "r", Events: []ImportedEvent{{Type: events.TypeTaskStarted, TimeMs: 5,
			Payload: &events.TaskStarted{TaskID: "t1", Role: "executor"}}}},
	}
}

// forwardedRequest is c as a worker's request with a command id.
func forwardedRequest(c Command) Request {
	return Request{Principal: events.WorkerPrincipal("r", "t1"), CommandID: "id-1",
		Actor: events.Actor{Role: "worker", TaskID: "t1"}, Command: c, MaxResultBytes: 4096}
}

// FuzzDecodeForwarded decodes bytes from another node as a forwarded request and as a forwarded reply. Neither
// decoder may panic; what one accepts must survive being forwarded again: encoded and decoded once more, it is
// the same request (or reply), so a node that relays it hands on what it was given.
func FuzzDecodeForwarded(f *testing.F) {
	for _, c := range forwardedCommands() {
		b, err := EncodeRequest(forwardedRequest(c))
		require.NoError(f, err)
		f.Add(b)
	}
	for _, mk := range commandKinds {
		b, err := EncodeRequest(Request{Principal: events.AdminPrincipal(),
			Actor: events.Actor{Role: events.RoleAdmin}, Command: mk()})
		require.NoError(f, err)
		f.Add(b)
	}
	for _, r := range []struct {
		rep Reply
		err error
	}{
		{Reply{Result: json.RawMessage(`{"ok":true}`), Position: 9, Replayed: true}, nil},
		{Reply{Rejected: &RejectedError{Code: "policy-denied", Reason: "slots-exhausted", Message: "m"}}, nil},
		{Reply{}, nil},
		{Reply{}, errors.New("boom")},
		{Reply{}, fmt.Errorf("%w: 12 MiB free", ErrNoSpace)},
		{Reply{}, ErrNotWriter},
		{Reply{}, ErrResultTooLarge},
		{Reply{}, &CredentialEndedError{End: CredentialRevoked}},
		{Reply{}, &CredentialEndedError{End: CredentialTaskEnded}},
	} {
		b, err := EncodeReply(r.rep, r.err)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeRequest(b); err == nil {
			require.NotNil(t, r.Command, "%x", b)
			again, err := EncodeRequest(r)
			require.NoError(t, err, "%x", b)
			got, err := DecodeRequest(again)
			require.NoError(t, err, "%x re-encoded as %x", b, again)
			// The envelope compares as it is; the command through its encoding, which is deterministic and
			// carries every field: a float of a command may be NaN, which equals nothing, not even itself.
			envelope := func(r Request) Request { r.Command = nil; return r }
			require.Equal(t, envelope(r), envelope(got), "%x", again)
			require.IsType(t, r.Command, got.Command, "%x", again)
			third, err := EncodeRequest(got)
			require.NoError(t, err, "%x", again)
			require.Equal(t, again, third, "decoded again, %x re-encodes otherwise", again)
		}
		if rep, err := DecodeReply(b); err == nil {
			again, err := EncodeReply(rep, nil)
			require.NoError(t, err, "%x", b)
			got, err := DecodeReply(again)
			require.NoError(t, err, "%x re-encoded as %x", b, again)
			require.Equal(t, rep, got, "%x re-encoded as %x", b, again)
		}
	})
}

// Every Command of this package (a func (*T) Kind() string returning a
// literal) can be forwarded: commandKinds makes a *T for its kind.
func TestEveryCommandKindForwards(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "Kind" || fn.Recv == nil || len(fn.Body.List) != 1 {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			ret, ok2 := fn.Body.List[0].(*ast.ReturnStmt)
			if !ok || !ok2 || len(ret.Results) != 1 {
				continue
			}
			lit, ok := ret.Results[0].(*ast.BasicLit)
			if !ok {
				continue
			}
			kind, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			mk, ok := commandKinds[kind]
			require.True(t, ok, "command kind %q (%s) is missing from commandKinds", kind, name)
			require.Equal(t, "*commands."+star.X.(*ast.Ident).Name, fmt.Sprintf("%T", mk()), kind)
			found++
		}
	}
	require.Equal(t, len(commandKinds), found)
}

// The bound on a forwarded request's result follows its array, so crewds of this build and of the build before it
// understand each other in a rolling upgrade: a writer of the build before reads the array and decides without a
// bound, as it would; this build reads a follower of that build's request, the array alone, as one without a bound.
// Anything else after the array is refused.
func TestForwardedBoundFollowsTheArray(t *testing.T) {
	r := Request{Principal: events.OrchestratorPrincipal("r"), CommandID: "id-1",
		Actor: events.Actor{Role: events.RoleOrchestrator}, Command: &RunTransition{RunID: "r", To: "running"},
		MaxResultBytes: 300}
	b, err := EncodeRequest(r)
	require.NoError(t, err)

	// The build before decoded the whole message into the array of five, and msgpack reads one value.
	var before forwarded
	require.NoError(t, msgpack.Unmarshal(b, &before))
	require.Equal(t, "run.transition", before.Kind)
	require.Equal(t, "id-1", before.CommandID)

	// What the build before sends: the array alone.
	unbound := r
	unbound.MaxResultBytes = 0
	ub, err := EncodeRequest(unbound)
	require.NoError(t, err)
	c, err := msgpack.Marshal(r.Command)
	require.NoError(t, err)
	old, err := marshalArray(&forwarded{Principal: r.Principal, CommandID: r.CommandID, Actor: r.Actor,
		Kind: r.Command.Kind(), Command: c})
	require.NoError(t, err)
	require.Equal(t, old, ub)
	got, err := DecodeRequest(old)
	require.NoError(t, err)
	require.Equal(t, unbound, got)

	got, err = DecodeRequest(b)
	require.NoError(t, err)
	require.Equal(t, r, got)

	for name, tail := range map[string][]byte{
		"a second value": {0x01, 0x02}, "a bound of 0": {0x00}, "a negative bound": {0xff}, "a string": {0xa1, 'x'},
		"a truncated int": {0xcd, 0x01},
	} {
		_, err := DecodeRequest(append(slices.Clone(old), tail...))
		require.Error(t, err, name)
	}
}

// A settle whose text its follower cut carries the rest of the text as sent beside it (forwardedSettle.SentRest),
// which a writer of the build before SentText skips as a field it does not know: it decides the cut text, as it
// decided a settle its follower cut; an uncut settle is the bytes that build sent.
func TestAForwardedCutSettleIsReadByTheBuildBefore(t *testing.T) {
	type settleBefore struct { // DelegateSettle as the build before SentText has it
		RunID, SubID, Outcome, Text string
		UsageTokens                 *int64
	}
	tokens := int64(5)
	cut := &DelegateSettle{RunID: "r", SubID: "gc-1", Outcome: OutcomeOK, Text: "<", SentText: "<<",
		UsageTokens: &tokens}
	b, err := EncodeRequest(forwardedRequest(cut))
	require.NoError(t, err)
	var f forwarded
	require.NoError(t, msgpack.Unmarshal(b, &f))
	var before settleBefore
	require.NoError(t, msgpack.Unmarshal(f.Command, &before))
	require.Equal(t, settleBefore{RunID: "r", SubID: "gc-1", Outcome: OutcomeOK, Text: "<",
		UsageTokens: &tokens}, before)

	b, err = EncodeRequest(forwardedRequest(&DelegateSettle{RunID: "r", SubID: "gc-1", Outcome: OutcomeOK,
		Text: "<<"}))
	require.NoError(t, err)
	require.NoError(t, msgpack.Unmarshal(b, &f))
	uncut := []byte(f.Command)
	sentBefore, err := msgpack.Marshal(&settleBefore{RunID: "r", SubID: "gc-1", Outcome: OutcomeOK, Text: "<<"})
	require.NoError(t, err)
	require.Equal(t, sentBefore, uncut)
}

// TestAForwardedCutSettleTakesItsTextAsSentOnce: a settle whose text its follower cut was forwarded with the text
// as sent beside the cut, both whole, so that its NATS message took the bytes of the request as sent and those of the
// cut again: a settle that fit one message sent whole (the servers' max_payload above --max-frame, as crewd asks) was
// refused bad-params once cut, though a settlement is cut rather than refused so that its run can finish. What is
// sent beside the cut is the rest of the text as sent; the writer reads the settle the follower cut.
func TestAForwardedCutSettleTakesItsTextAsSentOnce(t *testing.T) {
	sent := strings.Repeat("a", 40<<10) + strings.Repeat("<", 20<<10)
	for _, cutAt := range []int{0, 1, 40 << 10, len(sent) - 1} {
		cut := &DelegateSettle{RunID: "r", SubID: "gc-1", Outcome: OutcomeOK, Text: sent[:cutAt], SentText: sent}
		b, err := EncodeRequest(forwardedRequest(cut))
		require.NoError(t, err)
		whole, err := EncodeRequest(forwardedRequest(&DelegateSettle{RunID: "r", SubID: "gc-1", Outcome: OutcomeOK,
			Text: sent}))
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), len(whole)+32, "cut at %d: the text as sent is forwarded once", cutAt)

		got, err := DecodeRequest(b)
		require.NoError(t, err)
		require.Equal(t, forwardedRequest(cut), got, "cut at %d", cutAt)
	}
}

// forwardedCredential is a worker's credential of forwardedRequest's task.
func forwardedCredential() *Credential {
	return &Credential{RunID: "r", Key: "t1", Digest: strings.Repeat("ab", 32), TaskID: "t1"}
}

// A forwarded request's credential travels beside its bytes: what EncodeCredential writes DecodeCredential reads
// back, whatever the strings hold; no credential is no bytes. What is not such bytes is refused, never read as
// another credential or as none.
func TestForwardedCredentialRoundTrip(t *testing.T) {
	for _, c := range []*Credential{
		forwardedCredential(),
		{RunID: "r", Key: events.OrchestratorKey, Digest: "d"},
		{RunID: "r", Key: "t1", Digest: strings.Repeat("ab", 32), TaskID: "t1", Attempt: 3},
		{RunID: "run\r\nX-Injected: 1", Key: "t\x00é", Digest: strings.Repeat("ab", 32), TaskID: "t\x00é"},
		{RunID: strings.Repeat("r", 256), Key: strings.Repeat("k", 256), Digest: strings.Repeat("d", 64),
			TaskID: strings.Repeat("k", 256)},
	} {
		b, err := EncodeCredential(c)
		require.NoError(t, err)
		require.NotEmpty(t, b)
		got, err := DecodeCredential(b)
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	b, err := EncodeCredential(nil)
	require.NoError(t, err)
	require.Empty(t, b)
	got, err := DecodeCredential(nil)
	require.NoError(t, err)
	require.Nil(t, got)

	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		return b
	}
	valid, err := EncodeCredential(forwardedCredential())
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"three strings":      enc([]string{"r", "t1", "ab"}),
		"five strings":       enc([]string{"r", "t1", "ab", "t1", "x"}),
		"an attempt of 0":    enc([]string{"r", "t1", "ab", "t1", "0"}),
		"a negative attempt": enc([]string{"r", "t1", "ab", "t1", "-1"}),
		"a padded attempt":   enc([]string{"r", "t1", "ab", "t1", "01"}),
		"six strings":        enc([]string{"r", "t1", "ab", "t1", "1", "1"}),
		"four ints":          enc([]int{1, 2, 3, 4}),
		"a map":              enc(map[string]string{"RunID": "r"}),
		"a value after it":   append(slices.Clone(valid), 0x01),
		"truncated":          valid[:len(valid)-1],
		"past its bound":     enc([]string{strings.Repeat("r", MaxCredentialBytes), "", "", ""}),
		"an unknown msgpack": {0xc1},
	} {
		c, err := DecodeCredential(b)
		require.Error(t, err, name)
		require.Nil(t, c, name)
	}
}

// FuzzDecodeCredential: no bytes make DecodeCredential panic, and what it accepts encodes back to bytes it reads as
// the same credential.
func FuzzDecodeCredential(f *testing.F) {
	b, err := EncodeCredential(forwardedCredential())
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCredential(b)
		if err != nil || c == nil {
			return
		}
		again, err := EncodeCredential(c)
		require.NoError(t, err)
		back, err := DecodeCredential(again)
		require.NoError(t, err)
		require.Equal(t, c, back)
	})
}

// A writer's refusal of an ended credential reaches the follower as the very error a single crewd's engine gives,
// not wrapped (the broker tells it by its type and answers revoked or stale-token), whatever the end. An error that
// wraps one, as an engine's failure would, stays a failure: it says more than that nothing was decided.
func TestForwardedCredentialEndedIsTheSameError(t *testing.T) {
	for _, end := range []CredentialEnd{CredentialRevoked, CredentialRunEnded, CredentialTaskEnded} {
		b, err := EncodeReply(Reply{}, &CredentialEndedError{End: end})
		require.NoError(t, err)
		_, err = DecodeReply(b)
		ended, ok := err.(*CredentialEndedError)
		require.True(t, ok, "%T: %v", err, err)
		require.Equal(t, end, ended.End)
		require.NotErrorIs(t, err, ErrRemote)
	}
	for _, failure := range []error{
		fmt.Errorf("%w: %v", ErrFailed, &CredentialEndedError{End: CredentialRevoked}),
		fmt.Errorf("%w: %w", ErrFailed, &CredentialEndedError{End: CredentialRevoked}),
	} {
		b, err := EncodeReply(Reply{}, failure)
		require.NoError(t, err)
		_, err = DecodeReply(b)
		require.ErrorIs(t, err, ErrRemote, "%v", failure)
		var ended *CredentialEndedError
		require.NotErrorAs(t, err, &ended, "%v", failure)
	}
}
