package commands

import (
	"fmt"
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
// Whether an outcome is recorded is no part of the decision: its events
// and answer are the same either way, so replay is unaffected.
const MaxEventlessOutcomes = 10_000

// mayRecordEventless reports whether an outcome of principal with no event
// may be recorded in f's group, and counts it when it may. f keeps the
// count of each principal it has asked for, its own writes included; the
// log's count holds every group staged before f's that reached the engine's
// log. With a replicated Committer a group reaches it only once the
// replicas took it, so the groups still in flight then are not counted, and
// a principal may pass the bound by at most their outcomes.
func (e *Engine) mayRecordEventless(f *flight, principal string) (bool, error) {
	n, ok := f.eventless[principal]
	if !ok {
		var err error
		if n, err = e.log.EventlessOutcomes(principal); err != nil {
			return false, fmt.Errorf("commands: count outcomes with no event: %w", err)
		}
	}
	if n >= MaxEventlessOutcomes {
		f.eventless[principal] = n
		return false, nil
	}
	f.eventless[principal] = n + 1
	return true, nil
}
