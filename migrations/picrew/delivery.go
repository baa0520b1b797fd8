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
// states while the run is live: a 4 MiB file names 200,000 messages. Of more, those of the run's messages are kept
// first, then the most advanced (rank).
const maxDeliveryStates = 10_000

// parseDelivery decodes delivery.json (rel) of run id; one that does not
// is reported and ok is false. message tells the ids of the run's messages
// known (deliveryStates.message); over is set when b holds the states of
// more than maxDeliveryStates ids, some left out.
func (s *source) parseDelivery(id, rel string, b []byte, message func(msgID string) bool) (states map[string]string,
	over, ok bool) {
	var d struct {
		Messages deliveryStates `json:"messages"`
	}
	d.Messages.message = message
	if !json.Valid(b) || !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		// NB: decoded as before for its error (or, for null, its lack of states), which it meets before any state.
		var whole struct {
			Messages map[string]json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &whole); err != nil {
			s.skip(id, rel, 0, 0, deliveryUnreadable, err)
			return nil, false, false
		}
		return map[string]string{}, false, true
	}
	if err := json.Unmarshal(b, &d); err != nil {
		s.skip(id, rel, 0, 0, deliveryUnreadable, err)
		return nil, false, false
	}
	if d.Messages.over {
		s.skip(id, rel, 0, 0, "holds the states of more than %d messages (pi-crew keeps at most 10,000): %[1]d are kept, "+
			"those of the run's messages first, then of other ids, the most advanced of each (acknowledged, then "+
			"delivered, then the others, each in the order named), the others left out, their states taken from "+
			"their mailbox lines", maxDeliveryStates)
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
	return states, d.Messages.over, true
}

// deliveryStates is the messages member of delivery.json, decoded one state at a time: the states of at most
// maxDeliveryStates message ids it names, those of the run's messages first, then the most advanced (over: it names
// more). NB: decoded whole first, a file of
// hundreds of thousands of states held each state's bytes apart, the map of them and the states decoded from it at
// once. It decodes as the map of raw states it replaced did: the last state of an id named twice stands, the states
// of several messages members (any spelling encoding/json matches to the name) merge, and a null one drops those
// before it.
type deliveryStates struct {
	states map[string]deliveryState
	over   bool
	// message tells the ids of the run's messages (nil: none is). NB: a run's workers write delivery.json, and the
	// states of ids that are no message of the run, acknowledged, named before the run's own, took every place the
	// bound keeps. The one-shot import knows every message of the run when it reads the file; a follower, those it
	// read so far, so it reads such a file again once it read more (syncRun).
	message func(msgID string) bool
	// byRank holds the ids kept at each rank in the order their states were named, the last kept of the lowest rank
	// the first left out for a state of a higher one. NB: an id named again is pushed again; the entry it leaves
	// behind is stale (its naming no longer the id's), popped or compacted away (stale counts them).
	byRank [deliveryRanks][]namedState
	named  int
	stale  int
}

// deliveryState is a message's state in delivery.json, ok false for one that is not a string (or null); named
// numbers its naming in the file, from 1; own is set for a message of the run (deliveryStates.message).
type deliveryState struct {
	state string
	ok    bool
	own   bool
	named int
}

// namedState is the naming (deliveryState.named) of a message id's state in the file.
type namedState struct {
	msgID string
	named int
}

// deliveryRanks is the count of ranks a delivery state has (deliveryState.rank).
const deliveryRanks = 7

// rank is what keeping the state is worth, of a file naming more than maxDeliveryStates messages: a message's
// mailbox line says queued (pi-crew writes an acknowledgement to delivery.json alone), so a delivered state left out
// reads as queued and an acknowledged one as unread, while a queued one (or any other string) costs nothing, and one
// that is not a string, left out and reported anyway, less; the state of a message of the run (own) is worth more
// than any other id's, which names no message the import records. NB: pi-crew's own bound keeps its queued states
// first, the ones it has yet to deliver.
func (st deliveryState) rank() int {
	var r int
	switch {
	case !st.ok:
		return 0
	case st.state == "acknowledged":
		r = 3
	case st.state == "delivered":
		r = 2
	default:
		r = 1
	}
	if st.own {
		r += 3
	}
	return r
}

func (d *deliveryStates) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case 'n':
		*d = deliveryStates{message: d.message}
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
		st := deliveryState{own: d.message != nil && d.message(msgID)}
		st.ok = dec.Decode(&st.state) == nil
		d.keep(msgID, st)
	}
	return nil
}

// keep takes st as the state of msgID named next, once maxDeliveryStates ids are kept in place of the last named of
// those of the lowest rank below it, or not at all. NB: in the order named, so the states kept are the same for the
// same file; and one pass, holding no more than maxDeliveryStates ids, so an id named again at a lower rank once the
// bound was met (pi-crew names each once) keeps its place, where a state left out for it may have ranked higher.
func (d *deliveryStates) keep(msgID string, st deliveryState) {
	d.named++
	st.named = d.named
	if _, known := d.states[msgID]; known {
		d.stale++
	} else if len(d.states) >= maxDeliveryStates {
		d.over = true
		if !d.leaveOutBelow(st.rank()) {
			return
		}
	}
	d.states[msgID] = st
	d.byRank[st.rank()] = append(d.byRank[st.rank()], namedState{msgID, st.named})
	if d.stale > maxDeliveryStates {
		d.compact()
	}
}

// leaveOutBelow drops the state named last of those kept at the lowest rank below rank, false if none is.
func (d *deliveryStates) leaveOutBelow(rank int) bool {
	for low := range rank {
		for ids := d.byRank[low]; len(ids) > 0; ids = d.byRank[low] {
			last := ids[len(ids)-1]
			d.byRank[low] = ids[:len(ids)-1]
			if d.states[last.msgID].named == last.named {
				delete(d.states, last.msgID)
				return true
			}
			d.stale--
		}
	}
	return false
}

// compact drops the stale entries of byRank, which an id named again many times would otherwise grow without bound.
func (d *deliveryStates) compact() {
	for rank, ids := range d.byRank {
		d.byRank[rank] = slices.DeleteFunc(ids, func(n namedState) bool { return d.states[n.msgID].named != n.named })
	}
	d.stale = 0
}
