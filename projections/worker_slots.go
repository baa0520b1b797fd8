package projections

// A worker's share of its run's slots: the fair-slot rule of fairness.go one level down. The run's slots are the
// pool its tasks' workers delegate from, and a worker, with the delegations it started and theirs (shareHolder),
// may hold as many as nobody else of its run waits for; one that holds its share (the config's SlotShare) is
// refused another while another task of its run waits. A task waits from the moment its worker, or the worker of a
// delegation below it, is refused a slot (slots-exhausted or slot-share-exceeded, and no later check refuses the
// request as well: the policy's otherwise) while it holds fewer than its share, until a delegation of its is
// admitted; whether the wait still counts is decided with the engine's clock (WorkerSlotWaiters), so the answer is
// a pure function of the state, the config and the clock reading, and replay reproduces it.

// refusedWorkerSlot folds a slot refusal of a request by the worker of task taskID of run r at time at.
func refusedWorkerSlot(s *State, r *runState, taskID string, at int64) {
	holder := r.shareHolder(taskID)
	t := r.tasks[holder]
	if t == nil || r.slotsHeldFor(holder) >= s.config.SlotShare {
		return
	}
	t.SlotWaitAt = at
	r.slotWaiters[holder] = struct{}{}
}

// workerAdmitted folds an admission of a delegation that task taskID of run r made: the task that holds its share
// waits no more.
func workerAdmitted(r *runState, taskID string) {
	holder := r.shareHolder(taskID)
	if t := r.tasks[holder]; t != nil {
		t.SlotWaitAt = 0
	}
	delete(r.slotWaiters, holder)
}

// slotsHeldFor counts the slots r's delegations hold that count for task holder's share: those whose parent task
// uses its share (shareHolder). The run's delegations in flight are at most the pool (64), so this is a short loop.
func (r *runState) slotsHeldFor(holder string) int {
	n := 0
	for _, sub := range r.inFlight {
		if r.shareHolder(r.dels[sub].ParentTaskID) == holder {
			n++
		}
	}
	return n
}

// SlotsHeldByWorker counts the slots run runID's delegations hold that count for the share the worker of task
// taskID uses (ShareHolder): its own delegations', and those of the delegations below them.
func (s *State) SlotsHeldByWorker(runID, taskID string) int {
	r := s.run(runID)
	if r == nil {
		return 0
	}
	return r.slotsHeldFor(r.shareHolder(taskID))
}

// WorkerSlotWaiters counts the tasks of run runID, other than the one whose share the worker of task taskID uses,
// that wait for a slot at clock reading now (unix ms): tasks that have not ended, were refused a slot at or after
// now − waitMs and not admitted since, and hold fewer than share slots with their delegations.
//
// Cost: one pass over the run's waiting tasks and one over its delegations in flight.
func (s *State) WorkerSlotWaiters(runID, taskID string, now, waitMs int64, share int) int {
	r := s.run(runID)
	if r == nil || len(r.slotWaiters) == 0 {
		return 0
	}
	except := r.shareHolder(taskID)
	held := make(map[string]int, len(r.inFlight))
	for _, sub := range r.inFlight {
		held[r.shareHolder(r.dels[sub].ParentTaskID)]++
	}
	n := 0
	for id := range r.slotWaiters {
		t := r.tasks[id]
		if id == except || t == nil || t.Status.Terminal() || t.SlotWaitAt < now-waitMs {
			continue
		}
		if held[id] < share {
			n++
		}
	}
	return n
}
