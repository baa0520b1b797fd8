package projections

// A worker's share of its run's slots (config WorkerSlotShare): the fair-slot rule of fairness.go one level down.
// The run's slots are the pool its tasks' workers delegate from, and a worker, with the delegations it started and
// theirs (shareHolder), may hold as many as nobody else of its run waits for; one that holds its share (the
// config's SlotShare) is refused another while another task of its run waits. A task waits from the moment its
// worker, or the worker of a delegation below it, is refused a slot (slots-exhausted or slot-share-exceeded, and no
// later check refuses the request as well: the policy's otherwise) while it holds fewer than its share, until a
// delegation of its is admitted; whether the wait still counts is decided with the engine's clock
// (WorkerSlotWaiters), so the answer is a pure function of the state, the config and the clock reading, and replay
// reproduces it. Without the knob in force (every log written before it) a refusal records no wait, as such a log
// was folded.
//
// The slots each task holds with its delegations are counted as they are taken and freed (runState.slotsHeld, by
// each delegation's ShareHolder, found once at its admission), so a check reads one count, not a walk over the
// delegations in flight: it runs on every delegate.request.

// refusedWorkerSlot folds a slot refusal of a request by the worker of task taskID of run r at time at.
func refusedWorkerSlot(s *State, r *runState, taskID string, at int64) {
	if !s.config.WorkerSlotShare {
		return
	}
	holder := r.shareHolder(taskID)
	t := r.tasks[holder]
	if t == nil || r.slotsHeld[holder] >= s.config.SlotShare {
		return
	}
	t.SlotWaitAt = at
	r.slotWaiters[holder] = struct{}{}
}

// workerAdmitted folds an admission of a delegation whose slot counts for task holder's share: the task waits no
// more.
func workerAdmitted(r *runState, holder string) {
	if _, waits := r.slotWaiters[holder]; !waits {
		return
	}
	if t := r.tasks[holder]; t != nil {
		t.SlotWaitAt = 0
	}
	delete(r.slotWaiters, holder)
}

// holdWorkerSlot adds d, +1 for an admission and -1 for a settlement, to the slots task holder holds with its
// delegations.
func (r *runState) holdWorkerSlot(holder string, d int) {
	if n := r.slotsHeld[holder] + d; n > 0 {
		r.slotsHeld[holder] = n
	} else {
		delete(r.slotsHeld, holder)
	}
}

// SlotsHeldByWorker is the task whose share of run runID's slots the worker of task taskID uses (its own, or the
// workflow task's whose delegation started it: shareHolder), and the slots that task's delegations and those below
// them hold.
//
// Cost: the walk up from taskID (one step a delegation between) and one map read.
func (s *State) SlotsHeldByWorker(runID, taskID string) (holder string, held int) {
	r := s.run(runID)
	if r == nil {
		return taskID, 0
	}
	holder = r.shareHolder(taskID)
	return holder, r.slotsHeld[holder]
}

// WorkerSlotWaiters counts the tasks of run runID, other than holder (the task whose share the requesting worker
// uses: SlotsHeldByWorker), that wait for a slot at clock reading now (unix ms): tasks that have not ended, were
// refused a slot at or after now − waitMs and not admitted since, and hold fewer than share slots with their
// delegations.
//
// Cost: one pass over the run's waiting tasks, a map read each.
func (s *State) WorkerSlotWaiters(runID, holder string, now, waitMs int64, share int) int {
	r := s.run(runID)
	if r == nil || len(r.slotWaiters) == 0 {
		return 0
	}
	n := 0
	for id := range r.slotWaiters {
		t := r.tasks[id]
		if id == holder || t == nil || t.Status.Terminal() || t.SlotWaitAt < now-waitMs {
			continue
		}
		if r.slotsHeld[id] < share {
			n++
		}
	}
	return n
}
