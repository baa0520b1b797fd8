package projections

import (
	"fmt"
	"testing"

	"github.com/crewlog/crewlog/events"
)

// BenchmarkWorkerSlotCheck measures what delegate.request's check of a worker's share of its run's slots reads
// (commands' workerSlotShareExceeded): the slots a worker holds with its delegations, and, as it holds its share,
// the other tasks of its run that wait, with the whole pool (64) in flight: 32 of the worker's delegations, each
// with one of its own, while a sibling waits.
func BenchmarkWorkerSlotCheck(b *testing.B) {
	var h history
	cfg := DefaultConfig()
	cfg.MaxSlots, cfg.SlotShare, cfg.WorkerSlotShare = 64, 2, true
	h.addBy(byAdmin, events.EngineStream, events.TypeEngineConfigured, cfg.Event())
	h.addBy(byAdmin, "R", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/r"})
	for _, id := range []string{"a1", "a2"} {
		h.addBy(byOrchestrator, "R", events.TypeTaskCreated, &events.TaskCreated{TaskID: id, Role: "executor",
			Agent: "executor", Title: "T", Cwd: "/r"})
	}
	admit := func(parent, sub string) {
		h.addBy(events.Actor{Role: events.RoleWorker, TaskID: parent}, "R", events.TypeDelegateAdmitted,
			&events.DelegateAdmitted{TaskID: parent, SubID: sub, ChildDepth: 2, Role: "explorer", Cwd: "/r",
				Title: "delegate: " + sub, Prompt: "p"})
	}
	for i := range 32 {
		sub := fmt.Sprintf("gc-%d", i)
		admit("a1", sub)
		admit(sub, sub+"-1")
	}
	refused := h.addBy(events.Actor{Role: events.RoleWorker, TaskID: "a2"}, "R", events.TypeDelegateRejected,
		&events.DelegateRejected{TaskID: "a2", SubID: "gc-a2", Reason: events.ReasonSlotsExhausted})
	s := fold(h.evs)
	now := refused.UnixMilli()
	b.ResetTimer()
	for range b.N {
		holder, held := s.SlotsHeldByWorker("R", "gc-7-1")
		if held != 64 || s.WorkerSlotWaiters("R", holder, now, 60_000, cfg.SlotShare) != 1 {
			b.Fatal("not the state the benchmark reads")
		}
	}
}
