package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// Bounds of the events route.
const (
	// maxEventScan bounds the events one page looks at when a type filter matches little: the page then ends
	// early with hasMore, and nextCursor continues after the last event looked at.
	maxEventScan = 20000
)

// eventsResult is a page of events: {"events": […], "hasMore", "nextCursor"?} (write).
type eventsResult struct {
	Events     []json.RawMessage
	HasMore    bool
	NextCursor string
	bytes      int // of Events: at most maxPageBytes, or one event
	looked     int // events looked at for the page, kept or not: at most maxEventScan
	// read is the events the page read of the log, what it costs a paced read (pacing.go): those it looked at, the
	// one after its last read to learn that there is more, and, newest first, the rest of the chunks it read.
	read int
}

// GET /api/v1/runs/{runId}/events?cursor=POSITION&type=…&limit=&order=asc|desc
//
// The page is read from the log alone (as events.since's): a cold run is not read back for it (runIDParam).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, _ principal) {
	runID, e := runIDParam(r)
	p := newParams(r.URL)
	limit := int(p.uint("limit", 1, maxLimit, defaultLimit))
	cursor := p.str("cursor", maxCursorLen)
	types := typeSet(p.strs("type", broker.MaxTypeFilter, broker.MaxTypeLen))
	desc := false
	switch o := p.str("order", 4); o {
	case "", "asc":
	case "desc":
		desc = true
	default:
		p.fail(badParams("order must be asc or desc, got %q", o))
	}
	if e == nil {
		e = p.strict()
	}
	var after uint64
	if e == nil && cursor != "" {
		n, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil {
			e = badCursor(cursor)
		}
		after = n
	}
	if e != nil {
		writeError(w, e)
		return
	}
	var head uint64
	s.opts.Engine.Read(func(st *projections.State) {
		head = st.Position
		e = runFound(st, runID)
	})
	if e != nil {
		writeError(w, e)
		return
	}
	var res eventsResult
	var err error
	if desc {
		res, err = s.eventsBackward(runID, cursor != "", after, head, limit, types)
	} else {
		res, err = s.eventsForward(runID, after, head, limit, types)
	}
	chargeRead(r.Context(), int64(res.read)) // NB: a filter that keeps little of a long run reads as much
	if err != nil {
		writeError(w, s.internal(r, err))
		return
	}
	res.write(w)
}

// eventsForward is the page of order=asc: the run's events after position after, oldest first.
func (s *Server) eventsForward(runID string, after, head uint64, limit int, types map[string]bool) (eventsResult, error) {
	res := eventsResult{Events: []json.RawMessage{}}
	from, err := versionAfter(s.opts.Log, runID, after)
	if err != nil {
		return res, err
	}
	it := s.opts.Log.ReadStream(runID, from)
	defer it.Close()
	var last uint64
	for ; it.Next(); res.looked++ {
		res.read++ // NB: the event after the page's last too: it was read, to learn that there is more
		rec := it.Event()
		if rec.Position > head {
			break // not published yet
		}
		if res.ends(limit) {
			break
		}
		if err := res.add(rec, types); err != nil {
			return res, err
		}
		if res.HasMore {
			break
		}
		last = rec.Position
	}
	if err := it.Close(); err != nil {
		return res, err
	}
	return res.cursorAfter(last), nil
}

// eventsBackward is the page of order=desc: the run's events before position `before` (all up to head when
// !hasCursor), newest first. It reads the stream forward in chunks that end where the previous one began.
//
// NB: the newest version is looked up in the stream, not taken from the run's count of events (Usage.Events): an
// imported run's foreign.imported events are in its stream but counted by no projection, and starting from the
// count left the newest of its events out of every page.
//
// A chunk is scanned without a copy of its records (ReadStreamTransient), keeping of each event only its position
// and whether the type filter keeps it; only the events that go in the page are then read whole (Log.Event), newest
// first, until the page is full. So a page reads the bytes it holds (and the one event that did not fit), not the
// chunk's: max(limit, 256) events of 200 KiB messages are 50 MiB.
func (s *Server) eventsBackward(runID string, hasCursor bool, before, head uint64, limit int,
	types map[string]bool) (eventsResult, error) {
	res := eventsResult{Events: []json.RawMessage{}}
	if !hasCursor || before > head {
		before = head + 1
	}
	v, err := versionAfter(s.opts.Log, runID, before-min(before, 1))
	if err != nil {
		return res, err
	}
	end := v - 1    // the last version to look at
	var last uint64 // the oldest position looked at
	chunk := uint64(max(limit, 256))
	type looked struct {
		pos  uint64
		kept bool // by the type filter
	}
	var recs []looked
	for end >= 1 && !res.HasMore {
		from := end - min(end-1, chunk-1)
		recs = recs[:0]
		it := s.opts.Log.ReadStreamTransient(runID, from)
		for it.Next() {
			// NB: every event of the chunk is read, however few of them the page then looks at: a page of one
			// event reads 256.
			res.read++
			rec := it.Event() // NB: valid until Next: only its position and the filter's verdict are kept
			// NB: versions grow with positions, so every version up to end is at or below head: published.
			if rec.StreamVersion > end {
				break
			}
			recs = append(recs, looked{pos: rec.Position, kept: types == nil || types[rec.Type]})
		}
		if err := it.Close(); err != nil {
			return res, err
		}
		for i := len(recs) - 1; i >= 0 && !res.ends(limit); i-- {
			if recs[i].kept {
				rec, err := s.opts.Log.Event(recs[i].pos)
				if err == nil {
					err = res.add(&rec, nil)
				}
				if err != nil || res.HasMore {
					return res.cursorAfter(last), err
				}
			}
			res.looked++
			last = recs[i].pos
		}
		end = from - 1
	}
	return res.cursorAfter(last), nil
}

