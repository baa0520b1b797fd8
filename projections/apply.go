package projections

import (
	"strings"

	"github.com/crewlog/crewlog/events"
)

// Apply folds one event into s. It does no validation (commands validate
// before an event exists) and never panics on a well-formed event: an event
// that refers to something missing (a run, a task, a message) is ignored,
// and a payload of the wrong type is ignored. It is deterministic: the same
// events in the same order give the same state, on any machine.
//
// NB: s may keep references to slices inside ev.Payload; the payload must not
// be mutated after it was applied.
func Apply(s *State, ev events.Event) {
	if ev.Position != 0 {
		s.Position = ev.Position
	}
	switch ev.Type {
	case events.TypeEngineConfigured:
		applyConfig(s, ev)
		return
	case events.TypeRunCreated:
		applyRunCreated(s, ev)
		return
	case events.TypeForeignImported, events.TypeImportCheckpoint:
		return // kept for the record only: it changes no projection
	}
	r := s.runs[ev.Stream]
	if r == nil {
		return
	}
	r.run.UpdatedAt = ev.UnixMilli()
	bytesBefore := r.run.Usage.Bytes()
	r.run.Usage.Events++
	r.run.Usage.TextBytes += events.TextBytes(ev)
	if ev.Position != 0 {
		r.last = ev.Position
	}
	family, _, _ := strings.Cut(ev.Type, ".")
	switch family {
	case "run":
		applyRun(r, ev)
		if r.run.Status.Stale() {
			stopWaiting(s, r)
		}
		s.trackEnded(r)
	case "task":
		applyTask(r, ev)
	case "delegate":
		applyDelegation(s, r, ev)
	case "budget":
		applyLedger(r, ev)
	case "mailbox", "steer":
		applyMailbox(r, ev)
	case "ask":
		applyAsk(r, ev)
	case "credential":
		applyCredential(r, ev)
	case "job", "lease", "proxy", "manifest":
		applyJob(r, ev)
	}
	// NB: after the family's fold, which counts a message's body and subject (once: a duplicate adds none).
	countActor(s, r, ev, bytesBefore)
}
