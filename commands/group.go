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

// groupBuffers are the slices and map commit fills for a group, kept by the
// writer for the next one: a group of 64 commands otherwise allocates its
// events twice over as the slices grow.
type groupBuffers struct {
	seen      map[string]*pending
	writes    []eventlog.Write
	applied   []events.Event
	logEvents []eventlog.Event // the writes' events, one slab
	payloads  []byte           // their payloads, encoded one after another
}

// maxKeptPayloads bounds the payload buffer the writer keeps between groups
// (a group of large messages should not pin its room for ever).
const maxKeptPayloads = 1 << 20

// commit decides, appends and publishes one group. An error means the
// group's events are not known to be durable: the caller fails stop, and
// every request of the group is answered with that error.
func (e *Engine) commit(group []*pending) error {
	started := time.Now()
	var appendTook time.Duration
	w := e.work
	// The group's buffers are the writer's, reused from group to group
	// (cleared at the end, so they keep nothing of a group alive).
	seen, writes, applied, logEvents := e.buf.seen, e.buf.writes[:0], e.buf.applied[:0], e.buf.logEvents[:0]
	payloads := e.buf.payloads[:0]
	defer func() {
		clear(seen)
		clear(writes)
		clear(applied)
		clear(logEvents)
		e.buf.writes, e.buf.applied, e.buf.logEvents = writes[:0], applied[:0], logEvents[:0]
		if cap(payloads) <= maxKeptPayloads {
			e.buf.payloads = payloads[:0]
		}
	}()
	var faulted []projections.Thawed // cold runs made hot for this group
	next := e.next

	for _, p := range group {
		id := p.req.CommandID
		if len(id) > eventlog.MaxIDLen {
			p.reply = Reply{Rejected: badParams("commandId must be at most %d bytes", eventlog.MaxIDLen)}
			continue
		}
		if id != "" {
			if len(p.principal) > eventlog.MaxPrincipalLen {
				p.reply = Reply{Rejected: badParams("principal of %d bytes exceeds %d", len(p.principal), eventlog.MaxPrincipalLen)}
				continue
			}
			if first, dup := seen[p.slot]; dup {
				// NB: the same principal's id twice in one group: the second
				// is a retry of the first only if it is the same request.
				if !bytes.Equal(first.fp, p.fp) {
					p.reply = Reply{Rejected: reusedID()}
					continue
				}
				p.follow = first
				continue
			}
			o, err := e.log.Outcome(p.principal, id)
			if err == nil {
				// An outcome moved from before format 3 has no fingerprint:
				// it answers any retry, as it did then.
				if len(o.Fingerprint) > 0 && !bytes.Equal(o.Fingerprint, p.fp) {
					p.reply = Reply{Rejected: reusedID()}
					continue
				}
				p.reply = recorded(o)
				continue
			}
			if !errors.Is(err, eventlog.ErrNotFound) {
				return fmt.Errorf("commands: look up command %q: %w", id, err)
			}
			seen[p.slot] = p
		}
		if err := e.faultIn(runOf(p.req.Command), &faulted); err != nil {
			return err
		}
		e.lastNow = e.opts.Clock()
		env := Env{Config: w.s.Config(), Now: e.lastNow.UnixNano(), NewID: e.opts.NewID, Actor: p.req.Actor, CommandID: id}
		dec, err := decideSafely(w.s, p.req.Command, env)
		var rej *RejectedError
		if err != nil && !errors.As(err, &rej) {
			p.err = err // a bug, not a decision: nothing is applied or recorded
			continue
		}
		n := len(dec.Events)
		if cap(logEvents)-len(logEvents) < n {
			// NB: a new slab, not a grown one: the writes before hold
			// slices of the old.
			logEvents = make([]eventlog.Event, 0, max(2*cap(logEvents), n, 64))
		}
		wr := eventlog.Write{Principal: p.principal, CommandID: id, Fingerprint: p.fp, Events: logEvents[len(logEvents) : len(logEvents)+n : len(logEvents)+n]}
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
		for i := range dec.Events {
			dec.Events[i].Position = next
			next++
		}
		// Apply only once everything encoded: the working state must hold
		// exactly what the batch holds.
		for i := range dec.Events {
			if err := e.faultIn(dec.Events[i].Stream, &faulted); err != nil {
				return err
			}
			projections.Apply(w.s, dec.Events[i])
		}
		applied = append(applied, dec.Events...)
		if rej != nil {
			wr.Code, wr.Reason = rej.Code, rej.Reason
			wr.Result = []byte(rej.Message)
			p.reply = Reply{Rejected: rej}
		} else {
			res, err := json.Marshal(dec.Result)
			if err != nil {
				return fmt.Errorf("commands: encode result of %s: %w", p.req.Command.Kind(), err)
			}
			wr.Result = res
			p.reply = Reply{Result: res}
		}
		if len(dec.Events) > 0 {
			p.reply.Position = next - 1
		}
		// NB: an engine command that changed nothing (an expiry not yet
		// due, or of something already settled) is not recorded: it is
		// decided again next time, so no recorded "not yet" outlives the
		// reason for it.
		record := id != "" && !(p.req.Principal.Role == events.RoleEngine && len(wr.Events) == 0)
		if len(wr.Events) > 0 || record {
			writes = append(writes, wr)
		}
	}

	if answerBeforeCommit {
		answerEarly(group)
	}
	if err := e.hook(pointDecided, group); err != nil {
		return err
	}
	if len(writes) > 0 {
		t := time.Now()
		first, err := e.committer().Commit(writes)
		appendTook = time.Since(t)
		if err != nil {
			return err
		}
		if err := e.hook(pointDurable, group); err != nil {
			return err
		}
		if len(applied) > 0 && first != e.next {
			return fmt.Errorf("commands: log assigned position %d, the engine expected %d (another writer?)", first, e.next)
		}
		// The log assigned stream versions; carry them into the events the
		// other copy will fold.
		k := 0
		for _, wr := range writes {
			for i := range wr.Events {
				applied[k].StreamVersion = wr.Events[i].StreamVersion
				k++
			}
		}
	}
	e.next = next
	if len(writes) > 0 {
		e.stats.groups.Add(1)
	}
	e.stats.commands.Add(uint64(len(group)))
	e.stats.events.Add(uint64(len(applied)))

	evicted := e.evictPass(e.lastNow)
	// Publish, answer, then bring the other copy up to date.
	if err := e.publish(group, applied, evicted, faulted...); err != nil {
		return err
	}
	e.report(group, len(applied), started, appendTook)
	return nil
}

