package projections

import "slices"

// The runs in memory by creation ordinal: a page of runs (eachRun) visits the runs memory holds (hot, and cold ones
// whose summary it keeps) in creation order, merged with the index's. Sorting them on every page cost O(n log n)
// under the published state's read lock, which the publisher waits for: 1.2 to 3 ms a page of 100 with 10,000 runs
// in memory, ten times that for a search's ten reads. So s.order keeps them in order as they come and go.
//
// Ordinals only grow: a run created (addRun) appends its entry; a run read back (ThawFrom) takes its place again by
// a binary search, or finds its entry still there. A run that leaves memory (its summary written to the index) leaves
// its entry behind, skipped by the pages (memRun), and the entries are compacted once they outnumber twice the runs
// in memory by orderSlack (leftMemory): a page skips at most as many entries as memory holds runs, and orderSlack
// more, and a compaction's cost is spread over the runs that left since the last. The entries are s's own: Clone
// copies them, and only a mutation of s (under the write lock, for the published copy) writes them.

// orderSlack is the entries of runs no longer in memory that s.order may hold beyond as many as the runs in memory.
const orderSlack = 64

// orderedRun is an entry of s.order: a run's creation ordinal and id.
type orderedRun struct {
	ord int
	id  string
}

// ordered enters run id, of creation ordinal ord, made a run in memory, in s.order.
func (s *State) ordered(ord int, id string) {
	if n := len(s.order); n == 0 || s.order[n-1].ord < ord {
		s.order = append(s.order, orderedRun{ord, id})
		return
	}
	i, found := slices.BinarySearchFunc(s.order, ord, compareOrd)
	if !found { // else its entry is still there: it left memory and is back before a compaction
		s.order = slices.Insert(s.order, i, orderedRun{ord, id})
	}
}

func compareOrd(e orderedRun, ord int) int { return e.ord - ord }

// orderedAll enters the runs of entries, made runs in memory, in s.order at once: one merge, where entering each
// (ordered) moves every entry after its place, O(entries × runs after them) for Whole, which reads every cold run
// back, the oldest ones, before the hot runs. An entry already there (of a run that left memory, or kept cold in
// memory) is kept once.
func (s *State) orderedAll(entries []orderedRun) {
	if len(entries) == 0 {
		return
	}
	byOrd := func(a, b orderedRun) int { return a.ord - b.ord }
	if !slices.IsSortedFunc(entries, byOrd) { // NB: coldIDs lists them in order, as every caller's
		slices.SortFunc(entries, byOrd)
	}
	merged := make([]orderedRun, 0, len(s.order)+len(entries))
	i, j := 0, 0
	for i < len(s.order) && j < len(entries) {
		switch d := byOrd(s.order[i], entries[j]); {
		case d < 0:
			merged = append(merged, s.order[i])
			i++
		case d > 0:
			merged = append(merged, entries[j])
			j++
		default:
			merged = append(merged, entries[j])
			i, j = i+1, j+1
		}
	}
	merged = append(merged, s.order[i:]...)
	s.order = append(merged, entries[j:]...)
}

// leftMemory compacts s.order when runs that left memory hold too many of its entries.
func (s *State) leftMemory() {
	if len(s.order) > 2*(len(s.runs)+len(s.cold))+orderSlack {
		s.order = slices.DeleteFunc(s.order, func(e orderedRun) bool { return s.memRun(e.id) == nil })
	}
}

// memRun is the record of run id when memory holds it, hot or cold, else nil.
func (s *State) memRun(id string) *Run {
	if r := s.runs[id]; r != nil {
		return &r.run
	}
	if cr := s.cold[id]; cr != nil {
		return &cr.run
	}
	return nil
}

// memRuns walks the runs in memory by creation ordinal (memRunsFrom).
type memRuns struct {
	s    *State
	i    int // the entry of s.order next, or the first after it still in memory
	desc bool
}

// memRunsFrom walks the runs in memory from ordinal from, by creation ordinal (descending with desc).
func (s *State) memRunsFrom(from int, desc bool) *memRuns {
	i, found := slices.BinarySearchFunc(s.order, from, compareOrd) // the first at or after from
	if desc && !found {
		i-- // the last before from
	}
	return &memRuns{s: s, i: i, desc: desc}
}

// peek returns the next run in memory and its ordinal, skipping the entries of runs that left it; false after the
// last.
func (m *memRuns) peek() (int, *Run, bool) {
	for ; m.i >= 0 && m.i < len(m.s.order); m.next() {
		if run := m.s.memRun(m.s.order[m.i].id); run != nil {
			return m.s.order[m.i].ord, run, true
		}
	}
	return 0, nil, false
}

// next moves past the run peek returned.
func (m *memRuns) next() {
	if m.desc {
		m.i--
	} else {
		m.i++
	}
}
