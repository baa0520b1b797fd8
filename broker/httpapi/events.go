package httpapi

import (
	"bytes"
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
	var (
		head, length uint64
		found        bool
	)
	s.opts.Engine.Read(func(st *projections.State) {
		head = st.Position
		var run projections.Run
		run, found = st.Run(runID)
		length = uint64(run.Usage.Events)
	})
	if !found {
		writeError(w, noRun(runID))
		return
	}
	if desc {
		s.eventsBackward(w, r, runID, cursor != "", after, length, head, limit, types)
		return
	}
	from, err := versionAfter(s.opts.Log, runID, after)
	if err != nil {
		writeError(w, s.internal(r, err))
		return
	}
	res := eventsResult{Events: []json.RawMessage{}}
	it := s.opts.Log.ReadStream(runID, from)
	defer it.Close()
	var last uint64
	for scanned := 0; it.Next(); scanned++ {
		rec := it.Event()
		if rec.Position > head {
			break // not published yet
		}
		if len(res.Events) == limit || scanned == maxEventScan {
			res.HasMore = true
			break
		}
		full, err := res.add(rec, types)
		if err != nil {
			writeError(w, s.internal(r, err))
			return
		}
		if full {
			res.HasMore = true
			break
		}
		last = rec.Position
	}
	if err := it.Close(); err != nil {
		writeError(w, s.internal(r, err))
		return
	}
	if res.HasMore {
		res.NextCursor = strconv.FormatUint(last, 10)
	}
	res.write(w)
}

// eventsBackward answers order=desc: the run's events before position `before` (all when !hasCursor), newest
// first. It reads the stream forward in chunks that end where the previous one began.
func (s *Server) eventsBackward(w http.ResponseWriter, r *http.Request, runID string, hasCursor bool, before,
	length, head uint64, limit int, types map[string]bool) {
	end := length // the last version to look at
	if hasCursor {
		v, err := versionAfter(s.opts.Log, runID, before-min(before, 1))
		if err != nil {
			writeError(w, s.internal(r, err))
			return
		}
		end = min(end, v-1)
	}
	res := eventsResult{Events: []json.RawMessage{}}
	scanned := 0
	var last uint64 // the oldest position looked at
	chunk := uint64(max(limit, 256))
	for end >= 1 && !res.HasMore {
		from := end - min(end-1, chunk-1)
		var recs []eventlog.Event
		it := s.opts.Log.ReadStream(runID, from)
		for it.Next() {
			rec := it.Event()
			if rec.StreamVersion > end {
				break
			}
			if rec.Position > head {
				continue // not published yet
			}
			c := *rec
			if types != nil && !types[c.Type] {
				c.Payload = nil // NB: only its position and type are needed
			} else {
				c.Payload = bytes.Clone(c.Payload) // the iterator reuses its buffer
			}
			recs = append(recs, c)
		}
		if err := it.Close(); err != nil {
			writeError(w, s.internal(r, err))
			return
		}
		for i := len(recs) - 1; i >= 0; i-- {
			if len(res.Events) == limit || scanned == maxEventScan {
				res.HasMore = true
				break
			}
			rec := &recs[i]
			full, err := res.add(rec, types)
			if err != nil {
				writeError(w, s.internal(r, err))
				return
			}
			if full {
				res.HasMore = true
				break
			}
			scanned++
			last = rec.Position
		}
		end = from - 1
	}
	if res.HasMore {
		res.NextCursor = strconv.FormatUint(last, 10)
	}
	res.write(w)
}

// write answers res, its events copied as they are (answer.go).
func (res *eventsResult) write(w http.ResponseWriter) {
	writeCursorPage(w, "events", res.Events, res.HasMore, res.NextCursor)
}

// add appends rec to the page when the type filter keeps it; full means the page has no room for it (maxPageBytes)
// and rec was left out: the page ends before it.
func (res *eventsResult) add(rec *eventlog.Event, types map[string]bool) (full bool, err error) {
	if types != nil && !types[rec.Type] {
		return false, nil
	}
	b, err := eventJSON(rec)
	if err != nil {
		return false, err
	}
	if len(res.Events) > 0 && res.bytes+len(b) > maxPageBytes {
		return true, nil
	}
	res.Events = append(res.Events, b)
	res.bytes += len(b) + 1
	return false, nil
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
