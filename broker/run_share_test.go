package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// A run's orchestrator may issue a credential to every task it creates. What the daemon shares between runs is
// therefore budgeted per run as well as per credential: these tests give one run many credentials and require that,
// together, they get no more than their run's share.

// TestOneRunCannotHoldTheGlobalOutboundBudget: the workers of one run hold at most OutboundBytesPerRun of the
// daemon's outbound budget together, however many credentials the run issues, so another run's subscription, read
// as it comes, is not ended with a resync for want of the budget they took. Without the run's share, an orchestrator
// that issues a credential to each of 16 tasks (GlobalOutboundBytes/OutboundBytesPerCredential at the defaults) and
// has their subscriptions read nothing holds all of GlobalOutboundBytes, for writeTimeout and again at each
// reconnection.
func TestOneRunCannotHoldTheGlobalOutboundBudget(t *testing.T) {
	const creds, perConn, frame = 5, 64 << 10, 16 << 10
	f := newFixture(t, fixtureOpts{opts: Options{
		MaxFrame: frame, OutboundQueueCap: 4096, OutboundBytes: perConn, OutboundBytesPerCredential: perConn,
		OutboundBytesPerRun: 2 * perConn, GlobalOutboundBytes: 4 * perConn, RatePerCredential: -1,
	}, write: time.Minute})
	s := f.seed()
	tasks, tokens := f.issueWorkers(f.dialOrchestrator(s), creds)
	_, token := f.runWithWorker("B", "T")
	f.streamUsage(t, 10000)
	f.streamUsageOn(t, "B", "T", 60)
	// Each of run R's credentials within its own share, their five shares more than the daemon's budget: one
	// connection each, subscribed from the start, reading nothing.
	var held []*client
	for i, task := range tasks {
		c := f.dial()
		held = append(held, c)
		c.hello(runR, task, tokens[i])
		f.stalledSubscription(c, task)
	}
	// B's worker reads everything it is sent: fifty events, pushed faster than it reads them one by one.
	b := f.dial()
	b.hello("B", "T", token)
	b.ok("events.subscribe", map[string]any{"sinceSeq": 0})
	b.readsWithoutResync(50, "run R holds the daemon's budget")
	f.srv.mu.Lock()
	r := f.srv.runOut[runR]
	f.srv.mu.Unlock()
	require.NotNil(t, r, "run R's workers count against their run's budget")
	require.LessOrEqual(t, r.used.Load(), int64(2*perConn+creds*frame),
		"R's workers hold its share, and each connection one frame beyond it at most")

	for _, c := range held {
		c.nc.Close()
	}
	require.Eventually(t, func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		_, kept := f.srv.runOut[runR]
		return !kept
	}, guard, time.Millisecond, "a run's budget outlives its workers' connections")
}

// TestARunsCredentialsArePacedTogether: a worker's requests wait for its run's bucket as well as its credential's,
// so a run that issues a credential to every task it creates is served RatePerRun units a second together, not
// RatePerCredential for each credential. Another run's worker is served meanwhile, and so is the run's
// orchestrator: its workers cannot pace it, as they cannot take its connections (MaxConnsPerRun).
func TestARunsCredentialsArePacedTogether(t *testing.T) {
	const creds = 4
	f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1000, BurstPerCredential: 1 << 20,
		RatePerRun: 1000, BurstPerRun: creds * (helloCost + 1)}})
	clock := installPacerClock(f)
	waits := watchPacerWaits(f)
	s := f.seed()
	o := f.dialOrchestrator(s)
	tasks, tokens := f.issueWorkers(o, creds)
	_, token := f.runWithWorker("B", "T")
	clock.freeze()
	// A hello and a ping of each credential: together the run's whole burst, each one a sliver of its own.
	ws := make([]*client, creds)
	for i := range ws {
		ws[i] = f.dial()
		ws[i].hello(runR, tasks[i], tokens[i])
		ws[i].ok("ping", nil)
		require.Equal(t, float64(1<<20-helloCost-1), clock.level(workerKey(tasks[i])), "%s's own bucket", tasks[i])
	}
	require.Zero(t, clock.runLevel(runR), "the run's burst is spent")

	// The last worker's reader paced after its ping, with the run's bucket empty: it waits, its own bucket full.
	last := ws[creds-1]
	waits.arm()
	last.sendLine(`{"id":"late","method":"ping","params":{}}`)
	waits.await("a worker was served beyond its run's rate")
	other := f.dial()
	other.hello("B", "T", token)
	other.ok("ping", nil)
	o.ok("ping", nil)
	require.Zero(t, clock.runLevel(runR), "the late ping is not read while its run's bucket is empty")

	clock.advance(time.Millisecond) // one unit at 1,000 a second
	require.Equal(t, "late", last.answerOf("late").ID, "the run's refilled bucket lets the worker go on")
}

// runLevel is the units in run runID's bucket now.
func (c *pacerClock) runLevel(runID string) float64 {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.p.runs.refill(runID, c.p.now()).level
}

// issueWorkers has the orchestrator o create n running tasks W0… in its run R, issues each a credential and returns
// the tasks' ids and their tokens.
func (f *fixture) issueWorkers(o *client, n int) (tasks, tokens []string) {
	f.t.Helper()
	for i := range n {
		id := fmt.Sprintf("W%d", i)
		o.ok("task.create", map[string]any{"taskId": id, "role": "explorer", "agent": "a", "title": id,
			"cwd": "/w/" + id, "stepId": id})
		o.ok("task.transition", map[string]any{"taskId": id, "to": "running"})
		tasks = append(tasks, id)
		tokens = append(tokens, o.ok("credential.issue", map[string]any{"taskId": id})["token"].(string))
	}
	return tasks, tokens
}

// runWithWorker creates run runID, running, with one running task taskID, and returns its orchestrator's connection
// and the task's token.
func (f *fixture) runWithWorker(runID, taskID string) (orch *client, token string) {
	f.t.Helper()
	orch = f.dial()
	orch.hello(runID, events.OrchestratorKey, f.seedRun(runID, taskID))
	return orch, orch.ok("credential.issue", map[string]any{"taskId": taskID})["token"].(string)
}