// publish publishes the working copy, answers group, and brings the other
// copy up to date: the same cold runs faulted in, the same events applied,
// the same runs made cold. It returns an error only from a test hook, before
// anyone is answered.
func (e *Engine) publish(group []*pending, applied []events.Event, evicted []string, faulted ...projections.Thawed) error {
	if group == nil && len(evicted) == 0 {
		return nil
	}
	w := e.work
	old := e.pub.Load()
	e.pub.Store(w)
	w.mu.Unlock()
	if group != nil {
		ch := make(chan struct{})
		close(*e.changed.Swap(&ch))
		e.runs.publish(applied)
		if err := e.hook(pointPublished, group); err != nil {
			return err
		}
		for _, p := range group {
			if p.follow != nil {
				p.reply, p.err = p.follow.reply, p.follow.err
				p.reply.Replayed = true
			}
			if !p.early {
				close(p.done)
			}
		}
	}
	old.mu.Lock()
	for _, t := range faulted {
		old.s.ThawFrom(t)
	}
	for _, ev := range applied {
		projections.Apply(old.s, ev)
	}
	for _, id := range evicted {
		old.s.Evict(id)
	}
	e.coldSinceSnap += len(evicted)
	e.work = old
	e.maybeSnapshot()
	return nil
}

// decideSafely turns a panic in a decision into an error, so one bad
// command cannot take the writer down.
func decideSafely(s *projections.State, c Command, env Env) (d Decision, err error) {
	defer func() {
		if r := recover(); r != nil {
			d, err = Decision{}, fmt.Errorf("commands: %s panicked: %v", c.Kind(), r)
		}
	}()
	return Decide(s, c, env)
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
