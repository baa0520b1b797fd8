package commands

import (
	"errors"
	"time"
)

// Observer is told what the writer did, for metrics. Its methods run on the publisher's goroutine (Committed, one
// group at a time in log order, pipeline.go, the groups the writer had taken when the engine failed included, their
// commands errors) or the snapshot's goroutine (Snapshotted: the snapshot goroutine, or Close's for the snapshot
// saved at close), after the group's answers are sent: they must be quick and must not call the engine. The report
// and its slices are reused: copy what you keep.
type Observer interface {
	Committed(g *GroupReport)
	Snapshotted(position uint64, bytes int, at time.Time)
}

// SnapshotStarter is an Observer that is also told when a snapshot starts, on the snapshot's goroutine (the snapshot
// goroutine, or Close's for the snapshot saved at close), before the snapshot's records are copied: just before the
// process's memory peaks (the copy, the encoding). It may take a few milliseconds (returning freed memory to the
// system); it must not call the engine.
type SnapshotStarter interface {
	SnapshotStarting()
}

// GroupReport is one decided group.
type GroupReport struct {
	// Commands are the group's commands in order, with their outcomes.
	Commands []CommandReport
	// Events is how many events the group appended.
	Events int
	// Head is the last durable position after the group.
	Head uint64
	// Commit is the time from taking the group to answering it; Append the time from handing it to the log to
	// its being durable (zero when the group wrote nothing).
	Commit, Append time.Duration
}

// Outcomes of a command in a GroupReport.
const (
	OutcomeAdmitted = "admitted" // decided and accepted (or a recorded acceptance replayed)
	OutcomeRejected = "rejected" // a typed rejection; Reason says which
	OutcomeError    = "error"    // not decided: a bug or an engine failure
)

// reasonRefused is the reason a request its caller refused (Request.Refused) is reported with.
const reasonRefused = "refused-by-caller"

// CommandReport is one command's method and outcome; Reason is the rejection's reason (its code when it has
// none).
type CommandReport struct {
	Method  string
	Outcome string
	Reason  string
}

// report fills e.rep for f's group and hands it to the observer (publisher only). failed: the engine failed
// before the group was published and answered every command with the failure; the commands count as the errors
// their callers got, no event as appended, and the head is where the last published group left it.
func (e *Engine) report(f *flight, appendTook time.Duration, failed bool) {
	o := e.opts.Observer
	if o == nil {
		return
	}
	r := &e.rep
	r.Commands = r.Commands[:0]
	for _, p := range f.group {
		c := CommandReport{Method: p.req.Command.Kind(), Outcome: OutcomeAdmitted}
		ended, _ := p.err.(*CredentialEndedError)
		switch {
		case failed:
			c.Outcome = OutcomeError
		case ended != nil:
			// NB: not an error of the engine: the caller's credential ended.
			c.Outcome, c.Reason = OutcomeRejected, ended.reason()
		case errors.Is(p.err, ErrResultTooLarge):
			// NB: nor is a result longer than the caller can carry (a long request id can make it so): its client
			// is refused oversize-frame.
			c.Outcome, c.Reason = OutcomeRejected, CodeOversizeFrame // the code its client is answered
		case p.refused:
			// NB: nor is the caller's own refusal of the request, which answered it with nothing decided.
			c.Outcome, c.Reason = OutcomeRejected, reasonRefused
		case p.err != nil:
			c.Outcome = OutcomeError
		case p.reply.Rejected != nil:
			c.Outcome, c.Reason = OutcomeRejected, p.reply.Rejected.Reason
			if c.Reason == "" {
				c.Reason = p.reply.Rejected.Code
			}
		}
		r.Commands = append(r.Commands, c)
	}
	r.Events, r.Head, r.Commit, r.Append = len(f.applied), f.next-1, time.Since(f.started), appendTook
	if failed {
		r.Events, r.Head, r.Append = 0, e.pub.s.Position, 0
	}
	o.Committed(r)
}
