package broker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// Followers of runs that publish nothing more — an orchestrator subscribing to its finished (cold) run, the admin
// subscribing to or waiting on any finished run — leave nothing behind in the engine once they end: before, each left
// its run's change channel in the engine until the run's next publish, which a cold run never has, so subscriptions
// to finished runs grew the engine's memory with every run ever followed, for good.
func TestFollowersOfRunsThatPublishNothingLeaveNoChannelBehind(t *testing.T) {
	f := newColdFixture(t)
	a := f.dial()
	a.helloAdmin()
	const finished = 12
	for i := range finished {
		id := fmt.Sprintf("F%02d", i)
		o := f.dial()
		o.hello(id, events.OrchestratorKey, f.seedRun(id, "X"))
		o.ok("run.transition", map[string]any{"to": "completed"})
		o.nc.Close()
	}
	f.streamUsageOn(t, "R2", "W", 1) // a later group's eviction pass makes the last of them cold
	for i := range finished {
		// Each subscription replaces the one before, which has ended before the answer.
		a.ok("events.subscribe", map[string]any{"runId": fmt.Sprintf("F%02d", i)})
	}
	a.ok("events.subscribe", map[string]any{"runId": "R3"})
	for range 3 {
		// A wait on a cold run's task that times out: its run's follower ends with it.
		a.fails("task.waitStatus", map[string]any{"runId": runR, "taskId": taskP, "until": "blocked", "timeoutMs": 1}, wire.CodeWaitTimeout)
	}
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, f.r1.orch)
	o.ok("events.subscribe", map[string]any{})
	a.nc.Close()
	o.nc.Close()
	f.close() // waits for every connection's goroutines
	require.Zero(t, f.eng.RunSignals(), "channels of runs nobody follows any more")
}
