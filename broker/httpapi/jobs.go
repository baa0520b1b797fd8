package httpapi

import (
	"net/http"
	"strconv"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/projections"
)

// A run's jobs (docs/design-jobs.md) in the socket's query.jobs and query.job shapes (broker.JobSummaries,
// broker.JobDetailOf), each with the job limits in force, which the socket's shapes leave out. A job's nonce is
// kept only as a digest, and no shape carries it.

// Bounds of the job routes, as the socket's query.job: at most 500 requests a page, 100 by default.
const (
	defaultJobRequests = 100
	maxJobRequests     = 500
)

// jobLimits are the limits a job's counts are held to (engine.configured, the dispatcher's for a knob left 0).
type jobLimits struct {
	MaxInFlight  int `json:"maxInFlight"`
	MaxRequests  int `json:"maxRequests"`
	RevokedRoots int `json:"revokedRoots"`
}

func jobLimitsOf(st *projections.State) jobLimits {
	l := st.Config().JobLimits()
	return jobLimits{MaxInFlight: l.MaxInFlight, MaxRequests: l.MaxRequests, RevokedRoots: l.RevokedRoots}
}

// jobItem is a job of the list: query.jobs' summary and the limits.
type jobItem struct {
	broker.JobSummary
	Limits jobLimits `json:"limits"`
}

// jobDetail is one job: query.job's answer and the limits.
type jobDetail struct {
	broker.JobDetail
	HasMore bool      `json:"hasMore"`
	Limits  jobLimits `json:"limits"`
}

// GET /api/v1/runs/{runId}/jobs?limit=&cursor=
func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request, _ principal) {
	s.runList(w, r, "jobs", nil,
		func(st *projections.State, runID string, req pageReq) (listPage, error) {
			lim := jobLimitsOf(st)
			all, err := broker.JobSummaries(st, runID)
			if err != nil {
				return listPage{}, err
			}
			items := make([]jobItem, len(all))
			for i, j := range all {
				items[i] = jobItem{JobSummary: j, Limits: lim}
			}
			return ordinalPage(items, req.limit, req.cursor, func(jobItem) bool { return true })
		})
}

// GET /api/v1/runs/{runId}/jobs/{jobId}?limit=&cursor=: the job with a page of its proxied calls, in the order
// their ids were first seen; the cursor is the socket's (the ordinal of the next call).
func (s *Server) handleJob(w http.ResponseWriter, r *http.Request, _ principal) {
	var (
		limit  uint64
		cursor string
		from   int
	)
	runID, e := s.runParam(r)
	jobID := r.PathValue("jobId")
	if e == nil && (jobID == "" || len(jobID) > commands.MaxJobIDChars) {
		e = badParams("jobId must be 1..%d bytes", commands.MaxJobIDChars)
	}
	if e == nil {
		p := newParams(r.URL)
		limit = p.uint("limit", 1, maxJobRequests, defaultJobRequests)
		cursor = p.str("cursor", maxCursorLen)
		e = p.strict()
	}
	if e == nil && cursor != "" {
		n, err := strconv.ParseUint(cursor, 10, 31)
		if err != nil {
			e = badCursor(cursor)
		}
		from = int(n)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	var (
		out          jobDetail
		runOK, jobOK bool
		err          error
	)
	s.opts.Engine.Read(func(st *projections.State) {
		if _, runOK, err = st.LookupRun(runID); runOK {
			out.JobDetail, jobOK, err = broker.JobDetailOf(st, runID, jobID, from, int(limit))
			out.Limits = jobLimitsOf(st)
		}
	})
	switch {
	case err != nil:
		writeError(w, notReadBack())
	case !runOK:
		writeError(w, noRun(runID))
	case !jobOK:
		writeError(w, notFound("run %q has no job %q", runID, jobID))
	case from > out.Seen:
		writeError(w, badCursor(cursor))
	default:
		out.HasMore = out.NextCursor != ""
		writeJSON(w, out)
	}
}
