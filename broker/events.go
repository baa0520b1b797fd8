package broker

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// maxSinceLimit bounds a page of events.since (D§7.5).
const maxSinceLimit = 1000

// handleEventsSince pages through the run's stream: {sinceSeq? (default 0; negative counts as 0), limit? (default
// 1000; clamped to 1..1000)} → {events, nextSeq, hasMore}, the events after sinceSeq in seq order. nextSeq is the seq
// of the last event returned (sinceSeq when none), so passing it back as sinceSeq continues without a repeat or a gap
// (GS-18). A page also stops short of the limit when one more event would not fit in the rest of the frame (hasMore
// tells): that event opens the next page. Only an event too large for a page of its own is sent omitted (its data
// left out), or bare when even that would not fit (fitEvent).
//
// The page is read from the log alone, so a cold run is not read back for it (runSummary, not run: its records
// would be decoded and thrown away), and it is answered as the bytes json.Marshal would give for
// {events, nextSeq, hasMore}, each event rendered once rather than compacted again by an encoder of the page.
func handleEventsSince(cl *call) (any, error) {
	p := readParams(cl)
	since := p.sinceSeq()
	limit := int(p.clampedInt("limit", 1, maxSinceLimit, maxSinceLimit))
	runID := p.runSummary(cl)
	if p.err != nil {
		return nil, p.err
	}
	// NB: the page stops at the published position at which the credential still held (cl.read): the log may
	// already hold the event that ended it, and what came after.
	var head uint64
	if err := cl.read(func(st *projections.State) { head = st.Position }); err != nil {
		return nil, err
	}
	viewer := cl.c.viewer()
	page, err := readSince(cl.c.s.log, runID, since, head, limit, pageBudget(cl),
		func(r *eventlog.Event) (teamEvent, error) {
			return renderEvent(r, viewer)
		})
	// A page costs the events it read, the one past it included, answered or not: the reader waits for them before
	// the next request.
	cl.c.charge(page.read)
	if err != nil {
		return nil, err
	}
	return page.result(), nil
}

// sincePage is a page of events.since: each event as json.Marshal renders it (compact, HTML escaped).
type sincePage struct {
	events  []json.RawMessage
	bytes   int // of the events
	nextSeq uint64
	hasMore bool
	// read counts the events read of the log: those of the page, and the one after it, which it reads to learn
	// that there is more (hasMore), or renders and finds too large for the rest of the page, or finds unpublished.
	read int
}

// readSince reads the page of at most limit events of runID's stream after version since, up to log position head
// (the published state's: the log may hold events the state has not published yet), that fits in budget bytes, each
// rendered by render. With an error, the page holds only what it read (read), to be charged.
func readSince(l *eventlog.Log, runID string, since, head uint64, limit, budget int,
	render func(*eventlog.Event) (teamEvent, error)) (sincePage, error) {
	page := sincePage{events: []json.RawMessage{}, nextSeq: since}
	empty := budget // a page's budget; budget is what is left of it
	failed := func(err error) (sincePage, error) { return sincePage{read: page.read}, err }
	it := l.ReadStream(runID, since+1)
	defer it.Close()
	for it.Next() {
		page.read++
		if it.Event().Position > head {
			break // not published yet: the next page has it
		}
		if len(page.events) == limit {
			page.hasMore = true
			break
		}
		te, err := render(it.Event())
		if err != nil {
			return failed(fmt.Errorf("%w: %w", errReplay, err))
		}
		b, err := fitEvent(te, empty)
		if err != nil {
			return failed(fmt.Errorf("%w: %w", errReplay, err))
		}
		if len(b)+1 > budget {
			if len(page.events) == 0 {
				return failed(fmt.Errorf("%w: events.since: event %d", errTooLarge, te.Metadata.Seq))
			}
			page.hasMore = true
			break
		}
		budget -= len(b) + 1
		page.events = append(page.events, b)
		page.bytes += len(b)
		page.nextSeq = te.Metadata.Seq
	}
	if err := it.Close(); err != nil {
		return failed(fmt.Errorf("%w: %w", errReplay, err))
	}
	return page, nil
}

// compactResult is a handler's result written as compact, valid JSON (json.Marshal's output, joined by JSON
// punctuation): its frame takes it as it is (wire.CompactResponse) rather than compacting it again.
type compactResult []byte

// result is the page as the bytes json.Marshal gives {events, nextSeq, hasMore} (in that order), written without
// its encoder, which would compact every event again.
func (p sincePage) result() compactResult {
	out := make([]byte, 0, p.bytes+len(p.events)+len(`{"events":[],"nextSeq":18446744073709551615,"hasMore":false}`))
	out = append(out, `{"events":[`...)
	for i, e := range p.events {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	out = append(out, `],"nextSeq":`...)
	out = strconv.AppendUint(out, p.nextSeq, 10)
	out = append(out, `,"hasMore":`...)
	out = strconv.AppendBool(out, p.hasMore)
	return append(out, '}')
}
