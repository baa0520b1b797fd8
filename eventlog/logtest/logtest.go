// Package logtest is the conformance suite of crewlog's log contract: the
// one commit step the engine uses (commands.Committer) over the local log
// every node reads. The Pebble log and the JetStream log (eventlog/natslog)
// both run it, so they keep the same guarantees: gapless positions,
// per-stream versions, outcomes recorded for good, a refused group leaving
// no trace, and a copy rebuilt from the durable log equal to the original,
// hash chain included.
package logtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// Backend is one log under test.
type Backend struct {
	// Commit makes a group durable (commands.Committer).
	Commit func(ws []eventlog.Write) (first uint64, err error)
	// Local is the log Commit appends to, which readers use.
	Local *eventlog.Log
	// Copy opens a new log rebuilt from the backend's durable log alone
	// (a checkpoint of the Pebble store, a fresh copy of the stream): what
	// a restarted or a new node reads. The caller closes it.
	Copy func(t *testing.T) *eventlog.Log
}

// Run runs the suite; open returns a new, empty backend for each case.
func Run(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("gapless positions and stream versions", func(t *testing.T) { gapless(t, open(t)) })
	t.Run("outcomes recorded, duplicates refused without trace", func(t *testing.T) { outcomes(t, open(t)) })
	t.Run("invalid group leaves no trace", func(t *testing.T) { invalid(t, open(t)) })
	t.Run("copy equals the original", func(t *testing.T) { copyEquals(t, open(t)) })
}

func ev(stream, typ string) eventlog.Event {
	return eventlog.Event{Stream: stream, Type: typ, SchemaVersion: 1, Time: 1, ActorRole: "admin",
		Payload: []byte{0x80}}
}

func write(principal, id string, evs ...eventlog.Event) eventlog.Write {
	return eventlog.Write{Principal: principal, CommandID: id, Result: []byte(`{"ok":true}`),
		Fingerprint: []byte("fp-" + id), Events: evs}
}

// group is three commands on two streams, one a recorded rejection
// without events.
func group(n int) []eventlog.Write {
	a, b := fmt.Sprintf("a%d", n), fmt.Sprintf("b%d", n)
	rej := write("admin", "rej-"+a)
	rej.Code, rej.Reason = "bad-params", "nope"
	return []eventlog.Write{
		write("admin", "cmd-"+a, ev("run-a", "run.created"), ev("run-a", "task.created")),
		rej,
		write("orchestrator:run-b", "cmd-"+b, ev("run-b", "run.created")),
	}
}

func gapless(t *testing.T, b Backend) {
	want := uint64(1)
	for n := range 4 {
		first, err := b.Commit(group(n))
		require.NoError(t, err)
		require.Equal(t, want, first)
		want += 3
	}
	head, _ := b.Local.Head()
	require.Equal(t, uint64(12), head)
	versions := map[string]uint64{}
	it := b.Local.Read(1)
	pos := uint64(0)
	for it.Next() {
		e := it.Event()
		pos++
		require.Equal(t, pos, e.Position)
		versions[e.Stream]++
		require.Equal(t, versions[e.Stream], e.StreamVersion, "stream %s", e.Stream)
	}
	require.NoError(t, it.Close())
	require.Equal(t, uint64(12), pos)
	require.Equal(t, map[string]uint64{"run-a": 8, "run-b": 4}, versions)
}

func outcomes(t *testing.T, b Backend) {
	_, err := b.Commit(group(0))
	require.NoError(t, err)
	o, err := b.Local.Outcome("admin", "cmd-a0")
	require.NoError(t, err)
	require.Equal(t, eventlog.Outcome{Principal: "admin", CommandID: "cmd-a0", First: 1, Count: 2,
		Result: []byte(`{"ok":true}`), Fingerprint: []byte("fp-cmd-a0")}, o)
	o, err = b.Local.Outcome("admin", "rej-a0")
	require.NoError(t, err)
	require.Equal(t, "bad-params", o.Code)
	_, err = b.Local.Outcome("orchestrator:run-x", "cmd-a0")
	require.ErrorIs(t, err, eventlog.ErrNotFound, "another principal's id is another id")

	_, err = b.Commit([]eventlog.Write{write("admin", "cmd-a0", ev("run-a", "task.started"))})
	require.ErrorIs(t, err, eventlog.ErrDuplicateCommand)
	requireSameAsCopy(t, b, 3)
}

func invalid(t *testing.T, b Backend) {
	_, err := b.Commit(group(0))
	require.NoError(t, err)
	_, err = b.Commit([]eventlog.Write{write("admin", "c-bad", ev("", "run.created"))})
	require.ErrorIs(t, err, eventlog.ErrInvalid)
	requireSameAsCopy(t, b, 3)
}

func copyEquals(t *testing.T, b Backend) {
	for n := range 3 {
		_, err := b.Commit(group(n))
		require.NoError(t, err)
	}
	requireSameAsCopy(t, b, 9)
	_, err := b.Local.Verify(nil)
	require.NoError(t, err)
}

// requireSameAsCopy checks that a copy rebuilt from the durable log holds
// exactly what Local holds: head, hash, every record and the outcomes.
func requireSameAsCopy(t *testing.T, b Backend, head uint64) {
	t.Helper()
	c := b.Copy(t)
	defer c.Close()
	h1, hash1 := b.Local.Head()
	h2, hash2 := c.Head()
	require.Equal(t, head, h1)
	require.Equal(t, h1, h2)
	require.Equal(t, hash1, hash2)
	for pos := uint64(1); pos <= h1; pos++ {
		e1, err := b.Local.Event(pos)
		require.NoError(t, err)
		e2, err := c.Event(pos)
		require.NoError(t, err)
		require.Equal(t, e1, e2)
		if e1.CommandID == "" {
			continue
		}
		o1, err1 := b.Local.Outcome(principalOf(e1.CommandID), e1.CommandID)
		o2, err2 := c.Outcome(principalOf(e1.CommandID), e1.CommandID)
		require.NoError(t, errors.Join(err1, err2))
		require.Equal(t, o1, o2)
	}
	_, err := c.Verify(nil)
	require.NoError(t, err)
}

func principalOf(id string) string {
	if id[:5] == "cmd-b" {
		return "orchestrator:run-b"
	}
	return "admin"
}
