package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// decide decides the commands f.group[from:] against the working state,
// each after the ones before it, adding their writes to f's (pipeline.go:
// the group stays open while the group before it syncs, so commands join
// it as they arrive). An error fails the engine: the caller fails stop and
// answers every request of the group with it.
func (e *Engine) decide(f *flight, from int) error {
	w := e.work
	writes, applied, logEvents, payloads := f.writes, f.applied, f.logEvents, f.payloads
	next, unrecorded := f.next, f.unrecorded
	var env Env // one per call: decideIn's env escapes

	for _, p := range f.group[from:] {
		if p.err = credentialEnded(w, &p.req); p.err != nil {
			continue
		}
		id := p.req.CommandID
		if len(id) > eventlog.MaxIDLen {
			p.reply = Reply{Rejected: badParams("commandId must be at most %d bytes", eventlog.MaxIDLen)}
			continue
		}
		if id != "" {
			if len(p.principal) > eventlog.MaxPrincipalLen {
				p.reply = Reply{Rejected: badParams("principal of %d bytes exceeds %d", len(p.principal),
					eventlog.MaxPrincipalLen)}
				continue
			}
			if first, dup := e.seen[p.slot]; dup {
				// NB: the same principal's id twice in the groups in
				// flight (this one or one not yet published, whose
				// outcome the log does not serve yet): the second is a
				// retry of the first only if it is the same request, and
				// is answered as the first once that is durable.
				if !sameRequest(first.fp, p.fp, p.cutFP) {
					p.reply = Reply{Rejected: reusedID()}
					continue
				}
				p.follow = first
				continue
			}
			o, err := e.log.Outcome(p.principal, id)
			if err == nil {
				p.reply = answerRetry(o, p.fp, p.cutFP)
				continue
			}
			if !errors.Is(err, eventlog.ErrNotFound) {
				return fmt.Errorf("commands: look up command %q: %w", id, err)
			}
		}
		if p.req.Refused != nil {
			// NB: its id, if any, has no outcome and is not entered in seen: nothing is decided, and the id is
			// measured again when it comes again.
			p.err, p.refused = p.req.Refused, true
			continue
		}
		if id != "" {
			e.seen[p.slot] = p
			f.firsts = append(f.firsts, p)
		}
		if err := e.faultIn(runOf(p.req.Command), &f.faulted); err != nil {
			if !errors.Is(err, projections.ErrNotReadBack) {
				return err
			}
			// NB: a run that cannot be read back is refused, not decided without its records (which could record
			// events that contradict its history), and only its command: the working state is as it was, and
			// the other principals' commands go on. Nothing is recorded, so a retry is decided once it can be read.
			p.err = err
			if id != "" {
				unrecorded = append(unrecorded, p)
			}
			continue
		}
		e.lastNow = e.times.now()
		env = Env{Config: w.Config(), Now: e.lastNow.UnixNano(), NewID: e.opts.NewID, Actor: p.req.Actor,
			CommandID: id}
		dec, err := decideSafely(w, p.req.Command, &env)
		rej := rejectedOf(err)
		if err != nil && rej == nil {
			p.err = err // a bug, not a decision: nothing is applied or recorded
			if id != "" {
				unrecorded = append(unrecorded, p)
			}
			continue
		}
		// NB: the result is encoded before anything is applied, so that one
		// its caller cannot carry leaves no trace (Request.MaxResultBytes).
		var res []byte
		if rej == nil {
			if res, err = encodeResult(dec.Result); err != nil {
				return fmt.Errorf("commands: encode result of %s: %w", p.req.Command.Kind(), err)
			}
			if m := p.req.MaxResultBytes; m > 0 && len(res) > m {
				p.err = fmt.Errorf("%w: %s answers %d bytes, %d fit", ErrResultTooLarge, p.req.Command.Kind(),
					len(res), m)
				if id != "" {
					unrecorded = append(unrecorded, p)
				}
				continue
			}
		}
		n := len(dec.Events)
		if cap(logEvents)-len(logEvents) < n {
			// NB: a new slab, not a grown one: the writes before hold
			// slices of the old.
			logEvents = make([]eventlog.Event, 0, max(2*cap(logEvents), n, 64))
		}
		wr := eventlog.Write{Principal: p.principal, CommandID: id, Fingerprint: p.fp,
			Events: logEvents[len(logEvents) : len(logEvents)+n : len(logEvents)+n]}
		logEvents = logEvents[:len(logEvents)+n]
		for i := range dec.Events {
			if wr.Events[i], payloads, err = toLog(&dec.Events[i], payloads); err != nil {
				return err
			}
			if err := e.log.CheckEvent(&wr.Events[i]); err != nil {
				// Too large for the log (a huge message body, say): refuse
				// the command rather than fail the whole group's append.
				rej = badParams("%s: %v", p.req.Command.Kind(), err)
				dec.Events, wr.Events = nil, nil
				break
			}
		}
		// NB: only a write the group may record: a command without a command id and without events records nothing
		// (its refusal, say), whatever the size of its outcome, and is answered as decided.
		unrecordable := false
		if e.checker != nil && (id != "" || len(wr.Events) > 0) {
			if err := e.checkWrite(wr, res, rej); err != nil {
				// Too large for the Committer's log: refused as above.
				rej = badParams("%s: %v", p.req.Command.Kind(), err)
				dec.Events, wr.Events = nil, nil
				// NB: the refusal recorded in its place may not fit either (its command id, principal and message,
				// under a max_payload of a few KiB): it is answered unrecorded, decided again when it comes again,
				// where the group holding it could not be committed and the writer failed stop.
				unrecordable = id != "" && e.checkWrite(wr, nil, rej) != nil
			}
		}
		for i := range dec.Events {
			dec.Events[i].Position = next
			next++
		}
		// Apply only once everything encoded: the working state must hold
		// exactly what the batch holds.
		for i := range dec.Events {
			if err := e.faultIn(dec.Events[i].Stream, &f.faulted); err != nil {
				return err
			}
			projections.Apply(w, dec.Events[i])
		}
		applied = append(applied, dec.Events...)
		if rej != nil {
			wr.Code, wr.Reason = rej.Code, rej.Reason
			wr.Result = []byte(rej.Message)
			p.reply = Reply{Rejected: rej}
		} else {
			wr.Result = res
			p.reply = Reply{Result: res, Value: dec.Result}
		}
		if len(dec.Events) > 0 {
			p.reply.Position = next - 1
		}
		// NB: an engine command that changed nothing (an expiry not yet
		// due, or of something already settled) is not recorded: it is
		// decided again next time, so no recorded "not yet" outlives the
		// reason for it.
		record := id != "" && !unrecordable && !(p.req.Principal.Role == events.RoleEngine && len(wr.Events) == 0)
		if record && len(wr.Events) == 0 {
			if record, err = e.mayRecordEventless(f, p.principal, p.req.Principal); err != nil {
				return err
			}
		}
		if len(wr.Events) > 0 || record {
			writes = append(writes, wr)
		}
		if id != "" && !record {
			unrecorded = append(unrecorded, p)
		}
	}

	// Kept for the next commands of the group, the publisher and, emptied,
	// the flight's next group.
	f.writes, f.applied, f.logEvents, f.payloads = writes, applied, logEvents, payloads
	f.next, f.unrecorded = next, unrecorded
	if h := e.opts.hooks; h != nil && h.decidedCommands != nil {
		h.decidedCommands(f.group[from:])
	}
	return nil
}

