package projections

import (
	"strings"

	"github.com/crewlog/crewlog/events"
)

// Job is the read model of one pi-task-dispatcher job (D§9): its grant, its
// status, its executor lease and its seen-set of proxy request ids. A job is
// a sub-entity of its run (DESIGN.md, "Jobs"): it lives in the run's stream,
// so it is snapshotted, made cold and read back with its run.
type Job struct {
	RunID  string `json:"runId" msgpack:"runId"`
	JobID  string `json:"jobId" msgpack:"jobId"`
	TaskID string `json:"taskId" msgpack:"taskId"`
	Status string `json:"status" msgpack:"status"`
	// The grant, index for index (T1–T3); ReadOnly the tools that are not
	// mutating (T20).
	Tools          []string `json:"tools" msgpack:"tools"`
	Fingerprints   []string `json:"fingerprints" msgpack:"fingerprints"`
	Callables      []string `json:"callables" msgpack:"callables"`
	ReadOnly       []string `json:"readOnly" msgpack:"readOnly"`
	ManifestBytes  int64    `json:"manifestBytes" msgpack:"manifestBytes"`
	ManifestDigest string   `json:"manifestDigest" msgpack:"manifestDigest"`
	// NonceDigest is the sha-256 of the job's nonce; the nonce itself is
	// never part of the state.
	NonceDigest string `json:"-" msgpack:"nonceDigest"`
	// Generation is the last lease's (0 before the first); LeaseActive
	// tells whether it is still open, Root its root tool-call id.
	Generation  int64  `json:"generation" msgpack:"generation"`
	LeaseActive bool   `json:"leaseActive" msgpack:"leaseActive"`
	Root        string `json:"rootToolCallId,omitempty" msgpack:"root"`
	// InFlight counts the requests admitted and not yet ended.
	InFlight int `json:"inFlight" msgpack:"inFlight"`
	// Requests is the seen-set (T9, T10) in the order the ids were first
	// seen: never pruned while the job lives.
	Requests  []*ProxyRequest `json:"requests" msgpack:"requests"`
	CreatedAt int64           `json:"createdAt" msgpack:"createdAt"`
	UpdatedAt int64           `json:"updatedAt" msgpack:"updatedAt"`

	seen  map[string]*ProxyRequest // request id → record
	grant map[string]int           // tool name → index in Tools
	ro    map[string]bool          // ReadOnly as a set
	// live are the Requests in flight (ProxyRequest.Live), in the order seen: what a lease's clearing aborts and a
	// disconnect cancels, at most the config's proxyMaxInFlight, where Requests holds every call the job has seen.
	// NB: kept inside the state; a query's copy carries nil.
	live []*ProxyRequest
}

// States of a ProxyRequest.
const (
	ProxyAdmitted  = "admitted"  // proxy.requested, not yet revalidated
	ProxyExecuting = "executing" // the grant was revalidated for it (T4)
	ProxyCompleted = "completed"
	ProxyCancelled = "cancelled"
	ProxyAborted   = "aborted"  // its lease was cleared (T5)
	ProxyRejected  = "rejected" // refused after its id was seen
)

// ProxyRequest is one seen request id of a job.
type ProxyRequest struct {
	RequestID  string `json:"requestId" msgpack:"requestId"`
	Generation int64  `json:"generation" msgpack:"generation"`
	Tool       string `json:"tool,omitempty" msgpack:"tool"`
	Mutating   bool   `json:"mutating,omitempty" msgpack:"mutating"`
	ArgsBytes  int64  `json:"argsBytes" msgpack:"argsBytes"`
	State      string `json:"state" msgpack:"state"`
	// Reason is the proxy.rejected reason of a rejected request.
	Reason string `json:"reason,omitempty" msgpack:"reason"`
	// ResultPosition is the position of the delivered proxy.completed (0
	// when none); Fenced marks a result that came too late (T15).
	ResultPosition uint64 `json:"resultPosition,omitempty" msgpack:"resultPosition"`
	Fenced         bool   `json:"fenced,omitempty" msgpack:"fenced"`
}

