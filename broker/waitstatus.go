package broker

import (
	"time"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/projections"
)

// task.waitStatus bounds (D§7.5).
const (
	defaultWaitMs = 30000
	maxWaitMs     = 60000
)

// waitUntil is the set of statuses task.waitStatus accepts in until (D§7.5). "blocked" is accepted for pi-crew
// compatibility although no crewlog task is ever blocked: such a wait ends only by timeout.
var waitUntil = map[string]bool{
	"queued": true, "running": true, "waiting": true, "completed": true, "failed": true, "blocked": true,
	"cancelled": true,
}

type waitResult struct {
	TaskID   string `json:"taskId"`
	Status   string `json:"status"`
	WaitedMs int64  `json:"waitedMs"`
}

// handleWaitStatus: {taskId, until, timeoutMs? (default 30000; clamped to 0..60000)} → {taskId, status, waitedMs}
// once the task's status equals until — any terminal status satisfies a terminal until — or wait-timeout. It waits on
// its task's change signal (waitHub: no polling, no wake for other tasks' commits) in its own goroutine, so the
// connection keeps serving other requests; at most MaxWaitsPerConn per connection and MaxWaitsPerCredential per
// credential (too-many-waits beyond).
func handleWaitStatus(cl *call) (any, error) {
	p := readParams(cl)
	taskID := p.str("taskId", true, 256)
	until := p.str("until", true, 32)
	timeout := time.Duration(p.clampedInt("timeoutMs", 0, maxWaitMs, defaultWaitMs)) * time.Millisecond
	if p.err == nil && !waitUntil[until] {
		p.fail("until", "one of queued, running, waiting, completed, failed, blocked, cancelled")
	}
	runID := p.run(cl)
	if p.err != nil {
		return nil, p.err
	}
	c := cl.c
	r, err := readState(cl, func(st *projections.State) (taskReading, error) {
		r := readTaskIn(st, runID, taskID)
		return r, r.err
	})
	if err != nil {
		return nil, err // NB: not no-task: the run's tasks are not known
	}
	if !r.found {
		return nil, wire.Errorf(wire.CodeNoTask, "task %q not found in run %q", taskID, runID)
	}
	if err := c.acquireWait(); err != nil {
		return nil, err
	}
	cl.async = true
	// NB: the answer needs the request's id and method, not the call: its params, which may fill a frame (a pi-crew
	// method takes keys it does not read), would be kept for as long as the wait lasts, a frame a wait.
	id, method := cl.id, cl.method
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		defer c.recover()
		defer c.releaseWait()
		res, err := waitFor(c, runID, taskID, projections.TaskStatus(until), timeout)
		if c.out.pushesEnded() {
			return // the credential ended: like a push, an answer decided after that is not sent
		}
		// NB: the run's follower and the feed, which ends the connections of ended credentials, follow the log each
		// at its own pace: the reading that decided the answer may hold the end before the feed has acted on it. The
		// credential is checked against a state at least as new as that reading, as a subscription's pull does.
		if bad := c.s.recheck(c.id); bad != nil {
			c.terminate(bad, reasonEnded)
			return
		}
		c.respond(id, method, res, err)
	}()
	return nil, nil
}

func waitFor(c *conn, runID, taskID string, until projections.TaskStatus, timeout time.Duration) (any, error) {
	start := time.Now()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	hub := &c.s.waits
	if err := hub.add(runID, taskID); err != nil {
		return nil, err
	}
	defer hub.release(runID, taskID)
	for {
		st, ok, changed := hub.current(runID, taskID)
		if !ok {
			return nil, wire.Errorf(wire.CodeNoTask, "task %q not found in run %q", taskID, runID)
		}
		if st == until || st.Terminal() && until.Terminal() {
			return waitResult{TaskID: taskID, Status: string(st), WaitedMs: time.Since(start).Milliseconds()}, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, errWaitTimeout
		case <-c.done:
			return nil, errConnClosing
		case <-c.s.quit:
			return nil, errConnClosing
		}
	}
}
