package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/projections"
)

// maxSearchScan bounds the runs one page looks at, through a status filter (projections.RunFilter.MaxScan) and a
// search (q) alike, as query.runs' pages: a page whose filters match little answers fewer than limit runs, or none,
// with hasMore, rather than scanning the whole store in one request.
const maxSearchScan = broker.MaxRunsScan

// searchChunk is how many runs one read of a search takes: the writer never waits for more than one chunk.
const searchChunk = 500

// indexUnit is the bytes of cold runs' summaries a page read from the index on disk (projections.RunPage.IndexRead)
// for each unit it is charged beyond its read's own, as a search is charged its searchUnit: a page whose status takes
// in the ended runs reads up to maxSearchScan summaries, each holding its run's goal (up to 256K characters).
//
// NB: by the bytes read, not by the summaries decoded that the store had not cached: the index is read whether or not
// a summary is cached (the cache skips only its decode), and the cache is every reader's, so a page's cost would
// depend on what other credentials read before it, and a summary with a long goal would cost what a short one does.
const indexUnit = 4 << 10

// runItem is a run on the API: the socket's query.run shape plus the count of its delegations in flight.
type runItem struct {
	projections.Run
	Usage             runUsage `json:"usage"`
	ActiveDelegations int      `json:"activeDelegations"`
}

type runUsage struct {
	Events    int64 `json:"events"`
	MsgBytes  int64 `json:"msgBytes"`
	TextBytes int64 `json:"textBytes"`
	SlotsHeld int   `json:"slotsHeld"`
}

func itemOf(st *projections.State, r projections.Run) runItem {
	held := st.SlotsHeldBy(r.RunID)
	return runItem{Run: r, Usage: runUsage{Events: r.Usage.Events, MsgBytes: r.Usage.MsgBytes,
		TextBytes: r.Usage.TextBytes, SlotsHeld: held},
		ActiveDelegations: held}
}

// runsResult is a page of runs, each a runItem encoded once (encodeFitting): {"runs": […], "hasMore",
// "nextCursor"?} (write).
type runsResult struct {
	Runs       []json.RawMessage
	HasMore    bool
	NextCursor string
}

// write answers res, its runs copied as they are (answer.go).
func (res *runsResult) write(w http.ResponseWriter) {
	writeCursorPage(w, "runs", res.Runs, res.HasMore, res.NextCursor)
}

// runStatuses are the values status may take.
var runStatuses = []projections.RunStatus{projections.RunQueued, projections.RunPlanning, projections.RunRunning,
	projections.RunBlocked, projections.RunCompleted, projections.RunFailed, projections.RunCancelled}

// GET /api/v1/runs?status=…&newest=true&q=…&limit=&cursor=
func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request, _ principal) {
	p := newParams(r.URL)
	var statuses []projections.RunStatus
	for _, v := range p.strs("status", len(runStatuses), 32) {
		st := projections.RunStatus(v)
		if !containsStatus(runStatuses, st) {
			p.fail(badParams("status %q is not a run status", v))
		}
		statuses = append(statuses, st)
	}
	newest := p.bool("newest")
	q := p.str("q", maxIDLen)
	limit, cursor := p.page()
	if e := p.strict(); e != nil {
		writeError(w, e)
		return
	}
	var search *runSearch
	if q != "" {
		search = newRunSearch(q)
		// NB: charged what it searched however the page ends: its runs' fields were gone through.
		defer func() { chargeRead(r.Context(), search.units()) }()
	}
	// indexRead is the bytes of summaries every read of the page read from the index, a read again included:
	// charged however the page ends, as its search is.
	indexRead := 0
	defer func() { chargeRead(r.Context(), int64(indexRead/indexUnit)) }()
	// chunk reads up to want runs from cursor: the page, the runs that match, up to the first past room, and the
	// index in the page of each.
	chunk := func(want, scan, room int) (page projections.RunPage, items []runItem, at []int, err error) {
		var read []runItem
		s.opts.Engine.Read(func(st *projections.State) {
			page, err = st.Runs(projections.RunFilter{Statuses: statuses, Limit: want, Newest: newest, Cursor: cursor,
				MaxScan: scan})
			indexRead += page.IndexRead
			read = make([]runItem, len(page.Runs))
			for i, run := range page.Runs {
				read[i] = itemOf(st, run)
			}
		})
		if err != nil {
			return page, nil, nil, err
		}
		// NB: matched after the read, which only copies the runs: a search goes through the fields of up to
		// searchChunk runs (a goal may be 256K characters), and the engine publishes its next group, and answers
		// its commands, only once every read in progress has ended.
		if search != nil && s.searching != nil {
			s.searching()
		}
		for i, it := range read {
			if search == nil || search.matches(it.Run) {
				items, at = append(items, it), append(at, i)
			}
			if len(items) > room {
				// NB: the page is read again up to this match, which it leaves out: the runs after it, of a chunk
				// read whatever the limit, would be searched (and charged) for nothing. The runs read again are
				// known by then (runSearch.known): not searched, nor charged, twice.
				break
			}
		}
		return page, items, at, nil
	}
	res := runsResult{Runs: []json.RawMessage{}}
	scanned, size := 0, 0
	for {
		room, scan := limit-len(res.Runs), maxSearchScan-scanned
		want := room
		if search != nil {
			// NB: a chunk a read whatever the limit: each read takes the state's read lock and opens the index of
			// cold runs, and a search of limit=1 that matched little read the state once for every run it looked at.
			want, scan = searchChunk, min(scan, searchChunk)
			search.forget()
		}
		page, items, at, err := chunk(want, scan, room)
		// A search that matched more runs than the page has room for reads again up to the first it leaves out, so
		// the projection names that run in the cursor; each read takes fewer runs than the one before, so it ends.
		for err == nil && len(items) > room {
			page, items, at, err = chunk(at[room], scan, room)
		}
		// A page's bytes are bounded too (a goal may be 256K characters): the page ends before the run that
		// would take it past maxPageBytes, read again up to that run so the projection names it in the cursor.
		raw, used, full, encErr := encodeFitting(items, size)
		size = used
		if full {
			n := len(raw)
			if at[n] > 0 {
				page, items, _, err = chunk(at[n], scan, room)
				// NB: read again, so encoded again: the runs before the one left out may have changed meanwhile.
				raw, encErr = encodeAll(items)
			} else {
				page, raw = projections.RunPage{NextCursor: cursor}, nil // cursor names that run
			}
		}
		if errors.Is(err, projections.ErrBadCursor) {
			writeError(w, badCursor(cursor))
			return
		}
		if err != nil {
			writeError(w, s.internal(r, err))
			return
		}
		if encErr != nil {
			writeUnencodable(w)
			return
		}
		res.Runs = append(res.Runs, raw...)
		scanned += page.Scanned
		cursor = page.NextCursor
		if full || cursor == "" || len(res.Runs) == limit || scanned >= maxSearchScan {
			break
		}
	}
	res.NextCursor, res.HasMore = cursor, cursor != ""
	res.write(w)
}

