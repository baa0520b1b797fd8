package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// MaxEventlessOutcomes bounds the outcomes a principal has recorded that
// wrote no event: a refusal that records nothing but itself (forbidden,
// not-found, conflict, bad-params of a command the params allowed...), or
// an accepted command that changed nothing. Each grows the store by its
// key and answer, and nothing else bounds them: they add no event to any
// run, so no quota counts them, and a client can send them with fresh ids
// for as long as the pacer lets it (thousands a second).
//
// A principal's first MaxEventlessOutcomes are recorded as every outcome
// is (SPEC §2: a retry gets the same answer). Past them, the command is
// answered as before but not recorded, like an engine decision that is not
// yet due: a retry of its id is decided again. That is safe, as the command
// changed nothing — it only loses the promise of the same answer, to a
// principal that has been refused ten thousand times. No principal's
// count touches another's: each is kept by the log under the principal
// (eventlog.Log.EventlessOutcomes), persisted with the outcomes it counts.
//
// A run's principals together record at most MaxEventlessOutcomesPerRun:
// an orchestrator can create as many tasks, and issue each a credential, as
// its run's quotas allow, a few dozen bytes each, and each such principal
// had ten thousand outcomes of its own, about 1 KiB each, that no quota
// counted. Past the run's bound its workers' commands that record no event
// are answered and not recorded, as past their own. The run's orchestrator
// is held to its own bound alone: its outcomes count in the run's (the
// log's tally counts every principal of the run), but the run's bound does
// not stop them, so the workers, and the descendants they delegate to,
// cannot use up the orchestrator's promise of the same answer — as the
// run's quotas keep a reserve their workers cannot take (quota.go). The
// run's count may so pass its bound by at most MaxEventlessOutcomes. The
// count is kept by the log under the run (eventlog.Log.SetTallyGroup,
// which Open sets to runOfPrincipal), with the outcomes it counts; the
// admin's and the engine's outcomes belong to no run.
//
// Whether an outcome is recorded is no part of the decision: its events
// and answer are the same either way, so replay is unaffected.
const (
	MaxEventlessOutcomes       = 10_000
	MaxEventlessOutcomesPerRun = 100_000
)

// mayRecordEventless reports whether an outcome of p (whose key is
// principal) with no event may be recorded in f's group, and counts it in
// its own count and its run's when it may; the run's bound does not apply
// to the run's orchestrator. f keeps the count of each principal and
// run it has asked for, its own writes included; the log's count holds
// every group staged before f's that reached the engine's log. With a
// replicated Committer a group reaches it only once the replicas took it,
// so the groups still in flight then are not counted, and a principal or
// a run may pass its bound by at most their outcomes.
func (e *Engine) mayRecordEventless(f *flight, principal string, p events.Principal) (bool, error) {
	n, err := eventlessCount(f.eventless, principal, e.log.EventlessOutcomes)
	if err != nil || n >= MaxEventlessOutcomes {
		return false, err
	}
	if runID := p.RunID; runID != "" {
		r, err := eventlessCount(f.eventlessRuns, runID, e.log.EventlessOutcomesOfGroup)
		if err != nil || (r >= MaxEventlessOutcomesPerRun && p.Role != events.RoleOrchestrator) {
			return false, err
		}
		f.eventlessRuns[runID] = r + 1
	}
	f.eventless[principal] = n + 1
	return true, nil
}

// eventlessCount is counts[name], read from the log the first time.
func eventlessCount(counts map[string]uint64, name string, read func(string) (uint64, error)) (uint64, error) {
	if n, ok := counts[name]; ok {
		return n, nil
	}
	n, err := read(name)
	if err != nil {
		return 0, fmt.Errorf("commands: count outcomes with no event: %w", err)
	}
	counts[name] = n
	return n, nil
}

// KeepRunTallies has l count its principals' outcomes with no event in
// their run's tally (runOfPrincipal), which mayRecordEventless bounds. Open
// calls it; whoever appends to l before (a cluster node copying the stream
// at its start) calls it first, or those outcomes are left out of their
// runs' counts.
func KeepRunTallies(l *eventlog.Log) { l.SetTallyGroup(runOfPrincipal) }

// runOfPrincipal is the tally group of a principal's outcomes with no
// event: its run, "" for the admin and the engine.
func runOfPrincipal(key string) string {
	p, ok := events.ParsePrincipalKey(key)
	if !ok {
		return ""
	}
	return p.RunID
}
