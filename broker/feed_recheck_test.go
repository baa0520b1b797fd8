package broker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// An event that ends credentials is re-checked on the connections it can end, not on every connection of its run:
// a credential issued or revoked on its key's, a task's end on its workers'. Each re-check is an engine read, and
// an orchestrator can issue credentials in a loop to a run of up to MaxConnsPerRun connections. Only the run's end
// reaches them all. Whether the feed takes the event from the engine's tap or reads it from the log.
func TestTheFeedRechecksOnlyTheConnectionsAnEventCanEnd(t *testing.T) {
	cases := []struct {
		name   string
		change commands.Command
		ends   []string // the connections it ends: "p", "q" (workers of P and Q), "o" (the orchestrator)
		reach  int64    // the connections re-checked
	}{
		{"a worker's credential revoked", &commands.CredentialRevoke{RunID: runR, TaskID: taskP}, []string{"p"}, 1},
		{"a worker's credential issued again", &commands.CredentialIssue{RunID: runR, TaskID: taskQ, Digest: digestOf("x")},
			[]string{"q"}, 1},
		{"a task completed", &commands.TaskTransition{RunID: runR, TaskID: taskP, To: "completed"}, []string{"p"}, 1},
		{"the orchestrator's credential revoked", &commands.CredentialRevoke{RunID: runR, TaskID: events.OrchestratorKey},
			[]string{"o"}, 1},
		{"the run completed", &commands.RunTransition{RunID: runR, To: "completed"}, []string{"p", "q"}, 3},
	}
	for _, feed := range []struct {
		name     string
		tapBound int
	}{{"from the tap", 0}, {"from the log", -1}} {
		for _, tc := range cases {
			t.Run(feed.name+"/"+tc.name, func(t *testing.T) {
				f := newFixture(t, fixtureOpts{tapBound: feed.tapBound})
				s := f.seed()
				conns := map[string]*client{"p": f.dial(), "q": f.dial(), "o": f.dial()}
				conns["p"].hello(runR, taskP, s.p)
				conns["q"].hello(runR, taskQ, s.q)
				conns["o"].hello(runR, events.OrchestratorKey, s.orch)
				// NB: the feed follows the log in order: once P is pushed this message, it has passed the seed's events.
				conns["o"].ok("msg.send", map[string]any{"to": []string{taskP}, "body": "sync"})
				_, err := conns["p"].read()
				require.NoError(t, err)
				before := f.srv.feedRechecks.Load()

				r, err := f.eng.Submit(context.Background(), commands.Request{Actor: events.Actor{Role: events.RoleAdmin},
					Command: tc.change})
				require.NoError(t, err)
				require.Nil(t, r.Rejected)
				for _, name := range tc.ends {
					end := conns[name].untilError()
					require.NotEqual(t, wire.Code(""), end.Error.Code, name)
				}
				require.Equal(t, tc.reach, f.srv.feedRechecks.Load()-before, "connections re-checked")
			})
		}
	}
}