// ends reports whether the page ends before the next event: it holds limit events, or it looked at maxEventScan
// (HasMore, then).
func (res *eventsResult) ends(limit int) bool {
	if len(res.Events) == limit || res.looked == maxEventScan {
		res.HasMore = true
	}
	return res.HasMore
}

// cursorAfter is res with its nextCursor, last (the last event looked at), when it has more.
func (res *eventsResult) cursorAfter(last uint64) eventsResult {
	if res.HasMore {
		res.NextCursor = strconv.FormatUint(last, 10)
	}
	return *res
}

// write answers res, its events copied as they are (answer.go).
func (res *eventsResult) write(w http.ResponseWriter) {
	writeCursorPage(w, "events", res.Events, res.HasMore, res.NextCursor)
}

// add appends rec to the page when the type filter keeps it; when the page has no room for it (maxPageBytes), rec
// is left out and the page ends before it (HasMore).
func (res *eventsResult) add(rec *eventlog.Event, types map[string]bool) error {
	if types != nil && !types[rec.Type] {
		return nil
	}
	b, err := eventJSON(rec)
	if err != nil {
		return err
	}
	if len(res.Events) > 0 && res.bytes+len(b) > maxPageBytes {
		res.HasMore = true
		return nil
	}
	res.Events = append(res.Events, b)
	res.bytes += len(b) + 1
	return nil
}

func typeSet(types []string) map[string]bool {
	if len(types) == 0 {
		return nil
	}
	m := make(map[string]bool, len(types))
	for _, t := range types {
		m[t] = true
	}
	return m
}

// eventJSON is the socket's team.event data for rec plus "meaning", the line crewctl replay prints for it.
func eventJSON(rec *eventlog.Event) (json.RawMessage, error) {
	ev, err := projections.FromLog(rec)
	if err != nil {
		return nil, err
	}
	b, err := broker.AdminEventJSON(rec, ev)
	if err != nil {
		return nil, err
	}
	meaning, _ := json.Marshal(audit.Describe(ev))
	// NB: b is a JSON object: splice the field in before its closing brace.
	out := make([]byte, 0, len(b)+len(meaning)+12)
	out = append(out, b[:len(b)-1]...)
	out = append(out, `,"meaning":`...)
	out = append(out, meaning...)
	return append(out, '}'), nil
}

// versionAfter is the first version of stream whose position is after pos (1 when pos is 0). Versions and
// positions grow together, so an exponential then binary search over versions finds it in O(log n) reads.
func versionAfter(l *eventlog.Log, stream string, pos uint64) (uint64, error) {
	if pos == 0 {
		return 1, nil
	}
	// posOf is the position of version v, or ok false past the end.
	posOf := func(v uint64) (uint64, bool, error) {
		it := l.ReadStream(stream, v)
		defer it.Close()
		if !it.Next() {
			return 0, false, it.Close()
		}
		return it.Event().Position, true, nil
	}
	lo, hi := uint64(1), uint64(1) // the answer is in [lo, hi]
	for {
		p, ok, err := posOf(hi)
		if err != nil {
			return 0, err
		}
		if !ok || p > pos {
			break
		}
		lo, hi = hi+1, hi*2
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		p, ok, err := posOf(mid)
		if err != nil {
			return 0, err
		}
		if !ok || p > pos {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
