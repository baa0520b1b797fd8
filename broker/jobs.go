package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Job queries (D§9, docs/design-jobs.md). The job commands themselves are engine commands served by runCommand;
// these read the published state. query.jobs, query.job and job.authorize are the manager's (the run's
// orchestrator, or the admin naming params.runId); proxy.result is the worker's, for its own job only.

// JobSummary is a job without its grant and seen-set: what a list shows.
type JobSummary struct {
	JobID          string `json:"jobId"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	Generation     int64  `json:"generation"`
	LeaseActive    bool   `json:"leaseActive"`
	RootToolCallID string `json:"rootToolCallId,omitempty"`
	InFlight       int    `json:"inFlight"`
	Seen           int    `json:"seen"`
	Tools          int    `json:"tools"`
	ManifestDigest string `json:"manifestDigest"`
	CreatedAt      int64  `json:"createdAt"`
	UpdatedAt      int64  `json:"updatedAt"`
	// TextsOmitted says the root was left out: with it the job would not fit in a frame (omitRoot).
	TextsOmitted bool `json:"textsOmitted,omitempty"`
}

// omitRoot leaves out s's root, the one field of a job's summary whose size is not bounded by its jobId's and
// taskId's (up to commands.MaxRootChars, six bytes each in JSON), and says so. The root is in the lease.opened event
// that recorded it, and in the dashboard's API, which has no frame.
func (s *JobSummary) omitRoot() { s.RootToolCallID, s.TextsOmitted = "", true }

// JobSummaries is query.jobs' list: run runID's jobs in st, in creation order. The error is
// projections.ErrNotReadBack for a cold run the log cannot give back, whose jobs are not known to be none.
func JobSummaries(st *projections.State, runID string) ([]JobSummary, error) {
	out := []JobSummary{}
	err := st.EachJob(runID, func(j projections.Job) bool {
		out = append(out, summarizeJob(j, len(j.Requests)))
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// summarizeJob is job j's summary, seen the number of calls it has seen (j.Requests may hold a page of them).
func summarizeJob(j projections.Job, seen int) JobSummary {
	return JobSummary{
		JobID: j.JobID, TaskID: j.TaskID, Status: j.Status, Generation: j.Generation, LeaseActive: j.LeaseActive,
		RootToolCallID: j.Root, InFlight: j.InFlight, Seen: seen, Tools: len(j.Tools),
		ManifestDigest: j.ManifestDigest, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt,
	}
}

// query.jobs {limit? 1..1000 (default 100), cursor?} → {jobs: [summary], nextCursor?} in creation order (at most
// commands.MaxJobsPerRun), cut to what fits in a frame as the other pages are (fitPage): a job's ids and root are the
// manager's to choose, so a run's jobs together need not fit in one frame, even one of the default size.
func handleQueryJobs(cl *call) (any, error) {
	var (
		limit  int
		cursor string
	)
	p, runID := queryParams(cl, func(p *params) { limit, cursor = pageParams(p) })
	if p.err != nil {
		return nil, p.err
	}
	from, err := indexCursor(cl.method, cursor)
	if err != nil {
		return nil, err
	}
	// NB: read once, not on every pass of fitPage: each pass cuts its page from the same summaries, and the state's
	// lock is taken once.
	all, err := readState(cl, func(st *projections.State) ([]JobSummary, error) { return JobSummaries(st, runID) })
	if err != nil {
		return nil, err
	}
	// NB: a job that would not fit in a frame with its root is sent without it (omitRoot), as the other lists send an
	// item too large for a page of its own, so that the jobs after it are read too.
	pg, err := fitPageOmitting(cl, limit, func(limit int) (page[JobSummary], error) {
		items, next := indexPage(all, from, limit)
		return page[JobSummary]{items: items, next: next}, nil
	}, same[JobSummary], omitting(cl, (*JobSummary).omitRoot))
	if err != nil {
		return nil, err
	}
	return jobsResult{Jobs: nonNil(pg.items), NextCursor: pg.next}, nil
}

// indexCursor reads the cursor of a list paged by position (query.jobs, query.job's calls): the decimal index of
// the first item of the page, 0 when absent. Such a list only grows, so an index stays valid.
func indexCursor(method, cursor string) (int, error) {
	if cursor == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(cursor)
	if err != nil || n < 0 {
		return 0, badParams(method, "cursor is not one this server gave")
	}
	return n, nil
}

// indexPage is the page of at most limit of items from the from-th (none past the last), and the cursor of the
// first item left out ("" on the last page).
func indexPage[T any](items []T, from, limit int) (page []T, next string) {
	from = min(max(from, 0), len(items))
	to := min(from+max(limit, 0), len(items))
	if to < len(items) {
		next = strconv.Itoa(to)
	}
	return items[from:to], next
}

// JobDetail is query.job's answer: the summary, the grant, the revoked-root set of the run, and one page of the
// seen-set.
type JobDetail struct {
	JobSummary
	Grant []GrantedTool `json:"grant"`
	// GrantOmitted says the grant was left out (null; tools still counts it): the job's other fields with it left
	// no room for one of its calls in a frame.
	GrantOmitted bool                        `json:"grantOmitted,omitempty"`
	Requests     []*projections.ProxyRequest `json:"requests"`
	NextCursor   string                      `json:"nextCursor,omitempty"`
	RevokedRoots int                         `json:"revokedRoots"`
	Saturated    bool                        `json:"saturated"`
}

// GrantedTool is one tool of a job's grant.
type GrantedTool struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	Callable    string `json:"callable,omitempty"`
	ReadOnly    bool   `json:"readOnly"`
}

// query.job {jobId, limit? 1..500 (default 100), cursor?} → the job with a page of its requests in the order their
// ids were first seen, cut to what fits in a frame beside the job's own fields (fitPage); nextCursor continues. When
// the job's own fields leave no room for a call, they are sent without the root (omitRoot) and, if that is not
// enough, without the grant too (GrantOmitted): a grant of the dispatcher's 256 tools, or one that filled the frame
// of the job.create that made it, is larger than a frame in query.job, where each tool takes its fingerprint, and
// the job's calls, which the worker names, were unreachable behind it.
func handleQueryJob(cl *call) (any, error) {
	var jobID, cursor string
	var limit int64
	p, runID := queryParams(cl, func(p *params) {
		jobID = p.str("jobId", true, commands.MaxJobIDChars)
		limit = p.int("limit", 1, 500, 100)
		cursor = p.str("cursor", false, 16)
	})
	if p.err != nil {
		return nil, p.err
	}
	from, err := indexCursor(cl.method, cursor)
	if err != nil {
		return nil, err
	}
	// NB: read once, not on every pass of fitPage nor at each omission: each cuts its page from the same job, the
	// state's lock is taken once, and the job's fields and its calls answered are of one read.
	var found bool
	whole, err := readState(cl, func(st *projections.State) (JobDetail, error) {
		d, ok, err := JobDetailOf(st, runID, jobID, from, int(limit))
		found = ok
		return d, err
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, badParams(cl.method, "job %q not found", jobID)
	}
	var (
		out JobDetail
		pg  page[*projections.ProxyRequest]
	)
	for omit := 0; ; omit++ { // 0: the job whole; 1: without its root; 2: without its grant too
		out = whole // NB: a copy: each omission starts from the job as read, and changes only its own fields
		if omit >= 1 {
			out.omitRoot()
		}
		if omit >= 2 {
			out.Grant, out.GrantOmitted = nil, true
		}
		// The job's own fields are sent with every page: measured without the page, they are what it holds around it.
		calls := out.Requests
		out.Requests, out.NextCursor = []*projections.ProxyRequest{}, ""
		b, merr := json.Marshal(out)
		if merr != nil {
			return nil, merr
		}
		pg, err = fitPage(cl, int(limit), func(limit int) (page[*projections.ProxyRequest], error) {
			p := page[*projections.ProxyRequest]{items: calls, next: whole.NextCursor, around: len(b)}
			if limit < len(calls) {
				p.items, p.next = calls[:limit], strconv.Itoa(from+limit)
			}
			if p.around+cursorBytes(p.next) > pageBudget(cl) {
				// NB: a job of no call (or a page past its last) is no item fitPage could find too large.
				return p, fmt.Errorf("%w: %s", errTooLarge, cl.method)
			}
			return p, nil
		}, same[*projections.ProxyRequest])
		if !errors.Is(err, errTooLarge) || omit == 2 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	out.Requests, out.NextCursor = pg.items, pg.next
	return out, nil
}

// JobDetailOf is query.job's answer for job jobID of run runID in st: the job with limit of its requests from
// the from-th (a from past the last gives none); found is false when the run has no such job, and the error
// projections.ErrNotReadBack for a cold run the log cannot give back (its jobs are not known). It copies what it
// answers and that alone (State.JobPage), so the caller may render it outside the read, and a page cut to the frame
// (fitPage) may read it again without copying every call the job has seen each time.
func JobDetailOf(st *projections.State, runID, jobID string, from, limit int) (out JobDetail, found bool, err error) {
	pg, ok, err := st.JobPage(runID, jobID, from, limit)
	if !ok {
		return JobDetail{}, false, err
	}
	j := pg.Job
	out.JobSummary = summarizeJob(j, pg.Seen)
	ro := map[string]bool{}
	for _, t := range j.ReadOnly {
		ro[t] = true
	}
	for i, name := range j.Tools {
		out.Grant = append(out.Grant, GrantedTool{Name: name, Fingerprint: j.Fingerprints[i], Callable: j.Callables[i],
			ReadOnly: ro[name]})
	}
	out.Requests = pg.Requests
	if pg.Next < pg.Seen {
		out.NextCursor = strconv.Itoa(pg.Next)
	}
	out.RevokedRoots, out.Saturated = pg.RevokedRoots, pg.Saturated // NB: of the same read of the run as the page
	return out, true, nil
}

// job.authorize {parentToolCallId, tool} → {allowed, reason, jobId?, rootToolCallId?}: the nested-call decision
// of T17/T18, answered from the run's jobs and revoked roots.
func handleJobAuthorize(cl *call) (any, error) {
	var parent, tool string
	p, runID := queryParams(cl, func(p *params) {
		parent = p.str("parentToolCallId", false, 4*commands.MaxRootChars)
		tool = p.str("tool", true, commands.MaxToolNameChars)
	})
	if p.err != nil {
		return nil, p.err
	}
	a, err := readState(cl, func(st *projections.State) (projections.Authorization, error) {
		return st.Authorize(runID, parent, tool)
	})
	if err != nil {
		return nil, err // NB: not allowed as unrelated: the run's leases and revoked roots are not known
	}
	return a, nil
}

// methodProxyResult is the worker's read of one of its proxied calls: a page read (pageRead), since it reads the
// call's result, up to a frame of it, from the log.
const methodProxyResult = "proxy.result"

// proxyResult is proxy.result's answer.
type proxyResult struct {
	JobID      string `json:"jobId"`
	RequestID  string `json:"requestId"`
	State      string `json:"state"`
	Generation int64  `json:"generation"`
	Result     string `json:"result,omitempty"`
	IsError    bool   `json:"isError,omitempty"`
	Fenced     bool   `json:"fenced,omitempty"`
}

// proxy.result {jobId, requestId} → {state, generation, result?, isError?}: the worker's view of one of its calls.
// A delivered result is read from its proxy.completed event; a fenced one never is (T15).
func handleProxyResult(cl *call) (any, error) {
	p := readParams(cl)
	c := cl.c
	if c.id.role != events.RoleWorker || c.id.taskID == "" {
		return nil, forbidden("%s requires a task-scoped token", cl.method)
	}
	jobID := p.str("jobId", true, commands.MaxJobIDChars)
	requestID := p.str("requestId", true, commands.MaxRequestIDChars*4)
	p.strict()
	if p.err != nil {
		return nil, p.err
	}
	runID := c.id.runID
	if err := c.warm(runID); err != nil {
		return nil, err
	}
	var (
		q     projections.ProxyRequest
		found bool
		mine  bool
	)
	if err := cl.read(func(st *projections.State) {
		if mine = jobOfTask(st, runID, jobID, c.id.taskID); mine {
			q, found = st.ProxyRequestOf(runID, jobID, requestID)
		}
	}); err != nil {
		return nil, err
	}
	if !mine {
		return nil, forbidden("%s: job %s is not this task's", cl.method, jobID)
	}
	if !found {
		return nil, badParams(cl.method, "request %q of job %s was never seen", requestID, jobID)
	}
	out := proxyResult{JobID: jobID, RequestID: requestID, State: q.State, Generation: q.Generation, Fenced: q.Fenced}
	if q.ResultPosition == 0 {
		return out, nil
	}
	raw, err := c.s.log.Event(q.ResultPosition)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errReplay, err)
	}
	ev, err := projections.FromLog(&raw)
	if err != nil {
		return nil, err
	}
	if done, ok := ev.Payload.(*events.ProxyCompleted); ok && done.JobID == jobID && done.RequestID == requestID {
		out.Result, out.IsError = done.Result, done.IsError
	}
	return out, nil
}
