package httpapi

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// A run's lists read the same projection queries as the socket's query.* methods, through Engine.Read, and copy
// only the page inside the read (the writer waits at most for that), rendering outside it. The projection pages
// each list in place, so a read costs the page, not the run: a run may hold a million events.

// listPage is what a list read found: the items, the cursor of the first one left out ("" on the last page) and
// the count of all.
type listPage struct {
	items any
	next  string
	total int
}

// write answers the page, its items encoded as items: {key: […], "hasMore", "nextCursor"?, "total"}, the fields
// in the order of their names, as json.Marshal writes a map's.
func (pg listPage) write(w http.ResponseWriter, key string, items []json.RawMessage) {
	names := []string{key, "hasMore", "total"}
	if pg.next != "" {
		names = append(names, "nextCursor")
	}
	slices.Sort(names)
	o := newObject()
	for _, n := range names {
		switch n {
		case key:
			o.list(n, items)
		case "hasMore":
			o.value(n, pg.next != "")
		case "total":
			o.value(n, pg.total)
		case "nextCursor":
			o.value(n, pg.next)
		}
	}
	o.write(w)
}

// pageReq is the page a list is asked for: at most limit items from cursor.
type pageReq struct {
	limit  int
	cursor string
}

// runList parses the run id, limit and cursor and the route's other params (read, nil when none), then answers
// {key: items, hasMore, nextCursor?, total} from list, run inside Engine.Read. An unknown run is 404, a cursor the
// projection refuses is 400 bad-cursor. A page whose items' JSON would pass maxPageBytes is read again with the
// limit that fits, so the list computes the cursor of the first item left out and none is ever skipped. The answer
// is written from the items' JSON measured for the page (encodeFitting): each item is encoded once.
func (s *Server) runList(w http.ResponseWriter, r *http.Request, key string, read func(p *params),
	list func(st *projections.State, runID string, req pageReq) (listPage, error)) {
	var req pageReq
	runID, e := s.runParam(r)
	if e == nil {
		p := newParams(r.URL)
		req.limit, req.cursor = p.page()
		if read != nil {
			read(p)
		}
		e = p.strict()
	}
	if e != nil {
		writeError(w, e)
		return
	}
	var (
		pg     listPage
		items  []json.RawMessage
		err    error
		encErr error
		found  bool
	)
	for {
		s.opts.Engine.Read(func(st *projections.State) {
			// NB: the run's summary is read again here, and its records may be read again (another run may have
			// taken its place in the cache since runParam): a read that fails now is no missing run (err).
			if _, found, err = st.LookupRun(runID); found {
				pg, err = list(st, runID, req)
			}
		})
		if !found || err != nil {
			break
		}
		var full bool
		if items, _, full, encErr = encodeFitting(pg.items, 0); !full || encErr != nil {
			break
		}
		req.limit = len(items)
	}
	var ae *apiError
	switch {
	case errors.Is(err, projections.ErrNotReadBack):
		writeError(w, notReadBack()) // logged by the engine, with the run's id
	case !found:
		writeError(w, noRun(runID))
	case errors.As(err, &ae):
		writeError(w, ae)
	case err != nil:
		writeError(w, s.internal(r, err))
	case encErr != nil:
		writeUnencodable(w)
	default:
		pg.write(w, key, items)
	}
}

// encodeFitting encodes items (a slice; nil is empty) one by one, as json.Marshal encodes them in the answer, while
// they fit in maxPageBytes of JSON after the used bytes of the page's items before them: the encodings of the items
// that fit (nil when items is nil: the answer shows null, as it did), the page's bytes with them (the item left
// out included) and whether one was left out. A page's first item (used 0) always fits. The answer copies these
// encodings as they are (answer.go), so an item is encoded once, with encoding/json's escaping (<, >, &, U+2028,
// U+2029, invalid UTF-8) as before.
func encodeFitting(items any, used int) (raw []json.RawMessage, size int, full bool, err error) {
	return encodeWithin(items, used, maxPageBytes)
}

// encodeAll encodes every item of items (a slice; nil is empty), as encodeFitting does, whatever their bytes.
func encodeAll(items any) ([]json.RawMessage, error) {
	raw, _, _, err := encodeWithin(items, 0, math.MaxInt)
	return raw, err
}

// encodeWithin is encodeFitting with limit bytes in place of maxPageBytes.
func encodeWithin(items any, used, limit int) (raw []json.RawMessage, size int, full bool, err error) {
	v := reflect.ValueOf(items)
	if items == nil || v.IsNil() {
		return nil, used, false, nil
	}
	size = used
	raw = make([]json.RawMessage, 0, v.Len())
	for i := range v.Len() {
		b, err := json.Marshal(v.Index(i).Interface())
		if err != nil {
			return nil, size, false, err
		}
		if size += len(b) + 1; size > limit && used+i > 0 {
			return raw, size, true, nil
		}
		raw = append(raw, b)
	}
	return raw, size, false, nil
}

