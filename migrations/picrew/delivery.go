package picrew

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// deliveryUnreadable is the report of a delivery.json that cannot be read or
// decoded (its error the argument).
const deliveryUnreadable = "delivery state unreadable, message statuses taken from the mailbox lines: %v"

// maxDeliveryStates bounds the message states kept of one delivery.json, pi-crew's own bound (it keeps the states of
// its last 10,000 messages). NB: a run's workers write the file, up to maxWholeFile bytes, and a follower keeps its
// states while the run is live: a 4 MiB file names 200,000 messages.
const maxDeliveryStates = 10_000

// parseDelivery decodes delivery.json (rel) of run id; one that does not
// is reported and ok is false.
func (s *source) parseDelivery(id, rel string, b []byte) (states map[string]string, ok bool) {
	var d struct {
		Messages deliveryStates `json:"messages"`
	}
	if !json.Valid(b) || !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		// NB: decoded as before for its error (or, for null, its lack of states), which it meets before any state.
		var whole struct {
			Messages map[string]json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &whole); err != nil {
			s.skip(id, rel, 0, 0, deliveryUnreadable, err)
			return nil, false
		}
		return map[string]string{}, true
	}
	if err := json.Unmarshal(b, &d); err != nil {
		s.skip(id, rel, 0, 0, deliveryUnreadable, err)
		return nil, false
	}
	if d.Messages.over {
		s.skip(id, rel, 0, 0, "holds the states of more than %d messages (pi-crew keeps at most 10,000): those of "+
			"the messages past the first %[1]d ids it names are left out, their states taken from their mailbox "+
			"lines", maxDeliveryStates)
	}
	states = make(map[string]string, len(d.Messages.states))
	for _, msgID := range slices.Sorted(maps.Keys(d.Messages.states)) {
		// NB: each state on its own: one value that is not a string made the whole file undecodable, and every
		// message's state was taken from its line, which keeps "queued" after an acknowledgement.
		st := d.Messages.states[msgID]
		if !st.ok {
			s.skip(id, rel, 0, 0,
				"message %s: its delivery state is not a string: left out, its state taken from its mailbox line",
				clip(msgID))
			continue
		}
		states[msgID] = st.state
	}
	return states, true
}

// deliveryStates is the messages member of delivery.json, decoded one state at a time: the states of the first
// maxDeliveryStates message ids it names (over: it names more). NB: decoded whole first, a file of hundreds of
// thousands of states held each state's bytes apart, the map of them and the states decoded from it at once. It
// decodes as the map of raw states it replaced did: the last state of an id named twice stands, the states of
// several messages members (any spelling encoding/json matches to the name) merge, and a null one drops those
// before it.
type deliveryStates struct {
	states map[string]deliveryState
	over   bool
}

// deliveryState is a message's state in delivery.json, ok false for one that is not a string (or null).
type deliveryState struct {
	state string
	ok    bool
}

func (d *deliveryStates) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case 'n':
		*d = deliveryStates{}
		return nil
	case '{':
	default:
		// NB: the error of the map it replaced, worded as before (its caller's decoder names the field).
		return json.Unmarshal(b, new(map[string]json.RawMessage))
	}
	if d.states == nil {
		d.states = map[string]deliveryState{}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // the object's {
		return err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		msgID, isKey := key.(string)
		if !isKey {
			return fmt.Errorf("picrew: delivery state named by %v, not a string", key)
		}
		var st deliveryState
		st.ok = dec.Decode(&st.state) == nil
		if _, known := d.states[msgID]; known || len(d.states) < maxDeliveryStates {
			d.states[msgID] = st
		} else {
			d.over = true
		}
	}
	return nil
}
