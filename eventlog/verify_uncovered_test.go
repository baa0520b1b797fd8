package eventlog

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// TestVerifyDetectsARecordWithNoOutcome: a record stamped with a command id
// is named by an outcome of that command; an outcome deleted, or rewritten to
// name fewer records than its command wrote, leaves records no outcome names,
// and Verify reports the first of them, the same one at every run.
func TestVerifyDetectsARecordWithNoOutcome(t *testing.T) {
	cases := map[string]struct {
		damage    func(t *testing.T, l *Log)
		principal func([]byte, *Event) []byte
		pos       uint64
		reason    string
	}{
		"outcome deleted": {damage: func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Delete(outcomeKey("", "cmd-b"), pebble.Sync))
		}, pos: 3, reason: `record of command "cmd-b" is named by no outcome`},
		"outcome of the last command deleted": {damage: func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Delete(outcomeKey("", "cmd-d"), pebble.Sync))
		}, pos: 7, reason: `record of command "cmd-d" is named by no outcome`},
		"outcome naming fewer records than its command wrote": {damage: func(t *testing.T, l *Log) {
			o := Outcome{First: 3, Count: 1}
			require.NoError(t, l.db.Set(outcomeKey("", "cmd-b"), o.encode(), pebble.Sync))
		}, pos: 4, reason: `record of command "cmd-b" is named by no outcome`},
		"outcome of a format-2 store deleted": {damage: func(t *testing.T, l *Log) {
			toLegacy(t, l)
			require.NoError(t, l.db.Delete(legacyCommandKey("cmd-c"), pebble.Sync))
		}, pos: 5, reason: `record of command "cmd-c" is named by no outcome`},
		"outcome deleted, principals checked": {damage: func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Delete(outcomeKey("", "cmd-a"), pebble.Sync))
		}, principal: func(dst []byte, _ *Event) []byte { return dst }, pos: 1,
			reason: `record of command "cmd-a" of principal "" is named by no outcome`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := buildSample(t)
			defer l.Close()
			c.damage(t, l)
			opts := &VerifyOptions{Principal: c.principal}
			_, first := l.Verify(opts)
			for range 8 {
				_, err := l.Verify(opts)
				require.ErrorIs(t, err, ErrCorrupt)
				require.Equal(t, first, err)
				var ce *CorruptError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, c.pos, ce.Position, "%v", err)
				require.Equal(t, keyString(eventKey(c.pos)), ce.Key)
				require.Contains(t, ce.Reason, c.reason)
			}
		})
	}
}

// TestVerifyPassesAStoreOfManyCommands: a sound store whose records are
// written by thousands of commands of several principals, interleaved with
// records of no command and with commands that wrote none, verifies, with
// principals checked or not, in the layout of format 3 and of format 2.
func TestVerifyPassesAStoreOfManyCommands(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	streams := []string{"run-1", "run-2", "run-3"}
	commands, events := 0, uint64(0)
	for a := range 60 {
		var ws []Write
		for i := range 50 {
			n := a*50 + i
			s := streams[n%len(streams)]
			w := Write{Principal: "o" + s, CommandID: fmt.Sprint("cmd-", n), Events: evs(s, n%5)}
			if n%5 == 0 {
				w.Code, w.Reason = "bad-params", "no"
			}
			ws = append(ws, w)
			commands++
			events += uint64(n % 5)
			if n%7 == 0 {
				ws = append(ws, Write{Events: evs(s, 2)})
				events += 2
			}
		}
		_, err := l.Append(ws...)
		require.NoError(t, err)
	}
	check := func(layout string) {
		for _, principal := range []func([]byte, *Event) []byte{nil, principalByStream} {
			rep, err := l.Verify(&VerifyOptions{Principal: principal})
			require.NoError(t, err, layout)
			require.Equal(t, events, rep.Head, layout)
			require.Equal(t, commands, rep.Commands, layout)
		}
	}
	check("format 3")
	toLegacy(t, l)
	check("format 2")
}

// TestVerifyDetectsARecordInsideAnotherCommandsOutcome: an outcome's first
// and last records are its command's, but a record between them was written
// by another principal, so it is not named by an outcome of its own
// (principal, command id).
func TestVerifyDetectsARecordInsideAnotherCommandsOutcome(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	_, err := l.Append(Write{Principal: "orun-1", CommandID: "c",
		Events: []Event{ev("run-1", "x"), ev("run-2", "y"), ev("run-1", "z")}})
	require.NoError(t, err)
	_, err = l.Verify(nil)
	require.NoError(t, err, "without principals every record is command c's")
	_, err = l.Verify(&VerifyOptions{Principal: principalByStream})
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.EqualValues(t, 2, ce.Position)
	require.Equal(t, `record of command "c" of principal "orun-2" lies inside positions 1-3, which an outcome of `+
		`another command names`, ce.Reason)
}
