package audit

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestExplainGroupsEventsWithoutACommandID: a command id is optional, and the events of a command sent without one
// are grouped into decisions by their stream and clock reading: an admission and the settlement that follows it at a
// later time are two decisions, and two refusals of the capability gate at the same time (each a lone
// delegate.rejected) are two as well. Merged, one decision was re-run against the other's events and called drift,
// and the second went unexplained.
func TestExplainGroupsEventsWithoutACommandID(t *testing.T) {
	const run = "team_20261001090000_0000000000000009"
	off := projections.DefaultConfig()
	off.NestingEnabled = false
	refused := &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p"}
	steps := []struct {
		sameTime bool // decided at the clock reading of the step before
		decided
	}{
		{false, decided{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Cwd: "/srv"}}},
		{false, decided{audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"}}},
		{false, decided{audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "explorer",
			Agent: "explorer", StepID: "s"}}},
		{false, decided{audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}}},
		{false, decided{audittest.Worker("t1"), &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p"}}},
		{false, decided{audittest.Orchestrator, &commands.DelegateSettle{RunID: run, SubID: "gc-00000001",
			Outcome: commands.OutcomeOK}}},
		{false, decided{audittest.Admin, &commands.Configure{Config: off}}},
		{false, decided{audittest.Worker("t1"), refused}},
		{true, decided{audittest.Worker("t1"), refused}},
	}

	dir := filepath.Join(t.TempDir(), "store")
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	s := projections.New()
	now, ids := audittest.Epoch.UnixNano(), 0
	for _, st := range steps {
		if !st.sameTime {
			now += 1e9
		}
		env := commands.Env{Config: s.Config(), Now: now, Actor: st.actor, NewID: func() string {
			ids++
			return fmt.Sprintf("%08d", ids)
		}}
		d, err := commands.Decide(s, st.cmd, env)
		var rej *commands.RejectedError
		if err != nil && !errors.As(err, &rej) {
			require.NoError(t, err)
		}
		require.NotEmpty(t, d.Events, "%s records its decision", st.cmd.Kind())
		w := eventlog.Write{}
		for _, ev := range d.Events {
			require.Empty(t, ev.CommandID)
			p, err := events.EncodePayload(ev.Payload)
			require.NoError(t, err)
			w.Events = append(w.Events, eventlog.Event{Stream: ev.Stream, Type: ev.Type, SchemaVersion: ev.SchemaVersion,
				Time: ev.Time, CorrelationID: ev.CorrelationID, ActorRole: ev.Actor.Role, ActorTask: ev.Actor.TaskID,
				Payload: p})
		}
		first, err := l.Append(w)
		require.NoError(t, err)
		for i, ev := range d.Events {
			ev.Position = first + uint64(i)
			projections.Apply(s, ev)
		}
	}
	require.NoError(t, l.Close())
	l, err = Open(dir)
	require.NoError(t, err)
	defer l.Close()

	res, err := Replay(l, ReplayOptions{Explain: true})
	require.NoError(t, err)
	var commandsExplained []string
	for _, d := range res.Decisions {
		require.False(t, d.Drift, "%s at %d..%d: %v", d.Command, d.Position, d.Last, d.Differences)
		commandsExplained = append(commandsExplained, d.Command)
	}
	require.Equal(t, []string{"delegate.request", "delegate.settle", "engine.configure",
		"delegate.request", "delegate.request"}, commandsExplained)
}
