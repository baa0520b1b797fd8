package picrew

// maxStrayReports bounds the reports of the entries of a run's directories of one kind (the run's own, its mailbox
// directories, its steering directory) that are none of its files. NB: a run's workers can make any number of them,
// and each was reported under its own path, by the one-shot import and at every pass of a follower: a million made
// a million reports, and the follower's report-once set (maxReported) was filled, cleared and filled again.
const maxStrayReports = 64

// strayEntries reports the entries of a run's directories of one kind that are none of its files: the first
// maxStrayReports each under its path, the others counted, their count reported under dir (done).
type strayEntries struct {
	s        *source
	run, dir string
	what     string // the directories of the kind, for the count's report
	n        int
}

// add reports the entry p (why it is not imported), or counts it past the first maxStrayReports.
func (e *strayEntries) add(p, why string) {
	e.n++
	if e.n <= maxStrayReports {
		e.s.skip(e.run, e.s.rel(p), 0, 0, "%s", why)
	}
}

// done reports the count of the entries past the first maxStrayReports, if any.
func (e *strayEntries) done() {
	if e.n > maxStrayReports {
		e.s.skip(e.run, e.s.rel(e.dir), 0, 0, "%d more entries of %s that are none of its files: not imported, not "+
			"reported one by one", e.n-maxStrayReports, e.what)
	}
}
