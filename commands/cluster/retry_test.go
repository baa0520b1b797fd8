package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// A command forwarded by a follower and decided by the writer is answered its outcome when it is sent again after
// the writer changed — to the follower that forwarded it, or to another, whichever is the new writer —
// and another request under its id is refused: the outcomes travel with the stream, those that wrote no event too,
// and each principal's ids are its own.
func TestARetryAfterTheWriterChangedIsAnsweredItsOutcome(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	a := startWriterOn(t, srv, Options{Name: "a", Log: cfg, LeaseTTL: time.Second})
	f := startOn(t, srv, Options{Name: "f", Log: cfg, LeaseTTL: time.Second})
	g := startOn(t, srv, Options{Name: "g", Log: cfg, LeaseTTL: time.Second})
	require.False(t, f.Writer())
	require.False(t, g.Writer())
	require.Nil(t, submitAsAdmin(t, a, &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	require.Nil(t, submitAsAdmin(t, a, &commands.RunTransition{RunID: "R", To: "running"}).Rejected)

	adm, orch := events.AdminPrincipal(), events.OrchestratorPrincipal("R")
	task := func(id string) commands.Command {
		return &commands.TaskCreate{RunID: "R", TaskID: id, Role: "executor", Agent: "a", Title: "t", Cwd: "/w"}
	}
	type retried struct {
		req   commands.Request
		other commands.Command
		first commands.Reply
	}
	rs := []*retried{
		{req: commands.Request{Principal: orch, CommandID: "same", Actor: orch.Actor(), Command: task("T1")},
			other: task("T9")},
		{req: commands.Request{Principal: adm, CommandID: "same", Actor: adm.Actor(),
			Command: &commands.RunCreate{RunID: "S", Team: "t", Goal: "g", Cwd: "/w"}},
			other: &commands.RunCreate{RunID: "S9", Team: "t", Goal: "g", Cwd: "/w"}},
		{req: commands.Request{Principal: orch, CommandID: "missing", Actor: orch.Actor(),
			Command: &commands.TaskTransition{RunID: "R", TaskID: "T8", To: "running"}},
			other: &commands.TaskTransition{RunID: "R", TaskID: "T8", To: "failed"}},
	}
	for _, r := range rs {
		rep, err := submitTo(t, f, r.req)
		require.NoError(t, err)
		require.False(t, rep.Replayed)
		r.first = rep
	}
	require.Nil(t, rs[0].first.Rejected)
	require.Nil(t, rs[1].first.Rejected, "the admin's id is not the orchestrator's")
	require.NotNil(t, rs[2].first.Rejected)
	require.Zero(t, rs[2].first.Position, "a refusal that wrote no event")
	head := a.Engine().Head()

	require.NoError(t, a.Close())
	var w *Node // f or g
	select {
	case <-f.Elected():
		w = f
	case <-g.Elected():
		w = g
	case <-time.After(20 * time.Second):
		t.Fatal("no new writer")
	}
	waitHead(t, f, head)
	waitHead(t, g, head)
	for _, via := range []struct {
		name string
		n    *Node
	}{{"f", f}, {"g", g}} {
		for _, r := range rs {
			again, err := submitTo(t, via.n, r.req)
			require.NoError(t, err, via.name)
			require.True(t, again.Replayed, "%s: %s %q of %s", via.name, r.req.Command.Kind(), r.req.CommandID,
				r.req.Principal.Key())
			require.Equal(t, string(r.first.Result), string(again.Result), via.name)
			require.Equal(t, r.first.Rejected, again.Rejected, via.name)
			require.Equal(t, r.first.Position, again.Position, via.name)

			other := r.req
			other.Command = r.other
			refused, err := submitTo(t, via.n, other)
			require.NoError(t, err, via.name)
			require.Equal(t, "commandid-reused", refused.Rejected.Reason, via.name)
		}
	}
	require.Equal(t, head, w.Engine().Head(), "nothing appended")

	// A request its caller refused (the broker's measure of a message against its node's copy) is answered by a
	// follower from its copy's outcome, which the forwarded request could not ask the writer for.
	follower := f
	if w == f {
		follower = g
	}
	refusal := errors.New("refused by the caller")
	for _, r := range rs {
		req := r.req
		req.Refused = refusal
		again, err := submitTo(t, follower, req)
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, string(r.first.Result), string(again.Result))
		require.Equal(t, r.first.Rejected, again.Rejected)
		req.Command = r.other
		refused, err := submitTo(t, follower, req)
		require.NoError(t, err)
		require.Equal(t, "commandid-reused", refused.Rejected.Reason)
	}
	fresh := rs[0].req
	fresh.CommandID, fresh.Refused = "fresh", refusal
	_, err := submitTo(t, follower, fresh)
	require.ErrorIs(t, err, refusal)
	require.Equal(t, head, w.Engine().Head(), "nothing appended")
}
