package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Bound of the slot wait window.
const MaxSlotWaitSec = 86400

// MaxQuotaReserve bounds the percent of a run quota kept from its workers:
// at most half, so the workers always keep the larger part.
const MaxQuotaReserve = 50

// MaxQuotaWorkerMsgShare bounds the percent of the workers' part of the message rate one worker may use: all of it,
// which is no share of its own (as 0 is).
const MaxQuotaWorkerMsgShare = 100

// MaxQuotaWorkerShare bounds the percent of the workers' part of the events and of the bytes quota one worker may
// have appended: all of it, which is no share of its own (as 0 is).
const MaxQuotaWorkerShare = 100

// Fair slots (SPEC §5, per-run slot share). The pool is daemon-wide and
// crewlog cannot take a slot back from a running grandchild, so fairness is
// decided at admission: a run that already holds its share of the pool
// (config slotShare, default half the pool) is refused another slot while
// another run waits for one.
//
// "Waits" is exact and a pure function of the state, the config and the
// engine clock (projections.State.SlotWaiters): run W waits at clock reading
// now when W is not ended, W was refused a slot (slots-exhausted or
// slot-share-exceeded) at or after now − slotWaitSec while it held fewer
// slots than its share, has not been admitted since, and still holds fewer
// than its share. Replay and `crewctl replay --explain` give the same answer
// from the same log.
//
// NB: the rule is work-conserving: with nobody waiting a run may fill the
// whole pool, as pi-crew's does (GS-09). A run that filled it before another
// asked keeps its slots until they settle or expire; the admin frees one at
// once with delegate.cancel and delegate.settle for any run.
//
// The same rule holds one level down, between the tasks of a run, under
// config workerSlotShare (workerSlotShareExceeded,
// projections/worker_slots.go): a worker, with the delegations it started,
// that holds its share is refused another slot while another task of its
// run waits, with the same share and wait window.

// slotShareExceeded is the fair-slot check of delegate.request, made after
// slots-exhausted. It records its inputs in policy whenever another run
// waits, and returns the refusal message when the run holds its share.
func slotShareExceeded(s *projections.State, runID string, env *Env, policy *events.Policy) (string, bool) {
	cfg := env.Config
	if cfg.SlotShare <= 0 || cfg.SlotWaitSec <= 0 {
		return "", false
	}
	waiting := s.SlotWaiters(runID, env.millis(), int64(cfg.SlotWaitSec)*1000, cfg.SlotShare)
	if waiting == 0 {
		return "", false
	}
	policy.Waiting, policy.RunHeld, policy.SlotShare = waiting, s.SlotsHeldBy(runID), cfg.SlotShare
	if policy.RunHeld < cfg.SlotShare {
		return "", false
	}
	return fmt.Sprintf("delegate rejected: run holds %d slot(s), its share of the pool, while %d other run(s) "+
		"wait; %d/%d in flight", policy.RunHeld, waiting, policy.Held, policy.Capacity), true
}

// workerSlotShareExceeded is the fair-slot check one level down (config workerSlotShare), made after
// slotShareExceeded: the share of its run's slots the worker of task taskID uses (projections.State.
// SlotsHeldByWorker: its task's, or the workflow task's whose delegation started it) against the other tasks of its
// run that wait for one (projections.State.WorkerSlotWaiters), with the same share and wait window. A config
// without workerSlotShare (every log written before it) has no such check. It records its inputs in policy
// whenever the worker holds its share and another task waits, and returns the refusal message then. NB: the run's
// own share does not protect its tasks from each other: a worker with a valid token could otherwise take every
// slot its run may hold, for as long as its delegations' timeouts (up to a day), and leave its sibling workers
// refused slots-exhausted.
func workerSlotShareExceeded(s *projections.State, runID, taskID string, env *Env, policy *events.Policy) (string,
	bool) {
	cfg := env.Config
	if !cfg.WorkerSlotShare || cfg.SlotShare <= 0 || cfg.SlotWaitSec <= 0 {
		return "", false
	}
	holder, held := s.SlotsHeldByWorker(runID, taskID)
	if held < cfg.SlotShare {
		return "", false // NB: first, so a request within its share never walks the waiters
	}
	waiting := s.WorkerSlotWaiters(runID, holder, env.millis(), int64(cfg.SlotWaitSec)*1000, cfg.SlotShare)
	if waiting == 0 {
		return "", false
	}
	policy.WorkerWaiting, policy.WorkerHeld, policy.SlotShare = waiting, held, cfg.SlotShare
	// NB: short, as the run's: the recorded message keeps its first 120 chars (events.MaxRejectedMessageChars).
	return fmt.Sprintf("delegate rejected: task %s holds %d slot(s), its share, while %d other task(s) of its run "+
		"wait; %d/%d in flight", holder, held, waiting, policy.Held, policy.Capacity), true
}

// validateFairness checks the fair-slot and quota knobs.
func validateFairness(c projections.Config) []error {
	var errs []error
	if c.SlotShare < 0 || c.SlotShare > MaxMaxSlots {
		errs = append(errs, fmt.Errorf("slotShare %d is outside 0..%d", c.SlotShare, MaxMaxSlots))
	}
	if c.SlotWaitSec < 0 || c.SlotWaitSec > MaxSlotWaitSec {
		errs = append(errs, fmt.Errorf("slot wait %d s is outside 0..%d", c.SlotWaitSec, MaxSlotWaitSec))
	}
	if c.QuotaEvents < 0 {
		errs = append(errs, fmt.Errorf("quotaEvents %d is negative", c.QuotaEvents))
	}
	if c.QuotaBytes < 0 {
		errs = append(errs, fmt.Errorf("quotaBytes %d is negative", c.QuotaBytes))
	}
	if c.QuotaMsgsPerMin < 0 {
		errs = append(errs, fmt.Errorf("quotaMsgsPerMin %d is negative", c.QuotaMsgsPerMin))
	}
	if c.QuotaReserve < 0 || c.QuotaReserve > MaxQuotaReserve {
		errs = append(errs, fmt.Errorf("quotaReserve %d%% is outside 0..%d", c.QuotaReserve, MaxQuotaReserve))
	}
	if c.QuotaWorkerMsgShare < 0 || c.QuotaWorkerMsgShare > MaxQuotaWorkerMsgShare {
		errs = append(errs, fmt.Errorf("quotaWorkerMsgShare %d%% is outside 0..%d", c.QuotaWorkerMsgShare,
			MaxQuotaWorkerMsgShare))
	}
	if c.QuotaWorkerShare < 0 || c.QuotaWorkerShare > MaxQuotaWorkerShare {
		errs = append(errs, fmt.Errorf("quotaWorkerShare %d%% is outside 0..%d", c.QuotaWorkerShare,
			MaxQuotaWorkerShare))
	}
	return errs
}