func containsStatus(all []projections.RunStatus, st projections.RunStatus) bool {
	for _, s := range all {
		if s == st {
			return true
		}
	}
	return false
}

type runResult struct {
	runItem
	Position uint64 `json:"position"`
}

// GET /api/v1/runs/{runId}: from the run's summary, so a cold run is not read back.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request, _ principal) {
	runID, e := runIDParam(r)
	if e == nil {
		e = newParams(r.URL).strict()
	}
	if e != nil {
		writeError(w, e)
		return
	}
	var (
		res runResult
		ok  bool
		err error
	)
	s.opts.Engine.Read(func(st *projections.State) {
		var run projections.Run
		if run, ok, err = st.LookupRun(runID); ok {
			res = runResult{runItem: itemOf(st, run), Position: st.Position}
		}
	})
	if e := runAnswer(runID, ok, err); e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, res)
}

// runParam is the path's run id. A run that ended long ago is cold (commands/tier.go): it is read back from the
// log here, outside the state's lock, rather than inside the query (which would hold the writer while it reads).
func (s *Server) runParam(r *http.Request) (string, *apiError) {
	id, e := runIDParam(r)
	if e == nil {
		n, err := s.opts.Engine.Warm(id)
		chargeRead(r.Context(), n)
		if err != nil {
			e = notReadBack()
		}
	}
	if e == nil && s.warmed != nil {
		s.warmed()
	}
	return id, e
}

// runIDParam is runParam without reading a cold run back: for a route that answers from the run's summary, or from
// the log (the events of a run).
func runIDParam(r *http.Request) (string, *apiError) {
	id := r.PathValue("runId")
	if id == "" || len(id) > maxIDLen {
		return "", badParams("runId must be 1..%d bytes", maxIDLen)
	}
	return id, nil
}

func noRun(runID string) *apiError { return notFound("no run %q", runID) }

// runFound is nil when st knows run runID, else the answer: a 404 for no such run, a 500 for a cold run whose
// summary the log cannot give back (notReadBack).
func runFound(st *projections.State, runID string) *apiError {
	_, ok, err := st.LookupRunStatus(runID)
	return runAnswer(runID, ok, err)
}

// runAnswer is the answer for run runID as a lookup found it (ok, err): nil when found, else a 404 for no such run or
// a 500 for a cold run the log cannot give back.
func runAnswer(runID string, ok bool, err error) *apiError {
	switch {
	case err != nil:
		return notReadBack()
	case !ok:
		return noRun(runID)
	}
	return nil
}

// notReadBack answers for a cold run the log could not give back (projections.ErrNotReadBack: a read or a table
// that failed), which the engine logged with the run's id: a 500, never the run as if it held nothing, nor a 404.
func notReadBack() *apiError {
	return errorf(http.StatusInternalServerError, codeInternal, "internal error; the daemon's log says more")
}

// internal logs err in full and answers a generic 500.
func (s *Server) internal(r *http.Request, err error) *apiError {
	s.opts.Logger.Error("httpapi: request failed", "path", r.URL.Path, "err", err)
	return errorf(http.StatusInternalServerError, codeInternal, "internal error; the daemon's log says more")
}
