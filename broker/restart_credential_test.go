package broker

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestACredentialEndedBeforeARestartStaysEnded: a token is derived from the server key, which a restart keeps, so
// after a restart every token ever issued still derives; only the log says which of them ended. A worker token
// revoked, re-issued, whose task ended or whose run ended before crewd stopped is refused at its hello after the
// start as it was before it — whether the start read the credentials from its snapshot or folded them from the
// log — and a revoked orchestrator token too, while a credential that did not end is accepted (SPEC §5: digests
// persist).
func TestACredentialEndedBeforeARestartStaysEnded(t *testing.T) {
	ends := []struct {
		name string
		end  func(o *client)
		// who is the task the hello names and the token it presents (the credential ended), of the seeded run.
		who  func(s seeded) (string, string)
		code wire.Code
		msg  string
	}{
		{"revoked", func(o *client) { o.ok("credential.revoke", map[string]any{"taskId": taskP}) },
			func(s seeded) (string, string) { return taskP, s.p }, wire.CodeRevoked, wire.MsgTokenRevoked},
		// NB: a superseded secret answers as any wrong token of an existing task does (GS-20(c)).
		{"re-issued", func(o *client) { o.ok("credential.issue", map[string]any{"taskId": taskP}) },
			func(s seeded) (string, string) { return taskP, s.p }, wire.CodeStaleToken, wire.MsgStaleToken},
		{"task completed", func(o *client) {
			o.ok("task.transition", map[string]any{"taskId": taskP, "to": "completed"})
		}, func(s seeded) (string, string) { return taskP, s.p }, wire.CodeStaleToken, wire.MsgTaskTerminal},
		{"run completed", func(o *client) { o.ok("run.transition", map[string]any{"to": "completed"}) },
			func(s seeded) (string, string) { return taskP, s.p }, wire.CodeStaleToken, wire.MsgRunTerminal},
		{"orchestrator revoked", func(o *client) {
			o.ok("credential.revoke", map[string]any{"taskId": events.OrchestratorKey})
		}, func(s seeded) (string, string) { return events.OrchestratorKey, s.orch }, wire.CodeRevoked,
			wire.MsgTokenRevoked},
	}
	starts := []struct {
		name          string
		snapshotEvery int64
		fromSnapshot  bool
	}{
		{"from a snapshot", 1, true},
		{"folded from the log", -1, false},
	}
	for _, start := range starts {
		for _, tc := range ends {
			t.Run(start.name+"/"+tc.name, func(t *testing.T) {
				mem := vfs.NewMem()
				f := newFixture(t, fixtureOpts{fs: mem, snapshotEvery: start.snapshotEvery})
				s := f.seed()
				o := f.dial()
				o.hello(runR, events.OrchestratorKey, s.orch)
				tc.end(o)
				endedAt := f.eng.Head()
				for i := 0; start.fromSnapshot && i < 4; i++ {
					// NB: the runs' events take the head past the next snapshot that comes due (every event with
					// snapshotEvery 1, or twice the last one's records): the newest snapshot then holds the end.
					f.seedRun(fmt.Sprintf("S%d", i), "X")
				}
				task, token := tc.who(s)
				f.dial().refusedHello(runR, task, token, tc.code)
				o.nc.Close()
				f.close()

				g := newFixture(t, fixtureOpts{fs: mem, snapshotEvery: start.snapshotEvery})
				info := g.eng.LoadInfo()
				// NB: from a snapshot, the end must be in it, not folded after it.
				require.Equal(t, start.fromSnapshot, info.SnapshotPosition >= endedAt,
					"the start read the end (at %d) from a snapshot: %+v", endedAt, info)
				e := g.dial().refusedHello(runR, task, token, tc.code)
				require.Equal(t, tc.msg, e.Message)
				if tc.name != "run completed" {
					// NB: the control: the restarted crewd accepts a credential that did not end.
					q := g.dial()
					q.hello(runR, taskQ, s.q)
					require.Equal(t, true, q.ok("ping", nil)["pong"])
				}
			})
		}
	}
}
