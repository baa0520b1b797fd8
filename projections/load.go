package projections

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// FromLog turns a stored record into a domain event, decoding (and, for an
// older schema version, upcasting) its payload. A payload that does not
// decode is corruption of the log, reported as such.
func FromLog(r *eventlog.Event) (events.Event, error) { return FromLogWith(nil, r) }

// FromLogWith is FromLog decoding with dec, which shares repeated strings
// between the payloads it decodes (see events.Decoder); a nil dec is
// FromLog. Like dec, it belongs to one goroutine.
func FromLogWith(dec *events.Decoder, r *eventlog.Event) (events.Event, error) {
	p, err := dec.Decode(r.Type, r.SchemaVersion, r.Payload)
	if err != nil {
		return events.Event{}, &eventlog.CorruptError{
			Position: r.Position, Key: fmt.Sprintf("e/%d", r.Position), Reason: err.Error(),
		}
	}
	return events.Event{
		Position: r.Position, Stream: r.Stream, StreamVersion: r.StreamVersion, Type: r.Type,
		SchemaVersion: r.SchemaVersion, Time: r.Time, CommandID: r.CommandID, CausationID: r.CausationID,
		CorrelationID: r.CorrelationID, Actor: events.Actor{Role: r.ActorRole, TaskID: r.ActorTask}, Payload: p,
	}, nil
}

// Replay folds the durable events from position s.Position+1 up to and
// including to (0 = the durable head) into s.
func Replay(s *State, l *eventlog.Log, to uint64) error {
	it := l.Read(s.Position + 1)
	dec := events.NewDecoder() // shares repeated strings across the fold
	for it.Next() {
		r := it.Event()
		if to > 0 && r.Position > to {
			break
		}
		ev, err := FromLogWith(dec, r)
		if err != nil {
			it.Close()
			return err
		}
		Apply(s, ev)
	}
	return it.Close()
}

// LoadInfo tells how Load built the state.
type LoadInfo struct {
	// SnapshotPosition is the position of the snapshot used, 0 for none.
	SnapshotPosition uint64
	// SnapshotError is why the newest snapshot was not used (absent,
	// corrupt, undecodable); nil when it was.
	SnapshotError error
	// Replayed is the number of events folded after the snapshot.
	Replayed uint64
}

// Load builds the state of the whole durable log: the newest valid snapshot
// plus the tail after it, or a fold from position 1 when there is no usable
// snapshot. A snapshot is an optimisation only: both paths give the same
// state, and a corrupt snapshot is reported in LoadInfo, never trusted.
func Load(l *eventlog.Log) (*State, LoadInfo, error) {
	var info LoadInfo
	s := New()
	snap, err := l.LatestSnapshot()
	if err == nil {
		var decoded *State
		decoded, err = DecodeSnapshot(snap.Data)
		if err == nil && decoded.Position != snap.Position {
			err = fmt.Errorf("%w: snapshot stored at %d holds state at %d", eventlog.ErrCorrupt, snap.Position, decoded.Position)
		}
		if err == nil {
			s, info.SnapshotPosition = decoded, snap.Position
		}
	}
	if err != nil {
		info.SnapshotError = err
	}
	from := s.Position
	if err := Replay(s, l, 0); err != nil {
		return nil, info, err
	}
	info.Replayed = s.Position - from
	return s, info, nil
}
