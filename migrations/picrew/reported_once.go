package picrew

// reportedOnce is the set of the reports a follower made, which keeps each to once: the last maxReported/2 reports
// made or met again at least, in two generations of up to maxReported/2 each. NB: bounded, it forgets the oldest
// first (the older generation, dropped when the newer one is full), and a report met again moves to the newer one:
// cleared whole once full, a flood of new reports (a worker making files by the thousand) had every problem reported
// again at once, the recent ones and those every pass meets (an unknown file that stays) with them.
type reportedOnce struct {
	older, newer map[string]bool
}

// seen reports whether k was reported, keeping it as reported now; it adds k if not.
func (r *reportedOnce) seen(k string) bool {
	if r.newer[k] {
		return true
	}
	was := r.older[k]
	if len(r.newer) >= maxReported/2 {
		r.older, r.newer = r.newer, make(map[string]bool, len(r.newer))
	}
	if r.newer == nil {
		r.newer = map[string]bool{}
	}
	r.newer[k] = true
	return was
}

// len is the count of reports the set holds, one kept in both generations counted twice.
func (r *reportedOnce) len() int { return len(r.older) + len(r.newer) }
