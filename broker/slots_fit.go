package broker

import (
	"encoding/json"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/projections"
)

// query.slots lists every holder of the pool, up to maxSlots (64), and is no page: 64 sub ids of crewlog's own (gc-
// and a UUID, 39 chars each), or fewer of an import's (up to 256), outgrow a frame of 1 KiB, which a daemon allows,
// and query.slots answered oversize-frame for as long as they held their slots. A pool whose holders would not fit
// in a frame is sent with the first of them that fit, subIdsOmitted true (each run's query.delegations lists its
// own), held and capacity as they are; a pool that fits is sent as before.

// WireSlots is query.slots' answer: the pool, its holders cut to what fits in a frame. crewctl decodes query.slots
// into it.
type WireSlots struct {
	projections.Slots
	// SubIDsOmitted says subIds lists only the first holders: all of them would not fit in a frame.
	SubIDsOmitted bool `json:"subIdsOmitted,omitempty"`
}

// fitSlots is s as query.slots answers it to cl: whole when it fits in the frame, else with the first holders that
// fit. NB: a pool that fits is answered as the bytes that measured it (compactResult), not encoded again.
func fitSlots(cl *call, s projections.Slots) any {
	room := wire.ResultRoom(cl.id, cl.c.s.opts.MaxFrame)
	out := WireSlots{Slots: s}
	b, err := json.Marshal(out)
	if err != nil {
		return out
	}
	if len(b) <= room {
		return compactResult(b)
	}
	holders := s.SubIDs
	out.SubIDs, out.SubIDsOmitted = []string{}, true
	b, _ = json.Marshal(out)
	size := len(b)
	for _, id := range holders {
		if size += jsonLen(id) + 1; size > room { // NB: its comma counted, one more than the first needs
			break
		}
		out.SubIDs = append(out.SubIDs, id)
	}
	return out
}
