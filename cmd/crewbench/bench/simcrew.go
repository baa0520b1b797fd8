package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/events"
)

// crew is one simulated run: its orchestrator (who is also the runtime that
// spawns and settles grandchildren) and its workers.
type crew struct {
	sim    *simulation
	rng    *rand.Rand
	rngMu  sync.Mutex
	runID  string
	orch   *client.Client
	tasks  []string
	spawn  chan grandchild // admitted delegations for the runtime
	events int             // events of the run, counted at the end
}

type grandchild struct {
	subID string
	depth int
	by    string // the task that asked
}

func (c *crew) intn(n int) int {
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	return c.rng.IntN(n)
}

// pause waits between d/2 and d (the crew's think time) or until ctx ends.
func (c *crew) pause(ctx context.Context, d time.Duration) bool {
	return sleep(ctx, d/2+time.Duration(c.intn(int(d/2)+1))) == nil
}

// run sets the run up, works until work ends, then winds down with ctx.
func (c *crew) run(ctx, work context.Context, admin *client.Client, i int) error {
	s := c.sim
	var created struct{ RunID, OrchestratorToken string }
	if err := s.call(ctx, admin, "run.create", map[string]any{"team": "sim",
		"goal": fmt.Sprintf("simulated crew %d", i), "cwd": "/repo", "workflow": "default", "budgetTotal": 150_000},
		&created); err != nil {
		return fmt.Errorf("bench: run.create: %w", err)
	}
	c.runID = created.RunID
	var err error
	if c.orch, err = s.dial(ctx, client.Hello{RunID: c.runID, TaskID: events.OrchestratorKey,
		Token: created.OrchestratorToken}); err != nil {
		return err
	}
	if err := s.call(ctx, c.orch, "run.transition", map[string]any{"to": "running"}, nil); err != nil {
		return err
	}
	workers := make([]*client.Client, s.o.Workers)
	for w := range workers {
		id := fmt.Sprintf("%02d_worker", w+1)
		role := []string{"executor", "explorer", "analyst"}[w%3]
		var issued struct{ Token string }
		for _, st := range []struct {
			m string
			p map[string]any
			r any
		}{
			{"task.create", map[string]any{"taskId": id, "role": role, "agent": role, "title": "step " + id,
				"cwd": fmt.Sprintf("/repo/pkg%d", w), "stepId": id, "model": "anthropic/sonnet"}, nil},
			{"task.transition", map[string]any{"taskId": id, "to": "running"}, nil},
			{"credential.issue", map[string]any{"taskId": id}, &issued},
		} {
			if err := s.call(ctx, c.orch, st.m, st.p, st.r); err != nil {
				return fmt.Errorf("bench: %s: %w", st.m, err)
			}
		}
		if workers[w], err = s.dial(ctx, client.Hello{RunID: c.runID, TaskID: id, Token: issued.Token}); err != nil {
			return err
		}
		c.tasks = append(c.tasks, id)
	}

	var wg, life sync.WaitGroup
	for w, conn := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); c.worker(work, conn, c.tasks[w]) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); c.steer(work) }()
	runtimeDone := make(chan struct{})
	go func() {
		defer close(runtimeDone)
		for g := range c.spawn {
			life.Add(1)
			go func() { defer life.Done(); c.lifecycle(ctx, work, g) }()
		}
		life.Wait()
	}()
	wg.Wait()
	// Wind down: workers have stopped; grandchildren still settle (quickly,
	// work is over) and may not delegate any more.
	life.Wait()
	close(c.spawn)
	<-runtimeDone
	for _, id := range c.tasks {
		_ = s.call(ctx, c.orch, "task.transition", map[string]any{"taskId": id, "to": "completed"}, nil)
	}
	if err := s.call(ctx, c.orch, "run.transition", map[string]any{"to": "completed", "summary": "simulation over"},
		nil); err != nil && !errors.Is(err, errRefused) {
		return err
	}
	return c.countEvents(ctx)
}

