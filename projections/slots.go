package projections

import "slices"

// Slots is the daemon-wide nested slot pool (D§5). It is derived from
// events, so it survives restarts (GS-20(d)): a slot is held from
// delegate.admitted until the delegation's terminal event.
type Slots struct {
	Held     int `json:"held" msgpack:"held"`
	Capacity int `json:"capacity" msgpack:"capacity"`
	// SubIDs are the holders, sorted.
	SubIDs []string `json:"subIds" msgpack:"subIds"`
}

// holdSlot takes a slot for subID. It never refuses: capacity is a policy
// check made by commands before admission, not by the fold. Holding again is
// idempotent, like pi-crew's tryAcquire.
func holdSlot(s *State, runID, subID string) { s.held[subID] = runID }

// releaseSlot frees subID's slot; idempotent.
func releaseSlot(s *State, subID string) { delete(s.held, subID) }

// Slots returns the pool: held count, capacity from the engine config in
// force, and the holders.
func (s *State) Slots() Slots {
	subs := make([]string, 0, len(s.held))
	for sub := range s.held {
		subs = append(subs, sub)
	}
	slices.Sort(subs)
	return Slots{Held: s.SlotsHeld(), Capacity: s.config.MaxSlots, SubIDs: subs}
}

// SlotsHeld is the held count alone, O(1), for the admission check (with the slots AssumePool assumed).
func (s *State) SlotsHeld() int { return len(s.held) + s.assumedHeld }

// SlotsOf is the pool as a worker or the orchestrator of run runID may see it: the daemon-wide
// held count and capacity, but only runID's holders.
func (s *State) SlotsOf(runID string) Slots {
	out := s.Slots()
	out.SubIDs = slices.DeleteFunc(out.SubIDs, func(sub string) bool { return s.held[sub] != runID })
	return out
}
