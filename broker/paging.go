package broker

import (
	"encoding/json"
	"fmt"
)

// Paging bounds of crewlog's paged queries (query.tasks, query.delegations, query.ledger, query.mailbox), as
// query.runs: limit 1..1000, default 100.
const (
	defaultQueryLimit = 100
	maxQueryLimit     = 1000
)

// page is one page read from a projection: its items, the cursor of the first item left out ("" on the last
// page) and the count of all items.
type page[T any] struct {
	items []T
	next  string
	total int
}

// fitPage reads a page of at most limit items and renders each for the wire. When the rendered page would not fit
// in a response frame it reads again with the limit that fits, so the projection computes the cursor (pointing at
// the first item left out) and no item is ever skipped. A single item too large for a frame is oversize-frame.
func fitPage[T, W any](cl *call, limit int, read func(limit int) (page[T], error), render func(T) W) (page[W], error) {
	budget := pageBudget(cl)
	for {
		p, err := read(limit)
		if err != nil {
			return page[W]{}, err
		}
		out := page[W]{items: make([]W, 0, len(p.items)), next: p.next, total: p.total}
		size := 0
		for _, it := range p.items {
			w := render(it)
			b, _ := json.Marshal(w)
			if size+len(b)+1 > budget {
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

// pageBudget is the bytes a response page may take: the frame, less room for the envelope around it.
func pageBudget(cl *call) int { return cl.c.s.opts.MaxFrame - frameSlack - len(cl.id) }

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
