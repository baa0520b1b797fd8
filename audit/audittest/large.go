package audittest

import (
	"fmt"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	ev "github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Large writes about n events of a decision-shaped workload into the open,
// empty log l, deciding every command with today's code: 100 metered runs
// of 4 running tasks each, then delegations round-robin over the tasks
// (request + admission + reservation, spawn, settlement with a result
// message and, every other time, a charge), with a rejected request every
// tenth. Events are appended 5,000 at a time. It returns the head.
func Large(l *eventlog.Log, n int) (uint64, error) {
	w := NewWorld(l, Epoch.UnixNano())
	w.Step = 1e6
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = 64
	var errs []error
	do := func(actor ev.Actor, cmd commands.Command) {
		if _, err := w.Buffer(actor, cmd); err != nil {
			if _, rejected := err.(*commands.RejectedError); !rejected {
				errs = append(errs, err)
			}
		}
	}
	do(Admin, &commands.Configure{Config: cfg})
	type task struct{ run, id string }
	var tasks []task
	for r := 0; r < 100; r++ {
		run := fmt.Sprintf("team_20261001090000_%016x", r)
		do(Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "bench", Cwd: "/srv/bench",
			BudgetTotal: new(int64(1 << 40))})
		do(Orchestrator, &commands.RunTransition{RunID: run, To: "running"})
		for k := 0; k < 4; k++ {
			id := fmt.Sprintf("%02d_work", k)
			do(Orchestrator, &commands.TaskCreate{RunID: run, TaskID: id, Role: "explorer", Agent: "explorer",
				Title: "work", Cwd: "/srv/bench", StepID: id})
			do(Orchestrator, &commands.TaskTransition{RunID: run, TaskID: id, To: "running"})
			tasks = append(tasks, task{run, id})
		}
	}
	for i := 0; w.next <= uint64(n) && len(errs) == 0; i++ {
		t := tasks[i%len(tasks)]
		worker := Worker(t.id)
		if i%10 == 9 {
			do(worker, &commands.DelegateRequest{RunID: t.run, TaskID: t.id, Prompt: "look", Role: Ptr("reviewer")})
			continue
		}
		sub := fmt.Sprintf("gc-%08d", w.ids+1)
		do(worker, &commands.DelegateRequest{RunID: t.run, TaskID: t.id, Prompt: "look around the package",
			Description: Ptr("explore"), Role: Ptr("analyst"), BudgetTokens: Ptr[int64](100)})
		do(Orchestrator, &commands.DelegateSpawned{RunID: t.run, SubID: sub, PID: 1000 + i%30000})
		do(Orchestrator, &commands.DelegateSettle{RunID: t.run, SubID: sub, Outcome: commands.OutcomeOK,
			Text: "found it", UsageTokens: Ptr(int64(50 + 100*(i%2)))})
		if w.Buffered() >= 5000 {
			if err := w.Flush(); err != nil {
				return 0, err
			}
		}
	}
	if len(errs) > 0 {
		return 0, errs[0]
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return w.next - 1, nil
}