// Live reports whether the request is admitted or executing.
func (p ProxyRequest) Live() bool { return p.State == ProxyAdmitted || p.State == ProxyExecuting }

// JobTerminal reports whether a job status is terminal: every status but
// starting, running and paused.
func JobTerminal(status string) bool {
	return status != events.JobStarting && status != events.JobRunning && status != events.JobPaused
}

// RevokedRoots is a run's bounded set of revoked lease roots (T17, T18).
// Saturated is the fail-closed state after the set filled: it blocks every
// nested call with a parent id until job.roots_reset.
type RevokedRoots struct {
	Roots     []string `json:"roots" msgpack:"roots"`
	Saturated bool     `json:"saturated" msgpack:"saturated"`

	set map[string]struct{}
}

func (r *runState) addJob(j *Job) {
	j.index()
	r.jobs[j.JobID] = j
	r.jobOrder = append(r.jobOrder, j.JobID)
}

// index rebuilds the job's lookup maps and its calls in flight (live) from
// its exported fields (the fold and a snapshot decode both come here).
func (j *Job) index() {
	j.seen = make(map[string]*ProxyRequest, len(j.Requests))
	j.live = nil
	for _, p := range j.Requests {
		j.seen[p.RequestID] = p
		if p.Live() {
			j.live = append(j.live, p)
		}
	}
	j.grant = make(map[string]int, len(j.Tools))
	for i, t := range j.Tools {
		j.grant[t] = i
	}
	j.ro = make(map[string]bool, len(j.ReadOnly))
	for _, t := range j.ReadOnly {
		j.ro[t] = true
	}
}

// fields is a copy of the job's own fields, its grant copied, without its calls (Requests nil) or lookup maps.
func (j *Job) fields() Job {
	c := *j
	c.Tools, c.Fingerprints = cloneSlice(j.Tools), cloneSlice(j.Fingerprints)
	c.Callables, c.ReadOnly = cloneSlice(j.Callables), cloneSlice(j.ReadOnly)
	c.Requests, c.seen, c.grant, c.ro, c.live = nil, nil, nil, nil, nil
	return c
}

// copied is a deep copy of the job for a query: its calls in flight are the state's own bookkeeping and stay out.
func (j *Job) copied() Job {
	c := j.clone()
	c.live = nil
	return *c
}

func (j *Job) clone() *Job {
	c := j.fields()
	if j.Requests != nil {
		c.Requests = make([]*ProxyRequest, len(j.Requests))
		for i, p := range j.Requests {
			pp := *p
			c.Requests[i] = &pp
		}
	}
	c.index()
	return &c
}

func (rr *RevokedRoots) clone() *RevokedRoots {
	c := &RevokedRoots{Roots: cloneSlice(rr.Roots), Saturated: rr.Saturated}
	c.index()
	return c
}

func (rr *RevokedRoots) index() {
	rr.set = make(map[string]struct{}, len(rr.Roots))
	for _, root := range rr.Roots {
		rr.set[root] = struct{}{}
	}
}

func (j *Job) see(p *ProxyRequest) {
	j.Requests = append(j.Requests, p)
	j.seen[p.RequestID] = p
	if p.Live() {
		j.live = append(j.live, p)
	}
}

// end moves q, a call in flight, to state st, and out of the calls in flight.
func (j *Job) end(q *ProxyRequest, st string) {
	q.State = st
	j.endLive(func(p *ProxyRequest) bool { return p == q })
}

// endLive drops the calls in flight that ended reports ended, keeping the others in order.
func (j *Job) endLive(ended func(q *ProxyRequest) bool) { j.live = dropFrom(j.live, ended) }

