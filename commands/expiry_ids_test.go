package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The engine clock expires a delegation and a question of a run whatever
// the length of the run's id: a command id built from a long run id is one
// the log refuses, and the delegation kept its slot (the question its
// parked task) for good.
func TestTickExpiresTheObjectsOfARunWithALongID(t *testing.T) {
	runID := strings.Repeat("r", eventlog.MaxStreamLen-5)
	clock := newTestClock()
	f := openEngine(t, vfs.NewMem(), clock, nil)
	f.seedRun(runID, 0)
	submit := func(c Command) json.RawMessage {
		r, err := f.eng.Submit(context.Background(), Request{Actor: worker("02_exec"), Command: c})
		require.NoError(t, err)
		require.Nil(t, r.Rejected, "%s", c.Kind())
		return r.Result
	}
	var del DelegateResult
	require.NoError(t, json.Unmarshal(submit(&DelegateRequest{RunID: runID, TaskID: "02_exec", Prompt: "p",
		TimeoutSec: ptr(5.0)}), &del))
	var ask WaitResult
	require.NoError(t, json.Unmarshal(submit(&WaitRequest{RunID: runID, TaskID: "02_exec", Question: "q",
		TimeoutSec: ptr(30.0)}), &ask))

	clock.Advance(36 * time.Second) // past 5 s + 30 s grace, and past the question's 30 s
	require.Equal(t, 2, f.eng.Tick(context.Background()))
	require.Zero(t, f.eng.Tick(context.Background()), "expired once")
	f.eng.Read(func(s *projections.State) {
		d, _ := s.Delegation(runID, del.GrandchildTaskRef)
		require.Equal(t, projections.DelegationTimedOut, d.Status)
		require.Zero(t, s.SlotsHeld())
		a, _ := s.Ask(runID, ask.QuestionID)
		require.Equal(t, projections.AskTimedOut, a.Status)
	})
	for _, c := range []Command{&DelegateExpire{RunID: runID, SubID: del.GrandchildTaskRef},
		&AskExpire{RunID: runID, QuestionID: ask.QuestionID}} {
		id := expiryID(c)
		require.LessOrEqual(t, len(id), eventlog.MaxIDLen)
		o, err := f.log.Outcome(events.EnginePrincipal().Key(), id)
		require.NoError(t, err, "%s is recorded under %s", c.Kind(), id)
		require.True(t, o.Accepted())
	}
}