// worker is one task's agent: it delegates, asks, messages and reads.
func (c *crew) worker(ctx context.Context, conn *client.Client, task string) {
	s := c.sim
	for c.pause(ctx, 150*time.Millisecond) {
		switch n := c.intn(100); {
		case n < 55:
			c.delegate(ctx, conn, task, 1)
		case n < 70:
			_ = s.call(ctx, conn, "msg.send", map[string]any{"to": "parent", "body": "progress: " + task + " halfway",
				"kind": "notify"}, nil)
		case n < 80:
			var q struct{ QuestionID string }
			if s.call(ctx, conn, "wait.request",
				map[string]any{"question": "which API version should " + task + " target?",
					"options": []string{"v1", "v2"}, "timeoutSec": 60}, &q) == nil {
				c.pause(ctx, 300*time.Millisecond) // the answer arrives
				_ = s.call(context.WithoutCancel(ctx), conn, "wait.resolve",
					map[string]any{"questionId": q.QuestionID}, nil)
			}
		case n < 90:
			var inbox struct{ Messages []struct{ ID string } }
			if s.call(ctx, conn, "msg.inbox", map[string]any{"limit": 20}, &inbox) == nil && len(inbox.Messages) > 0 {
				ids := make([]string, len(inbox.Messages))
				for i, m := range inbox.Messages {
					ids[i] = m.ID
				}
				_ = s.call(ctx, conn, "mailbox.ack", map[string]any{"messageIds": ids}, nil)
			}
		default:
			_ = s.call(ctx, conn, "events.since", map[string]any{"sinceSeq": 0, "limit": 50}, nil)
		}
	}
}

// delegate asks for a grandchild with a budget; an admitted one goes to the
// runtime.
func (c *crew) delegate(ctx context.Context, conn *client.Client, task string, depth int) bool {
	var res struct {
		GrandchildTaskRef string
		ChildDepth        int
	}
	role := []string{"explorer", "analyst", "executor"}[c.intn(3)]
	budget := []int{2_000, 5_000, 10_000, 20_000}[c.intn(4)]
	if c.sim.call(ctx, conn, "delegate.request", map[string]any{"prompt": "investigate the failing test in " + task,
		"description": "investigate", "role": role, "budgetTokens": budget, "timeoutSec": 120}, &res) != nil {
		return false
	}
	c.sim.stats.count(func(s *simStats) {
		s.admitted++
		if depth > 1 {
			s.nested++
		}
	})
	c.sim.inFlight.Add(1)
	c.spawn <- grandchild{subID: res.GrandchildTaskRef, depth: res.ChildDepth, by: task}
	return true
}

// lifecycle is the runtime's handling of one grandchild: spawn it, let it
// work (and sometimes delegate further), settle it.
func (c *crew) lifecycle(ctx, work context.Context, g grandchild) {
	s := c.sim
	defer s.inFlight.Add(-1)
	c.pause(work, 100*time.Millisecond)
	_ = s.call(ctx, c.orch, "delegate.spawned", map[string]any{"subId": g.subID, "pid": 10_000 + c.intn(50_000)}, nil)
	if work.Err() == nil && c.intn(100) < 30 {
		// The grandchild delegates too: it needs a credential of its own,
		// which the engine refuses at the depth limit.
		var issued struct{ Token string }
		if s.call(ctx, c.orch, "credential.issue", map[string]any{"taskId": g.subID}, &issued) == nil {
			if conn, err := s.dial(ctx, client.Hello{RunID: c.runID, TaskID: g.subID,
				Token: issued.Token}); err == nil {
				c.delegate(work, conn, g.subID, g.depth)
				_ = conn.Close()
			}
		}
	}
	c.pause(work, 600*time.Millisecond)
	outcome, usage := "ok", 1_000+c.intn(15_000)
	switch n := c.intn(100); {
	case n < 12:
		outcome = "failed"
	case n < 20:
		outcome = "timed_out"
	case n < 26:
		outcome = "cancelled"
		_ = s.call(ctx, c.orch, "delegate.cancel", map[string]any{"subId": g.subID, "reason": "superseded"}, nil)
	}
	if s.call(ctx, c.orch, "delegate.settle", map[string]any{"subId": g.subID, "outcome": outcome,
		"text": "grandchild " + g.subID + " finished: " + outcome, "usageTokens": usage}, nil) == nil {
		s.stats.count(func(s *simStats) { s.settled[outcome]++ })
	}
}

// steer is the orchestrator nudging workers and watching the pool.
func (c *crew) steer(ctx context.Context) {
	for c.pause(ctx, 700*time.Millisecond) {
		task := c.tasks[c.intn(len(c.tasks))]
		_ = c.sim.call(ctx, c.orch, "steer.push",
			map[string]any{"taskId": task, "body": "focus on the failing test first"}, nil)
		_ = c.sim.call(ctx, c.orch, "query.slots", map[string]any{}, nil)
	}
}

// countEvents pages through the run's events.
func (c *crew) countEvents(ctx context.Context) error {
	var since uint64
	for {
		var page struct {
			Events  []struct{} `json:"events"`
			NextSeq uint64     `json:"nextSeq"`
			HasMore bool       `json:"hasMore"`
		}
		if err := c.orch.Call(ctx, "events.since", map[string]any{"sinceSeq": since, "limit": 1000},
			&page); err != nil {
			return fmt.Errorf("bench: count events: %w", err)
		}
		c.events += len(page.Events)
		if !page.HasMore || page.NextSeq == since {
			return nil
		}
		since = page.NextSeq
	}
}
