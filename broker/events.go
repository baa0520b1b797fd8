package broker

import (
	"encoding/json"
	"fmt"
)

// Paging bounds of events.since (D§7.5).
const (
	maxSinceLimit = 1000
	// frameSlack is room left in a frame for the response envelope around a page of events or messages.
	frameSlack = 1024
)

type sinceResult struct {
	Events  []json.RawMessage `json:"events"`
	NextSeq uint64            `json:"nextSeq"`
	HasMore bool              `json:"hasMore"`
}

// handleEventsSince pages through the run's stream: {sinceSeq? (default 0; negative counts as 0), limit? 1..1000 (default 1000)} →
// {events, nextSeq, hasMore}, the events after sinceSeq in seq order. nextSeq is the seq of the last event returned
// (sinceSeq when none), so passing it back as sinceSeq continues without a repeat or a gap (GS-18). A page also
// stops short of the limit when one more event would not fit in the rest of the frame (hasMore tells): that event
// opens the next page. Only an event too large for a page of its own is sent omitted (its data left out).
func handleEventsSince(cl *call) (any, error) {
	p := readParams(cl)
	since := p.sinceSeq()
	limit := int(p.int("limit", 1, maxSinceLimit, maxSinceLimit))
	runID := p.run(cl)
	if p.err != nil {
		return nil, p.err
	}
	s := cl.c.s
	res := sinceResult{Events: []json.RawMessage{}, NextSeq: since}
	empty := pageBudget(cl)
	budget := empty // what is left of this page
	it := s.log.ReadStream(runID, since+1)
	defer it.Close()
	for it.Next() {
		if len(res.Events) == limit {
			res.HasMore = true
			break
		}
		te, err := renderEvent(it.Event(), cl.c.id)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errReplay, err)
		}
		b, err := json.Marshal(te)
		if err == nil && len(b)+1 > empty {
			b, err = json.Marshal(te.omitData())
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errReplay, err)
		}
		if len(b)+1 > budget {
			if len(res.Events) == 0 {
				return nil, fmt.Errorf("%w: events.since", errTooLarge)
			}
			res.HasMore = true
			break
		}
		budget -= len(b) + 1
		res.Events = append(res.Events, b)
		res.NextSeq = te.Metadata.Seq
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("%w: %w", errReplay, err)
	}
	cl.c.charge(len(res.Events)) // a page of events costs its events: the reader waits for them before the next request
	return res, nil
}
