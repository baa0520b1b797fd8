package wire

import (
	"encoding/json"
	"fmt"
)

// Push event names, the "event" field of a push frame.
const (
	// EventMailboxMessage carries a mailbox message to the connections of its recipient; seq is always 0.
	EventMailboxMessage = "mailbox.message"
	// EventTeamEvent carries one log event to an events.subscribe subscriber; seq is its position.
	EventTeamEvent = "team.event"
	// EventResync tells a subscriber that frames were not delivered; see Resync.
	EventResync = "resync"
)

// Event is a push frame, broker to client, that answers no request: {"event": …, "data": …, "seq": …}. The seq
// key is always present (pi-crew sends 0 for mailbox pushes); nil Data encodes as null.
//
// A client tells push frames from responses by the "event" key: a response never has one. An Event is a plain
// value; encoding it fails only if Data is not valid JSON.
type Event struct {
	Name string          `json:"event"`
	Data json.RawMessage `json:"data"`
	Seq  uint64          `json:"seq"`
}

// Resync is crewlog's overflow frame, {"event": "resync", "data": {"fromSeq": N}}, with no seq key (SPEC §5).
// pi-crew drops frames silently when a connection's outbound queue is full; crewlog drops them too but then says
// so: FromSeq is the position of the first event the subscriber did not receive, and the subscriber replays from
// there. Decoded as an Event, a resync frame has Name EventResync and Seq 0. A Resync is a plain value.
type Resync struct {
	FromSeq uint64
}

type resyncData struct {
	FromSeq uint64 `json:"fromSeq"`
}

type resyncFrame struct {
	Event string     `json:"event"`
	Data  resyncData `json:"data"`
}

// MarshalJSON encodes the resync frame.
func (r Resync) MarshalJSON() ([]byte, error) {
	return marshal(resyncFrame{EventResync, resyncData(r)})
}

// UnmarshalJSON decodes a resync frame; a frame for another event is an error matching ErrMalformed.
func (r *Resync) UnmarshalJSON(b []byte) error {
	var f resyncFrame
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if f.Event != EventResync {
		return malformed("not a resync frame")
	}
	r.FromSeq = f.Data.FromSeq
	return nil
}
