package picrew

import "strings"

// runIndex holds keys (the paths of checkpoints, the directories watched) by the run they belong to, so that what
// one run holds is found without a look at what every run holds. NB: pi-crew's retention removes finished runs by
// the hundred, and a look at every run's checkpoints and watches for each run removed was quadratic in a root of
// thousands of runs (TestRemovedRunsAreLetGoInLinearWork).
type runIndex map[string]map[string]bool

// add files key under run.
func (x *runIndex) add(run, key string) {
	if *x == nil {
		*x = runIndex{}
	}
	keys := (*x)[run]
	if keys == nil {
		keys = map[string]bool{}
		(*x)[run] = keys
	}
	keys[key] = true
}

// remove takes key from under run, and the run from the index once it holds nothing.
func (x runIndex) remove(run, key string) {
	keys := x[run]
	delete(keys, key)
	if len(keys) == 0 {
		delete(x, run)
	}
}

// set sets m[key] to run, m being the map of keys to their runs that x indexes.
func (x *runIndex) set(m map[string]string, key, run string) {
	x.unset(m, key)
	m[key] = run
	x.add(run, key)
}

// unset takes key out of m, the map of keys to their runs that x indexes.
func (x runIndex) unset(m map[string]string, key string) {
	if run, ok := m[key]; ok {
		delete(m, key)
		x.remove(run, key)
	}
}

// checkpointRun is the run whose directory (state/runs/<runId>/) or steering directory (artifacts/<runId>/steering/)
// holds the file a checkpoint names (its path relative to the crew root, as source.rel writes it); ok is false for a
// path of neither. NB: these are the two directories a run removed has its checkpoints marked gone under (gone).
func checkpointRun(path string) (run string, ok bool) {
	if rest, found := strings.CutPrefix(path, "state/runs/"); found {
		run, _, ok = strings.Cut(rest, "/")
		return run, ok && run != ""
	}
	if rest, found := strings.CutPrefix(path, "artifacts/"); found {
		run, below, ok := strings.Cut(rest, "/")
		return run, ok && run != "" && strings.HasPrefix(below, "steering/")
	}
	return "", false
}