// checkWrite asks the Committer's log (e.checker) whether it can record wr with its outcome: res, or rej if set.
func (e *Engine) checkWrite(wr eventlog.Write, res []byte, rej *RejectedError) error {
	wr.Result = res
	if rej != nil {
		wr.Code, wr.Reason, wr.Result = rej.Code, rej.Reason, []byte(rej.Message)
	}
	return e.checker.CheckWrite(&wr)
}

// handOff closes f's group, decided by decide, and hands it to the log.
// The caller sends it to the publisher, which answers it once it is
// durable. An error means the group is not known to be durable: the caller
// fails stop, and every request of the group is answered with that error.
func (e *Engine) handOff(f *flight) error {
	group, writes := f.group, f.writes
	// NB: what is not recorded is decided again when it comes again in a
	// later group, as it would be once this one is published; only this
	// group's own retries follow it.
	for _, p := range f.unrecorded {
		e.forget(p)
	}
	if answerBeforeCommit {
		answerEarly(group)
	}
	if err := e.hook(pointDecided, group); err != nil {
		return err
	}
	if len(writes) > 0 {
		// NB: a failed engine hands nothing more to the log.
		if err := e.failure(); err != nil {
			return err
		}
		f.stagedAt = time.Now()
		staged, err := e.stager.Stage(writes)
		f.stageTook = time.Since(f.stagedAt)
		if err != nil {
			return err
		}
		f.staged = staged
		if !e.early {
			e.unsynced++
		}
	}
	e.next = f.next
	return nil
}