func applyJob(r *runState, ev events.Event) {
	at := ev.UnixMilli()
	if ev.Type == events.TypeJobRootsReset {
		r.roots.Roots, r.roots.Saturated = nil, false
		r.roots.index()
		return
	}
	if ev.Type == events.TypeJobCreated {
		p := events.PayloadAs[events.JobCreated](ev)
		if p == nil || r.jobs[p.JobID] != nil {
			return
		}
		r.addJob(&Job{
			RunID: r.run.RunID, JobID: p.JobID, TaskID: p.TaskID, Status: events.JobStarting,
			Tools: cloneSlice(p.Tools), Fingerprints: cloneSlice(p.Fingerprints), Callables: cloneSlice(p.Callables),
			ReadOnly: cloneSlice(p.ReadOnly), ManifestBytes: p.ManifestBytes, ManifestDigest: p.ManifestDigest,
			NonceDigest: p.NonceDigest, CreatedAt: at, UpdatedAt: at,
		})
		return
	}
	j := r.jobs[jobIDOf(ev)]
	if j == nil {
		return
	}
	j.UpdatedAt = at
	switch ev.Type {
	case events.TypeJobStatusChanged:
		if p := events.PayloadAs[events.JobStatusChanged](ev); p != nil {
			j.Status = p.To
		}
	case events.TypeLeaseOpened:
		if p := events.PayloadAs[events.LeaseOpened](ev); p != nil {
			j.Generation, j.LeaseActive, j.Root = p.Generation, true, p.RootToolCallID
		}
	case events.TypeLeaseCleared:
		if p := events.PayloadAs[events.LeaseCleared](ev); p != nil {
			j.LeaseActive = false
			// NB: the calls in flight alone, not every call the job has seen.
			j.endLive(func(q *ProxyRequest) bool {
				if q.Generation != p.Generation {
					return false
				}
				q.State = ProxyAborted
				return true
			})
			// NB: the calls left in flight, none but in a log that records a call under a generation other than
			// its lease's (no decision writes one): counted as none, one of them ending took the count below zero.
			j.InFlight = len(j.live)
			if p.Saturated {
				r.roots.Roots, r.roots.Saturated = nil, true
				r.roots.index()
			} else if _, dup := r.roots.set[p.RootToolCallID]; !dup && !r.roots.Saturated {
				r.roots.Roots = append(r.roots.Roots, p.RootToolCallID)
				r.roots.set[p.RootToolCallID] = struct{}{}
			}
		}
	case events.TypeProxyRequested:
		if p := events.PayloadAs[events.ProxyRequested](ev); p != nil && j.seen[p.RequestID] == nil {
			j.see(&ProxyRequest{
				RequestID: p.RequestID, Generation: p.Generation, Tool: p.Tool, Mutating: p.Mutating,
				ArgsBytes: p.ArgsBytes, State: ProxyAdmitted,
			})
			j.InFlight++
		}
	case events.TypeProxyRejected:
		p := events.PayloadAs[events.ProxyRejected](ev)
		if p == nil {
			break
		}
		q := j.seen[p.RequestID]
		switch {
		case p.Op == events.ProxyOpRequest && q == nil && SeenBy(p.Reason):
			j.see(&ProxyRequest{
				RequestID: p.RequestID, Generation: p.Generation, Tool: p.Tool, ArgsBytes: p.Bytes,
				State: ProxyRejected, Reason: p.Reason,
			})
		case p.Op == events.ProxyOpRevalidate && q != nil && q.Live():
			q.Reason = p.Reason
			j.end(q, ProxyRejected)
			j.InFlight--
		}
	case events.TypeManifestRevalidated:
		if p := events.PayloadAs[events.ManifestRevalidated](ev); p != nil && p.RequestID != "" {
			if q := j.seen[p.RequestID]; q != nil && q.State == ProxyAdmitted {
				q.State = ProxyExecuting
			}
		}
	case events.TypeProxyCompleted:
		if p := events.PayloadAs[events.ProxyCompleted](ev); p != nil {
			q := j.seen[p.RequestID]
			switch {
			case q == nil:
			case p.Fenced:
				q.Fenced = true
			case q.Live():
				q.ResultPosition = ev.Position
				j.end(q, ProxyCompleted)
				j.InFlight--
			}
		}
	case events.TypeProxyCancelled:
		if p := events.PayloadAs[events.ProxyCancelled](ev); p != nil {
			if q := j.seen[p.RequestID]; q != nil && q.Live() {
				j.end(q, ProxyCancelled)
				j.InFlight--
			}
		}
	}
}

