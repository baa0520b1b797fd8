package commands

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// groupReports is an Observer that keeps every group's command reports and events.
type groupReports struct {
	mu     sync.Mutex
	cmds   [][]CommandReport
	events []int
}

func (g *groupReports) Committed(r *GroupReport) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cmds = append(g.cmds, append([]CommandReport(nil), r.Commands...))
	g.events = append(g.events, r.Events)
}
func (g *groupReports) Snapshotted(uint64, int, time.Time) {}

// openObserved opens an engine on a fresh log that tells obs what it commits, with the test hooks given (or none).
func openObserved(t *testing.T, obs Observer, hooks *testHooks) *Engine {
	t.Helper()
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	e, err := Open(l, Options{Clock: newTestClock().Now, NewID: counterIDs(), ExpiryInterval: -1, Observer: obs,
		hooks: hooks})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

// A group that fails to commit — as it is handed to the log, once the log has it, or as it is published — is
// answered with the failure; the observer counts its commands as the errors their callers got, and no event
// appended, where it was told nothing of that group.
func TestTheObserverCountsAFailedGroupAsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   commitPoint
	}{
		{"handed to the log", pointDecided},
		{"durable", pointDurable},
		{"published", pointPublished},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &groupReports{}
			e := openObserved(t, obs, &testHooks{commit: func(point commitPoint, group []*pending) error {
				if point == tc.at && group[0].req.CommandID == "doomed" {
					return errors.New("the disk went away")
				}
				return nil
			}})
			admin := events.AdminPrincipal()
			_, err := e.Submit(context.Background(),
				as(admin, "fine", &RunCreate{RunID: "R1", Team: "t", Goal: "g", Cwd: "/w"}))
			require.NoError(t, err)
			_, err = e.Submit(context.Background(),
				as(admin, "doomed", &RunCreate{RunID: "R2", Team: "t", Goal: "g", Cwd: "/w"}))
			require.ErrorIs(t, err, ErrFailed)
			require.NoError(t, e.Close())
			obs.mu.Lock()
			defer obs.mu.Unlock()
			require.Equal(t, [][]CommandReport{
				{{Method: "run.create", Outcome: OutcomeAdmitted}},
				{{Method: "run.create", Outcome: OutcomeError}},
			}, obs.cmds)
			require.Equal(t, []int{1, 0}, obs.events, "the failed group appended nothing")
		})
	}
}

// A result longer than its caller can carry is the caller's refusal, as its client is answered (oversize-frame),
// not an error of the engine: a worker that sends a long request id must not move the figure an operator alerts on
// for bugs and failed commits.
func TestTheObserverSeesAResultTooLargeAsARefusal(t *testing.T) {
	obs := &groupReports{}
	e := openObserved(t, obs, nil)
	r := as(events.AdminPrincipal(), "c1", &RunCreate{RunID: "R1", Team: "t", Goal: "g", Cwd: "/w"})
	r.MaxResultBytes = 1
	_, err := e.Submit(context.Background(), r)
	require.ErrorIs(t, err, ErrResultTooLarge)
	require.NoError(t, e.Close())
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Equal(t, [][]CommandReport{{{Method: "run.create", Outcome: OutcomeRejected,
		Reason: "oversize-frame"}}}, obs.cmds)
}