// cursorErr maps the projection's bad cursor to 400.
func cursorErr(err error, cursor string) error {
	if errors.Is(err, projections.ErrBadCursor) {
		return badCursor(cursor)
	}
	return err
}

// taskItem is a task with its kind, which the socket's shape leaves out.
type taskItem struct {
	projections.Task
	Kind string `json:"kind"`
}

// projectionPage answers a run's list that the projection pages itself (tasks, delegations, ledger accounts):
// {key: [render(item)…], hasMore, nextCursor?, total}, limit and cursor from the query.
func projectionPage[T, W any](s *Server, w http.ResponseWriter, r *http.Request, key string,
	read func(st *projections.State, runID string, f projections.PageFilter) (projections.Page[T], error),
	render func(st *projections.State, it T) W) {
	s.runList(w, r, key, nil,
		func(st *projections.State, runID string, req pageReq) (listPage, error) {
			pg, err := read(st, runID, projections.PageFilter{Limit: req.limit, Cursor: req.cursor})
			if err != nil {
				return listPage{}, cursorErr(err, req.cursor)
			}
			items := make([]W, len(pg.Items))
			for i, it := range pg.Items {
				items[i] = render(st, it)
			}
			return listPage{items: items, next: pg.NextCursor, total: pg.Total}, nil
		})
}

// GET /api/v1/runs/{runId}/tasks?limit=&cursor=
func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request, _ principal) {
	projectionPage(s, w, r, "tasks", (*projections.State).TasksPage,
		func(_ *projections.State, t projections.Task) taskItem { return taskOf(t) })
}

func taskOf(t projections.Task) taskItem {
	kind := events.TaskKindWorkflow
	if t.Shadow() {
		kind = events.TaskKindShadow
	}
	return taskItem{Task: t, Kind: kind}
}

// delegationItem is a delegation and whether it holds a slot of the pool now.
type delegationItem struct {
	projections.Delegation
	HoldsSlot bool `json:"holdsSlot"`
}

// GET /api/v1/runs/{runId}/delegations?limit=&cursor=
func (s *Server) handleDelegations(w http.ResponseWriter, r *http.Request, _ principal) {
	projectionPage(s, w, r, "delegations", (*projections.State).DelegationsPage, delegationOf)
}

func delegationOf(st *projections.State, d projections.Delegation) delegationItem {
	// NB: the pool is keyed by subId, which a settled delegation may share with another run's in flight (an import
	// chooses its subIds): the slot is this delegation's only when its run holds it.
	holder, held := st.SlotHolder(d.SubID)
	return delegationItem{Delegation: d, HoldsSlot: held && holder == d.RunID}
}

// accountItem is a ledger account without its history, which GET …/ledger?taskId= pages.
type accountItem struct {
	RunID            string `json:"runId"`
	TaskID           string `json:"taskId"`
	TokensGranted    int64  `json:"tokensGranted"`
	TokensSpent      int64  `json:"tokensSpent"`
	Reserved         int64  `json:"reserved"`
	Charged          int64  `json:"charged"`
	Remaining        int64  `json:"remaining"`
	ReservationCount int    `json:"reservationCount"`
	ChargeCount      int    `json:"chargeCount"`
}

func accountOf(a projections.AccountInPage) accountItem {
	return accountItem{RunID: a.RunID, TaskID: a.TaskID, TokensGranted: a.TokensGranted, TokensSpent: a.TokensSpent,
		Reserved: a.Reserved, Charged: a.Charged, Remaining: a.TokensGranted - a.TokensSpent,
		ReservationCount: a.ReservationCount, ChargeCount: a.ChargeCount}
}

// GET /api/v1/runs/{runId}/ledger?limit=&cursor= | ?taskId=T&limit=&cursor=
func (s *Server) handleLedger(w http.ResponseWriter, r *http.Request, _ principal) {
	if r.URL.Query().Has("taskId") {
		s.accountHistory(w, r)
		return
	}
	// NB: the accounts are read without their histories, which the list counts but does not send: one account's may
	// hold most of its run (a task's every metered delegation), copied under the engine's read lock for every read.
	projectionPage(s, w, r, "accounts",
		func(st *projections.State, runID string, f projections.PageFilter) (projections.Page[projections.AccountInPage],
			error) {
			return st.LedgerPageWithin(runID, f, 0)
		},
		func(_ *projections.State, a projections.AccountInPage) accountItem { return accountOf(a) })
}

