package natslog

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events/msgpacklen"
)

// The first byte of every message is its encoding.
const (
	// groupVersion is the first layout, before a subject per crewlog
	// stream: a whole engine group in one message on the groups subject.
	// Copies still read it (decodeGroup); nothing writes it any more.
	groupVersion = 1
	// batchVersion is the layout of batch.go: a group's manifest on the
	// groups subject, its events on their crewlog streams' subjects.
	batchVersion = 2
)

// wireGroup is one message of the first layout: a whole engine group, as
// decided. Positions, stream versions and hashes are not sent: every copy
// assigns them by appending the same writes in the same order, and After
// (the position the group follows) lets a copy check that it is where the
// writer was.
type wireGroup struct {
	After  uint64      // the writer's head before the group
	Writes []wireWrite //
}

type wireWrite struct {
	Principal   string
	CommandID   string
	Code        string
	Reason      string
	Result      []byte
	Fingerprint []byte
	Expected    []wireExpectation
	Events      []wireEvent
}

type wireExpectation struct {
	Stream  string
	Version int64
}

// wireEvent is an event as sent: in a chunk (batch.go) Stream is empty,
// the chunk names it once.
type wireEvent struct {
	Stream        string
	Type          string
	SchemaVersion uint16
	Time          int64
	CausationID   string
	CorrelationID string
	ActorRole     string
	ActorTask     string
	Payload       []byte
}

// outcomeToWire is w's outcome as sent, without its events.
func outcomeToWire(w *eventlog.Write) wireWrite {
	ww := wireWrite{Principal: w.Principal, CommandID: w.CommandID, Code: w.Code, Reason: w.Reason,
		Result: w.Result, Fingerprint: w.Fingerprint}
	for _, x := range w.Expected {
		ww.Expected = append(ww.Expected, wireExpectation{Stream: x.Stream, Version: x.Version})
	}
	return ww
}

// outcome is the inverse of outcomeToWire.
func (ww *wireWrite) outcome() eventlog.Write {
	w := eventlog.Write{Principal: ww.Principal, CommandID: ww.CommandID, Code: ww.Code, Reason: ww.Reason,
		Result: ww.Result, Fingerprint: ww.Fingerprint}
	for _, x := range ww.Expected {
		w.Expected = append(w.Expected, eventlog.Expectation{Stream: x.Stream, Version: x.Version})
	}
	return w
}

// toWire is e as sent; the stream only with withStream.
func toWire(e *eventlog.Event, withStream bool) wireEvent {
	w := wireEvent{Type: e.Type, SchemaVersion: e.SchemaVersion, Time: e.Time, CausationID: e.CausationID,
		CorrelationID: e.CorrelationID, ActorRole: e.ActorRole, ActorTask: e.ActorTask, Payload: e.Payload}
	if withStream {
		w.Stream = e.Stream
	}
	return w
}

// event is the inverse of toWire, for a write's command id on stream.
func (w *wireEvent) event(stream, commandID string) eventlog.Event {
	return eventlog.Event{Stream: stream, Type: w.Type, SchemaVersion: w.SchemaVersion, Time: w.Time,
		CommandID: commandID, CausationID: w.CausationID, CorrelationID: w.CorrelationID, ActorRole: w.ActorRole,
		ActorTask: w.ActorTask, Payload: w.Payload}
}

// decodeGroup decodes a message of the first layout. One that is not a
// group is corrupt.
func decodeGroup(b []byte) (after uint64, ws []eventlog.Write, err error) {
	if len(b) == 0 || b[0] != groupVersion {
		return 0, nil, fmt.Errorf("%w: natslog: message is not a version-%d group", eventlog.ErrCorrupt, groupVersion)
	}
	if !msgpacklen.Fit(b[1:]) { // NB: as in decodeWire
		return 0, nil, fmt.Errorf("%w: natslog: decode group: %w", eventlog.ErrCorrupt, errLengths)
	}
	var g wireGroup
	if err := msgpack.Unmarshal(b[1:], &g); err != nil {
		return 0, nil, fmt.Errorf("%w: natslog: decode group: %v", eventlog.ErrCorrupt, err)
	}
	ws = make([]eventlog.Write, len(g.Writes))
	for i := range g.Writes {
		ww := &g.Writes[i]
		w := ww.outcome()
		w.Events = make([]eventlog.Event, len(ww.Events))
		for j := range ww.Events {
			w.Events[j] = ww.Events[j].event(ww.Events[j].Stream, ww.CommandID)
		}
		ws[i] = w
	}
	return g.After, ws, nil
}
