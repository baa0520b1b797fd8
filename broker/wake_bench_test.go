package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// BenchmarkWakeups measures what idle waiters and subscribers cost a commit (store on disk), as ratios within one run: the mean
// time of 200 sequential task.usage commits on run R2 with nobody waiting, then with 1,000 connections × 16
// task.waitStatus waits on run R1's task P (commits on R2, and on R1's other task Q), then with 2,000 idle
// events.subscribe connections on R1 (commits on R2). A waiter or subscriber that only cares about R1, or about
// task P, should cost a commit elsewhere nothing.
//
//	go test ./broker -run '^$' -bench Wakeups -benchtime 1x
func BenchmarkWakeups(b *testing.B) {
	for i := 0; i < b.N; i++ {
		wakeups(b)
	}
}

func wakeups(b *testing.B) {
	f := newFixture(b, fixtureOpts{opts: wideOpen(), disk: true})
	s := f.seed()
	f.seedRun("R2", "T2")
	commit := func(runID, taskID string) time.Duration {
		const n = 100
		start := time.Now()
		for i := 0; i < n; i++ {
			r, err := f.eng.Submit(context.Background(), commands.Request{Actor: events.Actor{Role: events.RoleOrchestrator},
				Command: &commands.TaskUsage{RunID: runID, TaskID: taskID, Input: int64(i), Output: 1}})
			require.NoError(b, err)
			require.Nil(b, r.Rejected)
		}
		return time.Since(start) / n
	}
	base := commit("R2", "T2")

	waiters := make([]*client, 1000)
	for i := range waiters {
		w := f.dial()
		w.hello(runR, events.OrchestratorKey, s.orch)
		for j := 0; j < 16; j++ {
			line, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("w%d", j), "method": "task.waitStatus",
				"params": map[string]any{"taskId": taskP, "until": "completed", "timeoutMs": 60000}})
			w.sendLine(string(line))
		}
		w.ok("ping", nil) // answered after the 16 waits have started: the reader serves in order
		waiters[i] = w
	}
	otherRun := commit("R2", "T2")
	sameRun := commit(runR, taskQ)
	for _, w := range waiters {
		w.nc.Close()
	}

	subs := make([]*client, 2000)
	head := f.eng.Head()
	for i := range subs {
		c := f.dial()
		c.hello(runR, events.OrchestratorKey, s.orch)
		c.ok("events.subscribe", map[string]any{"sinceSeq": head})
		subs[i] = c
	}
	subsOtherRun := commit("R2", "T2")
	b.ReportMetric(float64(base.Microseconds()), "base-commit-µs")
	b.ReportMetric(float64(otherRun)/float64(base), "16k-waits-other-run-ratio")
	b.ReportMetric(float64(sameRun)/float64(base), "16k-waits-same-run-other-task-ratio")
	b.ReportMetric(float64(subsOtherRun)/float64(base), "2k-subs-other-run-ratio")
	b.Logf("commit %v alone; 16,000 waits on R1/P: %v (R2), %v (R1/Q); 2,000 subscriptions on R1: %v (R2)",
		base, otherRun, sameRun, subsOtherRun)
}
