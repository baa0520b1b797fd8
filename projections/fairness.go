package projections

// Fair slots: a run waits for a slot from the moment it is refused one
// (slots-exhausted or slot-share-exceeded) while it holds fewer than its
// share (the config's SlotShare in force), until its next admission or its
// end. A request that a later check refuses as well (the policy's
// otherwise) waits for nothing. A run refused while it already held its
// share is owed nothing and does not wait. The fold records the moment;
// whether it still counts is decided with the engine's clock (SlotWaiters),
// so the answer is a pure function of the state, the config and the clock
// reading, and replay reproduces it.

// refusedSlot folds a slot refusal of run r at time at.
func refusedSlot(s *State, r *runState, at int64) {
	if s.SlotsHeldBy(r.run.RunID) >= s.config.SlotShare {
		return
	}
	r.run.Usage.SlotWaitAt = at
	s.waiting[r.run.RunID] = struct{}{}
}

func stopWaiting(s *State, r *runState) {
	r.run.Usage.SlotWaitAt = 0
	delete(s.waiting, r.run.RunID)
}

// SlotsHeldBy counts the slots run runID holds. The pool is at most
// MaxMaxSlots (64) big, so this is a short loop.
func (s *State) SlotsHeldBy(runID string) int {
	n := 0
	for _, run := range s.held {
		if run == runID {
			n++
		}
	}
	return n
}

// SlotHolder returns the run whose delegation subID holds a slot.
func (s *State) SlotHolder(subID string) (runID string, ok bool) {
	runID, ok = s.held[subID]
	return runID, ok
}

// SlotWaiters counts the runs other than except that wait for a slot at
// clock reading now (unix ms): runs not ended (completed, failed, cancelled)
// that were refused a slot at or after now − waitMs and not admitted since,
// and that hold fewer than share slots (a run holding its share waits for
// nothing it is owed).
//
// Cost: one pass over the waiting runs and one over the pool.
func (s *State) SlotWaiters(except string, now, waitMs int64, share int) int {
	if len(s.waiting) == 0 {
		return s.assumedWaiters
	}
	held := make(map[string]int, len(s.held))
	for _, run := range s.held {
		held[run]++
	}
	n := 0
	for id := range s.waiting {
		r := s.runs[id]
		if id == except || r == nil || r.run.Status.Stale() || r.run.Usage.SlotWaitAt < now-waitMs {
			continue
		}
		if held[id] < share {
			n++
		}
	}
	return n + s.assumedWaiters
}

// MessagesSince counts run runID's messages appended at or after since
// (unix ms), counting from the newest and stopping once it has counted
// upTo: the cost is bounded by the limit it is checked against. Of those it
// counted, fromSender are the ones sent by a task whose share of the run's
// quotas is the one task from uses (ShareHolder: under the config's
// ShareByDelegator from, its delegating worker's task, and every
// delegation's task below that; without it from alone; "" counts none).
func (s *State) MessagesSince(runID, from string, since int64, upTo int) (all, fromSender int) {
	r := s.run(runID)
	if r == nil {
		return 0, 0
	}
	byDelegator := s.config.ShareByDelegator
	holder := s.quotaShareHolder(r, from)
	// NB: the sender before is remembered, as a run's messages come in runs from one sender: the walk up from a
	// sender's task (shareHolder) is then made once a run of them, not once a message.
	last, lastCounts := "", false
	for i := r.msgs.Len() - 1; i >= 0 && all < upTo; i-- {
		m := r.msgs.At(i)
		if m.CreatedAt < since {
			break
		}
		all++
		if from == "" {
			continue
		}
		if m.From != last {
			last = m.From
			lastCounts = m.From == from || byDelegator && (m.From == holder || r.shareHolder(m.From) == holder)
		}
		if lastCounts {
			fromSender++
		}
	}
	return all, fromSender
}