// decideSafely turns a panic in a decision into an error, so one bad
// command cannot take the writer down; but not a Pebble fatal error (a cold
// run read back from the log), which it raises again: the store answers
// nothing more, and crewd exits for its supervisor to restart it.
func decideSafely(s *projections.State, c Command, env *Env) (d Decision, err error) {
	defer func() {
		if r := recover(); r != nil {
			eventlog.RepanicFatal(r)
			d, err = Decision{}, fmt.Errorf("commands: %s panicked: %v", c.Kind(), r)
		}
	}()
	return decideIn(s, c, env)
}

// recordedOrRefused answers r, which its caller refused (Request.Refused), on a node that forwards what it decides
// to the writer: the outcome its copy holds of r's command id, as the writer would answer a retry, else the refusal.
func (e *Engine) recordedOrRefused(r Request) (Reply, error) {
	if r.CommandID == "" {
		return Reply{}, r.Refused
	}
	key := r.Principal.Key()
	if key == "" {
		return Reply{}, fmt.Errorf("commands: %s: a command id needs a principal", r.Command.Kind())
	}
	o, err := e.log.Outcome(key, r.CommandID)
	if errors.Is(err, eventlog.ErrNotFound) {
		return Reply{}, r.Refused
	}
	if err != nil {
		return Reply{}, fmt.Errorf("commands: look up command %q: %w", r.CommandID, err)
	}
	var fp [fingerprintLen]byte
	if err := fingerprintInto(&fp, r.Command); err != nil {
		return Reply{}, err
	}
	cutFP, err := cutFingerprint(r.Command)
	if err != nil {
		return Reply{}, err
	}
	return answerRetry(o, fp[:], cutFP), nil
}

// answerRetry answers a retry whose request digests to fp (and cutFP, cutFingerprint's) from the outcome o recorded
// under its command id: that outcome, or a refusal when another request was recorded under the id. An outcome moved
// from before format 3 has no fingerprint: it answers any retry, as it did then.
func answerRetry(o eventlog.Outcome, fp, cutFP []byte) Reply {
	if len(o.Fingerprint) > 0 && !sameRequest(o.Fingerprint, fp, cutFP) {
		return Reply{Rejected: reusedID()}
	}
	return recorded(o)
}

// sameRequest tells whether recorded, the fingerprint of a request under a command id (an outcome's, or a request's
// in flight), is that of a retry that digests to fp, or to cutFP, the fingerprint of its text as cut that a build
// before DelegateSettle.SentText recorded (nil for most requests).
func sameRequest(recorded, fp, cutFP []byte) bool {
	return bytes.Equal(recorded, fp) || cutFP != nil && bytes.Equal(recorded, cutFP)
}

// recorded rebuilds the answer of an earlier attempt from its outcome.
func recorded(o eventlog.Outcome) Reply {
	r := Reply{Replayed: true}
	if o.Count > 0 {
		r.Position = o.First + o.Count - 1
	}
	if o.Accepted() {
		r.Result = json.RawMessage(o.Result)
		return r
	}
	r.Rejected = &RejectedError{Code: o.Code, Reason: o.Reason, Message: string(o.Result)}
	return r
}

// toLog encodes a domain event for the log, its payload appended to buf.
// NB: the event's payload is a slice of buf capped at its end, so later
// appends never write into it, whether or not they move buf.
func toLog(ev *events.Event, buf []byte) (eventlog.Event, []byte, error) {
	start := len(buf)
	buf, err := events.AppendPayload(buf, ev.Payload)
	if err != nil {
		return eventlog.Event{}, buf, fmt.Errorf("commands: encode %s: %w", ev.Type, err)
	}
	p := buf[start:len(buf):len(buf)]
	return eventlog.Event{
		Stream: ev.Stream, Type: ev.Type, SchemaVersion: ev.SchemaVersion, Time: ev.Time,
		CommandID: ev.CommandID, CausationID: ev.CausationID, CorrelationID: ev.CorrelationID,
		ActorRole: ev.Actor.Role, ActorTask: ev.Actor.TaskID, Payload: p,
	}, buf, nil
}