// accountHistory answers one account's reservations and charges, paged.
func (s *Server) accountHistory(w http.ResponseWriter, r *http.Request) {
	var (
		limit          int
		cursor, taskID string
	)
	runID, e := s.runParam(r)
	if e == nil {
		p := newParams(r.URL)
		limit, cursor = p.page()
		taskID = p.taskID("taskId")
		e = p.strict()
	}
	if e == nil && taskID == "" {
		e = badParams("taskId must not be empty")
	}
	if e != nil {
		writeError(w, e)
		return
	}
	var (
		h            projections.LedgerHistory
		found, hasAc bool
		err          error
	)
	s.opts.Engine.Read(func(st *projections.State) {
		if _, found, err = st.LookupRun(runID); found {
			h, hasAc, err = st.AccountHistory(runID, taskID, projections.PageFilter{Limit: limit, Cursor: cursor})
		}
	})
	switch {
	case errors.Is(err, projections.ErrNotReadBack):
		writeError(w, notReadBack()) // read again after runParam's read-back, and failed: logged by the engine
	case !found:
		writeError(w, noRun(runID))
	case err != nil && errors.Is(err, projections.ErrBadCursor):
		writeError(w, badCursor(cursor))
	case err != nil:
		writeError(w, s.internal(r, err))
	case !hasAc:
		writeError(w, notFound("task %q of run %q has no ledger account", taskID, runID))
	default:
		writeJSON(w, broker.LedgerHistory(taskID, h))
	}
}

// GET /api/v1/runs/{runId}/mailbox?taskId=&pending=&limit=&cursor=
func (s *Server) handleMailbox(w http.ResponseWriter, r *http.Request, _ principal) {
	var (
		f   projections.MailboxFilter
		box string
	)
	s.runList(w, r, "messages", func(p *params) {
		box = p.taskID("taskId")
		f.Pending = p.bool("pending")
	}, func(st *projections.State, runID string, req pageReq) (listPage, error) {
		f.Limit, f.Cursor = req.limit, req.cursor
		mp, err := st.Mailbox(runID, box, f)
		if err != nil {
			return listPage{}, cursorErr(err, f.Cursor)
		}
		items := make([]any, len(mp.Messages))
		for i, m := range mp.Messages {
			items[i] = broker.WireMessage(m)
		}
		return listPage{items: items, next: mp.NextCursor, total: mp.Total}, nil
	})
}

// ordinalPage pages a list the projection returns whole (a run's jobs, at most commands.MaxJobsPerRun): the cursor
// is the ordinal (base 36) of the next item to look at, so it stays valid as items are added at the end. keep
// filters; total counts the items kept. A list a run may hold without bound is paged by the projection in place.
func ordinalPage[T any](all []T, limit int, cursor string, keep func(T) bool) (listPage, error) {
	start := 0
	if cursor != "" {
		c, err := strconv.ParseUint(cursor, 36, 32)
		if err != nil || c > uint64(len(all)) {
			return listPage{}, badCursor(cursor)
		}
		start = int(c)
	}
	items, total := make([]T, 0, min(limit, len(all)-start)), 0
	next := ""
	for i, it := range all {
		if !keep(it) {
			continue
		}
		total++
		if i < start || next != "" {
			continue
		}
		if len(items) == limit {
			next = strconv.FormatUint(uint64(i), 36)
			continue
		}
		items = append(items, it)
	}
	return listPage{items: items, next: next, total: total}, nil
}

// GET /api/v1/runs/{runId}/asks?pending=&limit=&cursor=
func (s *Server) handleAsks(w http.ResponseWriter, r *http.Request, _ principal) {
	var pending bool
	s.runList(w, r, "asks", func(p *params) {
		pending = p.bool("pending")
	}, func(st *projections.State, runID string, req pageReq) (listPage, error) {
		pg, err := st.AsksPage(runID, pending, projections.PageFilter{Limit: req.limit, Cursor: req.cursor})
		if err != nil {
			return listPage{}, cursorErr(err, req.cursor)
		}
		return listPage{items: nonNil(pg.Items), next: pg.NextCursor, total: pg.Total}, nil
	})
}

type slotsResult struct {
	Held     int          `json:"held"`
	Capacity int          `json:"capacity"`
	Holders  []slotHolder `json:"holders"`
}

type slotHolder struct {
	SubID string `json:"subId"`
	RunID string `json:"runId"`
}

// GET /api/v1/slots
func (s *Server) handleSlots(w http.ResponseWriter, r *http.Request, _ principal) {
	if e := newParams(r.URL).strict(); e != nil {
		writeError(w, e)
		return
	}
	var res slotsResult
	s.opts.Engine.Read(func(st *projections.State) {
		sl := st.Slots()
		res = slotsResult{Held: sl.Held, Capacity: sl.Capacity, Holders: make([]slotHolder, 0, len(sl.SubIDs))}
		for _, id := range sl.SubIDs {
			run, _ := st.SlotHolder(id)
			res.Holders = append(res.Holders, slotHolder{SubID: id, RunID: run})
		}
	})
	writeJSON(w, res)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