// SeenBy reports whether a proxy.rejected with this reason puts its request
// id in the seen-set: every refusal decided after the id passed the checks
// of T7–T10 (nonce, replay, request limit) does, so the same id can never
// be tried again in the job.
func SeenBy(reason string) bool {
	switch reason {
	case events.ProxyReasonBadRequestID, events.ProxyReasonNonce, events.ProxyReasonReplay,
		events.ProxyReasonRequestLimit:
		return false
	}
	return true
}

// jobIDOf is the job id every job event but job.roots_reset carries.
func jobIDOf(ev events.Event) string {
	switch p := ev.Payload.(type) {
	case *events.JobStatusChanged:
		return p.JobID
	case *events.LeaseOpened:
		return p.JobID
	case *events.LeaseCleared:
		return p.JobID
	case *events.ProxyRequested:
		return p.JobID
	case *events.ProxyRejected:
		return p.JobID
	case *events.ProxyCompleted:
		return p.JobID
	case *events.ProxyCancelled:
		return p.JobID
	case *events.ManifestRevalidated:
		return p.JobID
	case *events.ManifestRevalidationFailed:
		return p.JobID
	}
	return ""
}

// JobHeader is a job without its grant and seen-set: what a decision about
// one proxy message reads, in O(1).
type JobHeader struct {
	JobID       string
	TaskID      string
	Status      string
	NonceDigest string
	Generation  int64
	LeaseActive bool
	Root        string
	InFlight    int
	Seen        int
	Tools       int
}

// JobHeader returns the header of job jobID of run runID.
func (s *State) JobHeader(runID, jobID string) (JobHeader, bool) {
	h, ok, _ := s.LookupJobHeader(runID, jobID)
	return h, ok
}

// LookupJobHeader is JobHeader, with the error (ErrNotReadBack) met reading a cold run back from the log: its jobs
// are not known to be none, and must not be answered as if the job did not exist. It copies none of the job's
// slices, where JobPage copies its grant.
func (s *State) LookupJobHeader(runID, jobID string) (JobHeader, bool, error) {
	r, err := s.lookupRun(runID)
	if r == nil || r.jobs[jobID] == nil {
		return JobHeader{}, false, err
	}
	j := r.jobs[jobID]
	return JobHeader{
		JobID: j.JobID, TaskID: j.TaskID, Status: j.Status, NonceDigest: j.NonceDigest, Generation: j.Generation,
		LeaseActive: j.LeaseActive, Root: j.Root, InFlight: j.InFlight, Seen: len(j.Requests), Tools: len(j.Tools),
	}, true, nil
}

// ActiveLeases returns the headers of run runID's jobs that hold an active
// lease, in creation order.
func (s *State) ActiveLeases(runID string) []JobHeader {
	r := s.run(runID)
	if r == nil {
		return nil
	}
	var out []JobHeader
	for _, id := range r.jobOrder {
		if r.jobs[id].LeaseActive {
			h, _ := s.JobHeader(runID, id)
			out = append(out, h)
		}
	}
	return out
}

// JobTool tells whether tool is granted to job jobID of run runID, and
// whether it is read-only (T20).
func (s *State) JobTool(runID, jobID, tool string) (granted, readOnly bool) {
	r := s.run(runID)
	if r == nil || r.jobs[jobID] == nil {
		return false, false
	}
	j := r.jobs[jobID]
	_, granted = j.grant[tool]
	return granted, j.ro[tool]
}

// ProxyRequestOf returns request requestID of job jobID of run runID.
func (s *State) ProxyRequestOf(runID, jobID, requestID string) (ProxyRequest, bool) {
	r := s.run(runID)
	if r == nil || r.jobs[jobID] == nil || r.jobs[jobID].seen[requestID] == nil {
		return ProxyRequest{}, false
	}
	return *r.jobs[jobID].seen[requestID], true
}

