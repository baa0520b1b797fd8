package picrewtest

import "fmt"

// Lifecycle returns the steps of one run's life as pi-crew writes it
// (manifest first, then tasks, then the events; a mailbox append then its
// delivery state): two workflow tasks, a delegation with its shadow record
// and result, steers, messages delivered and acknowledged, progress events
// without a crewlog counterpart (foreign.imported), and the end. progress
// is how many task.progress events the executor writes; every tenth step of
// progress also sends a message, delivers and acknowledges the one before.
// A caller runs the steps in order, and may do anything between two steps
// (restart the follower or the daemon, measure).
func Lifecycle(run *Run, progress int) []func() error {
	sub := "gc-" + run.ID[len(run.ID)-8:] + "-0000-4000-8000-000000000001"
	ev := func(typ, task string, data map[string]any) func() error {
		return func() error { _, err := run.Event(typ, task, data); return err }
	}
	steps := []func() error{
		func() error { return run.AddTask("01_plan", "planner") },
		func() error { return run.AddTask("02_exec", "executor") },
		func() error { return run.SetStatus("running") },
		ev("run.running", "", nil),
		func() error { return run.SetTask("01_plan", "running") },
		ev("task.started", "01_plan", map[string]any{"role": "planner", "agent": "planner", "cwd": "/srv/app"}),
		func() error { return run.Steer("01_plan", "focus on the parser") },
		func() error { return run.SetTask("01_plan", "completed") },
		ev("task.completed", "01_plan", nil),
		func() error { return run.SetTask("02_exec", "running") },
		ev("task.started", "02_exec", map[string]any{"role": "executor", "agent": "executor", "cwd": "/srv/app"}),
		ev("delegate.requested", "02_exec", map[string]any{"subId": sub, "role": "explorer"}),
		func() error { return run.AddShadow(sub, "explorer") },
		ev("delegate.admitted", "02_exec", map[string]any{"subId": sub, "childDepth": 2, "role": "explorer",
			"unmetered": true}),
	}
	var last string
	for i := range progress {
		steps = append(steps, ev("task.progress", "02_exec", map[string]any{"step": i}))
		if i%10 == 9 {
			prev := last
			steps = append(steps, func() error {
				id, err := run.Message("02_exec", fmt.Sprintf("note %d", i))
				if err != nil || prev == "" {
					last = id
					return err
				}
				last = id
				if err := run.Deliver(prev, "delivered"); err != nil {
					return err
				}
				return run.Deliver(prev, "acknowledged")
			})
		}
	}
	steps = append(steps,
		func() error { return run.SetTask(sub, "completed") },
		ev("delegate.completed", "02_exec", map[string]any{"subId": sub, "ok": true}),
		func() error { return run.Steer("02_exec", "wrap up") },
		func() error { return run.SetTask("02_exec", "completed") },
		ev("task.completed", "02_exec", nil),
		ev("run.completed", "", nil),
		func() error { return run.SetStatus("completed") },
	)
	return steps
}
