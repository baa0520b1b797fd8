package broker

import (
	"encoding/json"
	"fmt"

	"github.com/crewlog/crewlog/broker/wire"
)

// Paging bounds of crewlog's paged queries (query.tasks, query.delegations, query.ledger, query.mailbox), as
// query.runs: limit 1..1000, default 100.
const (
	defaultQueryLimit = 100
	maxQueryLimit     = 1000
)

// page is one page read from a projection: its items, the cursor of the first item left out ("" on the last
// page), the count of all items, and the bytes its answer holds besides the items, the envelope pageEnvelope
// counts and the cursor: 0 for an answer that is the page alone, the job's own fields for query.job's.
type page[T any] struct {
	items  []T
	next   string
	total  int
	around int
}

// fitPage reads a page of at most limit items and renders each for the wire. When the rendered page, with its
// next cursor and what its answer holds around it, would not fit in a response frame it reads again with the
// limit that fits, so the projection computes the cursor (pointing at the first item left out) and no item is
// ever skipped. A single item too large for a frame, with its cursor and what its answer holds around it, is
// oversize-frame.
func fitPage[T, W any](cl *call, limit int, read func(limit int) (page[T], error),
	render func(T) W) (page[W], error) {
	return fitPageOmitting(cl, limit, read, render, omission[W]{})
}

// omission is how a page sends an item too large for a page of its own (texts_omitted.go): without what omit leaves
// out, when it takes more than room bytes (its comma counted) as it is. The zero value leaves nothing out.
type omission[W any] struct {
	room int
	omit func(*W)
}

// fitPageOmitting is fitPage, each item that takes more than om.room bytes sent as om.omit leaves it.
func fitPageOmitting[T, W any](cl *call, limit int, read func(limit int) (page[T], error), render func(T) W,
	om omission[W]) (page[W], error) {
	budget := pageBudget(cl)
	for {
		p, err := read(limit)
		if err != nil {
			return page[W]{}, err
		}
		// NB: the cursor is counted as this read gives it; a read cut shorter gives another (import.checkpoints'
		// is the path of the page's last item), which the next turn counts in its place.
		room := budget - p.around - cursorBytes(p.next)
		out := page[W]{items: make([]W, 0, len(p.items)), next: p.next, total: p.total}
		size := 0
		for _, it := range p.items {
			w := render(it)
			b, _ := json.Marshal(w)
			if om.omit != nil && len(b)+1 > om.room {
				om.omit(&w)
				b, _ = json.Marshal(w)
			}
			if size+len(b)+1 > room {
				break
			}
			size += len(b) + 1
			out.items = append(out.items, w)
		}
		if len(out.items) == len(p.items) {
			return out, nil
		}
		if len(out.items) == 0 {
			return page[W]{}, fmt.Errorf("%w: %s", errTooLarge, cl.method)
		}
		limit = len(out.items)
	}
}

// pageEnvelope is the bytes a page's answer takes besides its items (each counted with one more, its comma), the
// request's id and the next cursor's value: the frame's {"id":,"result":} and newline, and the keys, counts and
// flags of the result around the items, the longest {"delegations":[],"nextCursor":,"hasMore":false,
// "total":-9223372036854775808} (TestPageEnvelopeHoldsEveryPagedAnswer measures each).
const pageEnvelope = 128

// pageBudget is the bytes a response page may take: the frame, less its envelope and the request's id.
func pageBudget(cl *call) int { return frameBudget(cl.c.s.opts.MaxFrame, cl.id) }

// frameBudget is the bytes the items of a page answering request id may take in a frame of maxFrame bytes: the
// room the answer's writer leaves a result beside the id as it writes it (wire.ResultRoom; HTML's <, > and & as
// sent), less what pageEnvelope counts of the result around the items.
func frameBudget(maxFrame int, id string) int {
	return wire.ResultRoom(id, maxFrame) - (pageEnvelope - len(`{"id":,"result":}`+"\n"))
}

// cursorBytes is the bytes next takes as nextCursor's value (none on the last page, where it is absent).
func cursorBytes(next string) int {
	if next == "" {
		return 0
	}
	return jsonLen(next)
}

func jsonLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// pageParams reads {limit?, cursor?} of a paged query.
func pageParams(p *params) (limit int, cursor string) {
	return int(p.int("limit", 1, maxQueryLimit, defaultQueryLimit)), p.str("cursor", false, 64)
}

// pagedResult is a page on the wire: the items under key, nextCursor (absent on the last page), hasMore and total
// (all of the run's items), the shape of query.mailbox.
func pagedResult[T any](key string, p page[T]) map[string]any {
	res := map[string]any{key: nonNil(p.items), "hasMore": p.next != "", "total": p.total}
	if p.next != "" {
		res["nextCursor"] = p.next
	}
	return res
}

func same[T any](v T) T { return v }