// LiveRequests returns the ids of job jobID's admitted or executing
// requests, in the order they were seen.
func (s *State) LiveRequests(runID, jobID string) []string {
	r := s.run(runID)
	if r == nil || r.jobs[jobID] == nil {
		return nil
	}
	var out []string
	for _, q := range r.jobs[jobID].live { // NB: not every call the job has seen
		out = append(out, q.RequestID)
	}
	return out
}

// Job returns a copy of job jobID of run runID with every call it has seen; JobPage copies a page of them alone.
func (s *State) Job(runID, jobID string) (Job, bool) {
	r := s.run(runID)
	if r == nil || r.jobs[jobID] == nil {
		return Job{}, false
	}
	return r.jobs[jobID].copied(), true
}

// JobPage is a job with one page of its calls (State.JobPage).
type JobPage struct {
	// Job is the job's own fields, its grant copied; its Requests is nil: the page is Requests below.
	Job Job
	// Requests are copies of the page's calls in the order their ids were first seen, never nil.
	Requests []*ProxyRequest
	// Seen counts the calls the job has seen; Next is the index of the first call after the page, which is there
	// when Next < Seen.
	Seen, Next int
	// RevokedRoots and Saturated are the run's RevokedRootCount, read with the page from the same read of the run.
	RevokedRoots int
	Saturated    bool
}

// JobPage returns job jobID of run runID with at most limit of its calls from the from-th (none when from is past the
// last), and whether the run has the job; the error is ErrNotReadBack for a cold run the log cannot give back
// (lookupRun). It walks the calls in place and copies the job's own fields and the page alone: a page of a job's
// calls is read under the state's lock, which holds up the publication of every run, and a manager may ask for it
// again and again, where Job's deep copy takes every call the job has seen (as many as the config's proxyMaxRequests)
// and rebuilds their lookup maps.
func (s *State) JobPage(runID, jobID string, from, limit int) (JobPage, bool, error) {
	r, err := s.lookupRun(runID)
	if r == nil || r.jobs[jobID] == nil {
		return JobPage{}, false, err
	}
	j := r.jobs[jobID]
	n := len(j.Requests)
	from = min(max(from, 0), n)
	to := from + min(max(limit, 0), n-from) // not from+limit, which a limit near MaxInt would overflow
	calls := make([]ProxyRequest, to-from)  // one allocation for the page's calls, not one a call
	out := JobPage{Job: j.fields(), Requests: make([]*ProxyRequest, to-from), Seen: n, Next: to,
		RevokedRoots: len(r.roots.Roots), Saturated: r.roots.Saturated}
	for i, q := range j.Requests[from:to] {
		calls[i] = *q
		out.Requests[i] = &calls[i]
	}
	return out, true, nil
}

// Jobs returns copies of run runID's jobs in creation order.
func (s *State) Jobs(runID string) []Job {
	r := s.run(runID)
	if r == nil {
		return nil
	}
	out := make([]Job, 0, len(r.jobOrder))
	for _, id := range r.jobOrder {
		out = append(out, r.jobs[id].copied())
	}
	return out
}

// EachJob calls fn with each of run runID's jobs in creation order, until
// fn returns false. It copies none: j is a shallow copy, and fn must not
// modify what its slices, maps and pointers reach. A summary of the jobs
// reads it under the state's lock instead of Jobs, whose deep copies take
// every call a job has seen (as many as the config's proxyMaxRequests).
// The error is ErrNotReadBack for a cold run the log cannot give back
// (lookupRun): fn is then never called, and the run is not known to have
// no job.
func (s *State) EachJob(runID string, fn func(j Job) bool) error {
	r, err := s.lookupRun(runID)
	if r == nil {
		return err
	}
	for _, id := range r.jobOrder {
		j := *r.jobs[id]
		j.live = nil
		if !fn(j) {
			return nil
		}
	}
	return nil
}

// JobCount returns how many jobs run runID holds and the id of its live
// one ("" when none): the dispatcher runs one live job at a time.
func (s *State) JobCount(runID string) (n int, live string) {
	r := s.run(runID)
	if r == nil {
		return 0, ""
	}
	for _, id := range r.jobOrder {
		if !JobTerminal(r.jobs[id].Status) {
			live = id
		}
	}
	return len(r.jobOrder), live
}

