package natslog

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/eventlog"
)

// groupVersion is the first byte of every message: the group encoding.
const groupVersion = 1

// wireGroup is one JetStream message: a whole engine group, as decided.
// Positions, stream versions and hashes are not sent: every copy assigns
// them by appending the same writes in the same order, and After (the
// position the group follows) lets a copy check that it is where the
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

// encodeGroup encodes ws (before Append assigns anything in place) as the
// group that follows position after.
func encodeGroup(after uint64, ws []eventlog.Write) ([]byte, error) {
	g := wireGroup{After: after, Writes: make([]wireWrite, len(ws))}
	for i := range ws {
		w := &ws[i]
		ww := wireWrite{Principal: w.Principal, CommandID: w.CommandID, Code: w.Code, Reason: w.Reason,
			Result: w.Result, Fingerprint: w.Fingerprint, Events: make([]wireEvent, len(w.Events))}
		for _, x := range w.Expected {
			ww.Expected = append(ww.Expected, wireExpectation{Stream: x.Stream, Version: x.Version})
		}
		for j := range w.Events {
			e := &w.Events[j]
			ww.Events[j] = wireEvent{Stream: e.Stream, Type: e.Type, SchemaVersion: e.SchemaVersion, Time: e.Time,
				CausationID: e.CausationID, CorrelationID: e.CorrelationID, ActorRole: e.ActorRole, ActorTask: e.ActorTask,
				Payload: e.Payload}
		}
		g.Writes[i] = ww
	}
	buf := bytes.NewBuffer([]byte{groupVersion})
	enc := msgpack.NewEncoder(buf)
	enc.UseArrayEncodedStructs(true) // positions, not field names: a group is sent once per copy
	if err := enc.Encode(&g); err != nil {
		return nil, fmt.Errorf("natslog: encode group: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeGroup is the inverse of encodeGroup. A message that is not a group
// is corrupt: the stream holds nothing else.
func decodeGroup(b []byte) (after uint64, ws []eventlog.Write, err error) {
	if len(b) == 0 || b[0] != groupVersion {
		return 0, nil, fmt.Errorf("%w: natslog: message is not a version-%d group", eventlog.ErrCorrupt, groupVersion)
	}
	var g wireGroup
	if err := msgpack.Unmarshal(b[1:], &g); err != nil {
		return 0, nil, fmt.Errorf("%w: natslog: decode group: %v", eventlog.ErrCorrupt, err)
	}
	ws = make([]eventlog.Write, len(g.Writes))
	for i := range g.Writes {
		ww := &g.Writes[i]
		w := eventlog.Write{Principal: ww.Principal, CommandID: ww.CommandID, Code: ww.Code, Reason: ww.Reason,
			Result: ww.Result, Fingerprint: ww.Fingerprint, Events: make([]eventlog.Event, len(ww.Events))}
		for _, x := range ww.Expected {
			w.Expected = append(w.Expected, eventlog.Expectation{Stream: x.Stream, Version: x.Version})
		}
		for j := range ww.Events {
			e := &ww.Events[j]
			w.Events[j] = eventlog.Event{Stream: e.Stream, Type: e.Type, SchemaVersion: e.SchemaVersion, Time: e.Time,
				CommandID: ww.CommandID, CausationID: e.CausationID, CorrelationID: e.CorrelationID,
				ActorRole: e.ActorRole, ActorTask: e.ActorTask, Payload: e.Payload}
		}
		ws[i] = w
	}
	return g.After, ws, nil
}