// RevokedRootsOf returns a copy of run runID's revoked-root set.
func (s *State) RevokedRootsOf(runID string) RevokedRoots {
	r := s.run(runID)
	if r == nil {
		return RevokedRoots{}
	}
	return RevokedRoots{Roots: cloneSlice(r.roots.Roots), Saturated: r.roots.Saturated}
}

// RevokedRootCount is RevokedRootsOf(runID) without copying the roots: how many the run has revoked, and whether the
// set saturated. Clearing a lease reads it, and the set holds each distinct root of the leases cleared before (as
// many as the config's revokedRootLimit).
func (s *State) RevokedRootCount(runID string) (n int, saturated bool) {
	r := s.run(runID)
	if r == nil {
		return 0, false
	}
	return len(r.roots.Roots), r.roots.Saturated
}

// RootRevoked reports whether run runID's revoked-root set holds root itself (not a prefix of it: Authorize).
// Clearing a lease reads it: a lease opened again on a root revoked already revokes nothing new when it is cleared.
func (s *State) RootRevoked(runID, root string) bool {
	r := s.run(runID)
	if r == nil {
		return false
	}
	_, ok := r.roots.set[root]
	return ok
}

// Authorization is the answer of Authorize (T17, T18).
type Authorization struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason"`
	JobID   string `json:"jobId,omitempty"`
	Root    string `json:"rootToolCallId,omitempty"`
}

// Reasons of an Authorization.
const (
	AuthNoParent    = "no-parent"    // not a nested call: allowed
	AuthUnrelated   = "unrelated"    // no lease of the run covers it: allowed
	AuthGranted     = "granted"      // under the active lease, a granted tool
	AuthNotGranted  = "not-granted"  // under the active lease, not granted (or codemode)
	AuthRevokedRoot = "revoked-root" // attributable to a revoked root
	AuthSaturated   = "saturated"    // the revoked-root set saturated: fail closed
)

// CodemodeTool is child-local: never callable through the proxy (T12, T17).
const CodemodeTool = "codemode"

// Authorize answers the nested-call decision of T17 for run runID: a call
// whose parent tool-call id is an active lease's root, or under it (root +
// "/"), is allowed only for a granted tool other than codemode; a call
// attributable to a revoked root is blocked, and after saturation every
// call with a parent id is (T18). The error is ErrNotReadBack for a cold
// run the log cannot give back (lookupRun): its leases and revoked roots are
// not known, so no call is allowed as unrelated to them.
func (s *State) Authorize(runID, parent, tool string) (Authorization, error) {
	if parent == "" {
		return Authorization{Allowed: true, Reason: AuthNoParent}, nil
	}
	r, err := s.lookupRun(runID)
	if err != nil {
		return Authorization{}, err
	}
	return r.authorize(parent, tool), nil
}

// authorize is Authorize for run r (nil: unknown, so no lease covers the call).
func (r *runState) authorize(parent, tool string) Authorization {
	if r == nil {
		return Authorization{Allowed: true, Reason: AuthUnrelated}
	}
	if r.roots.Saturated {
		return Authorization{Reason: AuthSaturated}
	}
	for _, id := range r.jobOrder {
		j := r.jobs[id]
		if !j.LeaseActive || !under(parent, j.Root) {
			continue
		}
		if _, ok := j.grant[tool]; ok && tool != CodemodeTool {
			return Authorization{Allowed: true, Reason: AuthGranted, JobID: j.JobID, Root: j.Root}
		}
		return Authorization{Reason: AuthNotGranted, JobID: j.JobID, Root: j.Root}
	}
	// Attributable to a revoked root: the parent itself or any prefix of
	// it that ends at a "/".
	for p := parent; ; {
		if _, ok := r.roots.set[p]; ok {
			return Authorization{Reason: AuthRevokedRoot, Root: p}
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return Authorization{Allowed: true, Reason: AuthUnrelated}
}

// under reports whether parent is root or a descendant of it.
func under(parent, root string) bool {
	return root != "" && (parent == root || strings.HasPrefix(parent, root+"/"))
}
