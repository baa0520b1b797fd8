package commands

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The proxy (D§9 T7–T16): the worker asks for a granted tool of the manager
// (proxy.request), the manager revalidates its grant before executing it
// (manifest.revalidate, T4) and delivers the result (proxy.complete); the
// worker may cancel (proxy.cancel). Every proxy message carries the job's
// nonce (T7), which ParseCommand digests at once: a command never holds it.

// ProxyRequest is the worker's request to run a granted tool through the
// proxy. Its checks run in this order, each refusal recorded as
// proxy.rejected with its reason: bad-request-id (T8), nonce (T7), replay
// (T9), request-limit (T10) — from here on the id is in the seen-set —,
// not-running and no-lease (T11), not-granted (T12), in-flight (T13),
// payload-too-large (T14).
type ProxyRequest struct {
	RunID  string
	TaskID string // the worker's own task: its credential's
	JobID  string
	// RequestID is the id as sent, cut to MaxRequestIDChars*4 bytes when
	// longer (enough to refuse it); RequestIDChars is its length in chars as
	// sent, -1 when it was not a string.
	RequestID      string
	RequestIDChars int
	NonceDigest    string
	Tool           string
	Args           json.RawMessage
}

// Kind implements Command.
func (*ProxyRequest) Kind() string { return "proxy.request" }

// ProxyAnswer answers the proxy commands.
type ProxyAnswer struct {
	OK         bool   `json:"ok"`
	JobID      string `json:"jobId"`
	RequestID  string `json:"requestId"`
	Generation int64  `json:"generation"`
	State      string `json:"state"`
	Mutating   bool   `json:"mutating,omitempty"`
	Fenced     bool   `json:"fenced,omitempty"`
}

// proxyRejection records p (with the job's counters) and answers it
// policy-denied with p's reason.
func proxyRejection(env *Env, runID string, j projections.JobHeader, p *events.ProxyRejected) (Decision, error) {
	p.JobID, p.Status, p.Generation, p.LeaseActive, p.InFlight, p.Seen = j.JobID, j.Status, j.Generation,
		j.LeaseActive, j.InFlight, j.Seen
	ev := env.event(runID, events.TypeProxyRejected, p)
	return Decision{Events: []events.Event{ev}}, reject(CodePolicyDenied, p.Reason, "%s", p.Message)
}

// workerJob finds the worker's own job: a job of another task is
// forbidden, and nothing is recorded for it.
func workerJob(s *projections.State, op, runID, taskID, jobID string) (projections.JobHeader, error) {
	j, err := jobOf(s, runID, jobID)
	if err != nil {
		return j, err
	}
	if j.TaskID != taskID {
		return j, reject(CodeForbidden, "forbidden", "%s: job %s is not this task's", op, jobID)
	}
	return j, nil
}

// sameNonce checks a proxy message's nonce digest against the job's, in
// constant time.
func sameNonce(j projections.JobHeader, digest string) bool {
	return validDigest(digest) && SameDigest(j.NonceDigest, digest)
}

func (c *ProxyRequest) decide(s *projections.State, env *Env) (Decision, error) {
	j, err := workerJob(s, "proxy.request", c.RunID, c.TaskID, c.JobID)
	if err != nil {
		return Decision{}, err
	}
	lim := env.Config.JobLimits()
	rej := &events.ProxyRejected{RequestID: c.RequestID, Op: events.ProxyOpRequest, Tool: c.Tool}
	rej.Tool = truncate(rej.Tool, MaxToolNameChars)
	switch {
	case c.RequestIDChars < 1 || c.RequestIDChars > MaxRequestIDChars:
		rej.RequestID, rej.RequestIDChars = "", c.RequestIDChars
		rej.Reason = events.ProxyReasonBadRequestID
		rej.Message = fmt.Sprintf("request id must be a string of 1..%d chars", MaxRequestIDChars)
		return proxyRejection(env, c.RunID, j, rej)
	case !sameNonce(j, c.NonceDigest):
		rej.Reason, rej.Message = events.ProxyReasonNonce, "proxy nonce mismatch"
		return proxyRejection(env, c.RunID, j, rej)
	}
	if _, seen := s.ProxyRequestOf(c.RunID, c.JobID, c.RequestID); seen {
		rej.Reason, rej.Message = events.ProxyReasonReplay, "request id was replayed"
		return proxyRejection(env, c.RunID, j, rej)
	}
	granted, readOnly := s.JobTool(c.RunID, c.JobID, c.Tool)
	size := int64(len(c.Args))
	switch {
	case j.Seen >= lim.MaxRequests:
		rej.Reason, rej.Limit = events.ProxyReasonRequestLimit, int64(lim.MaxRequests)
		rej.Message = "per-job request limit was reached"
	case j.Status != events.JobRunning:
		rej.Reason = events.ProxyReasonNotRunning
		rej.Message = fmt.Sprintf("job %s is %s, not running", c.JobID, j.Status)
	case !j.LeaseActive:
		rej.Reason = events.ProxyReasonNoLease
		rej.Message = fmt.Sprintf("job %s holds no active executor lease", c.JobID)
	case !granted || c.Tool == projections.CodemodeTool:
		rej.Reason = events.ProxyReasonNotGranted
		rej.Message = fmt.Sprintf("tool %q is not granted to job %s", rej.Tool, c.JobID)
	case j.InFlight >= lim.MaxInFlight:
		rej.Reason, rej.Limit = events.ProxyReasonInFlight, int64(lim.MaxInFlight)
		rej.Message = fmt.Sprintf("%d proxied calls are already in flight", j.InFlight)
	case size > lim.PayloadBytes:
		payloadTooLarge(rej, argumentsTooLarge, size, lim.PayloadBytes)
	}
	if rej.Reason != "" {
		return proxyRejection(env, c.RunID, j, rej)
	}
	args, err := JSONSafeArgs(c.Args)
	if err != nil {
		// A malformed message, like a malformed frame: refused before the
		// rules, nothing recorded, the id not seen.
		return Decision{}, badParams("proxy.request: arguments: %v", err)
	}
	// NB: the limit bounds the arguments as recorded, which may be longer than as sent: canonical JSON writes
	// some one-byte characters as six ("<" as \u003c).
	if n := int64(len(args)); n > lim.PayloadBytes {
		payloadTooLarge(rej, argumentsTooLarge, n, lim.PayloadBytes)
		return proxyRejection(env, c.RunID, j, rej)
	}
	ev := env.event(c.RunID, events.TypeProxyRequested, &events.ProxyRequested{
		JobID: c.JobID, RequestID: c.RequestID, Generation: j.Generation, Tool: c.Tool, Mutating: !readOnly,
		Args: args, ArgsBytes: int64(len(args)),
	})
	return Decision{Events: []events.Event{ev}, Result: ProxyAnswer{
		OK: true, JobID: c.JobID, RequestID: c.RequestID, Generation: j.Generation, State: projections.ProxyAdmitted,
		Mutating: !readOnly,
	}}, nil
}

// ManifestRevalidate is the manager's revalidation of the grant before it
// executes one admitted call (T4): the same grant allows the call; another
// refuses it (revalidation-failed) and hard-stops the job.
type ManifestRevalidate struct {
	RunID     string
	JobID     string
	RequestID string
	Tools     json.RawMessage
}

// Kind implements Command.
func (*ManifestRevalidate) Kind() string { return "manifest.revalidate" }

func (c *ManifestRevalidate) decide(s *projections.State, env *Env) (Decision, error) {
	if err := checkText(c.Kind(), textField{"requestId", c.RequestID, MaxRequestIDChars}); err != nil {
		return Decision{}, err
	}
	j, err := jobOf(s, c.RunID, c.JobID)
	if err != nil {
		return Decision{}, err
	}
	q, ok := s.ProxyRequestOf(c.RunID, c.JobID, c.RequestID)
	if !ok || q.State != projections.ProxyAdmitted || !j.LeaseActive || q.Generation != j.Generation {
		return Decision{}, badParams("manifest.revalidate: request %q of job %s is not admitted under the "+
			"current lease", c.RequestID, c.JobID)
	}
	okay, evs := revalidateGrant(s, env, c.RunID, j, events.RevalidateCall, c.RequestID, c.Tools)
	if !okay {
		return Decision{Events: evs}, reject(CodePolicyDenied, events.ProxyReasonRevalidationFailed,
			"manifest.revalidate: the grant of job %s changed; request %s is refused and the job hard-stopped",
			c.JobID, c.RequestID)
	}
	return Decision{Events: evs, Result: ProxyAnswer{OK: true, JobID: c.JobID, RequestID: c.RequestID,
		Generation: j.Generation, State: projections.ProxyExecuting}}, nil
}

// ProxyComplete is the manager's result of an executing call. It is
// delivered only if the call's lease is still the current one and the
// request still registered; otherwise it is recorded as fenced and never
// delivered (T15).
type ProxyComplete struct {
	RunID       string
	JobID       string
	RequestID   string
	NonceDigest string
	Result      json.RawMessage
}

// Kind implements Command.
func (*ProxyComplete) Kind() string { return "proxy.complete" }

func (c *ProxyComplete) decide(s *projections.State, env *Env) (Decision, error) {
	// NB: before the nonce check, whose refusal records the request id.
	if err := checkText(c.Kind(), textField{"requestId", c.RequestID, MaxRequestIDChars}); err != nil {
		return Decision{}, err
	}
	j, err := jobOf(s, c.RunID, c.JobID)
	if err != nil {
		return Decision{}, err
	}
	rej := &events.ProxyRejected{RequestID: c.RequestID, Op: events.ProxyOpComplete}
	if !sameNonce(j, c.NonceDigest) {
		rej.Reason, rej.Message = events.ProxyReasonNonce, "proxy nonce mismatch"
		return proxyRejection(env, c.RunID, j, rej)
	}
	q, ok := s.ProxyRequestOf(c.RunID, c.JobID, c.RequestID)
	if !ok {
		return Decision{}, badParams("proxy.complete: request %q of job %s was never admitted", c.RequestID, c.JobID)
	}
	if q.State == projections.ProxyCompleted {
		// NB: not fenced: a call's result is delivered once, and this one
		// was. Recording a second completion as fenced would mark the call
		// fenced beside the result it delivered (proxy.result), and tell a
		// manager retrying without a commandId that its result was lost.
		return Decision{}, badParams("proxy.complete: request %q of job %s is already completed; its result was "+
			"delivered", c.RequestID, c.JobID)
	}
	current := currentCall(j, q)
	if current && q.State != projections.ProxyExecuting {
		return Decision{}, badParams("proxy.complete: request %q was not revalidated (manifest.revalidate) before "+
			"it executed", c.RequestID)
	}
	size, lim := int64(len(c.Result)), env.Config.JobLimits().PayloadBytes
	if size > lim {
		payloadTooLarge(rej, resultTooLarge, size, lim)
		return proxyRejection(env, c.RunID, j, rej)
	}
	p := &events.ProxyCompleted{JobID: c.JobID, RequestID: c.RequestID, Generation: q.Generation,
		CurrentGeneration: j.Generation, ResultBytes: size}
	if !current {
		p.Fenced = true // recorded, never delivered: the result is not kept
	} else {
		if p.Result, p.IsError, err = ShapeProxyResult(c.Result); err != nil {
			return Decision{}, badParams("proxy.complete: %v", err)
		}
		p.ResultBytes = int64(len(p.Result))
		// NB: as for a request's arguments, the limit bounds the result as recorded, which may be longer.
		if p.ResultBytes > lim {
			payloadTooLarge(rej, resultTooLarge, p.ResultBytes, lim)
			return proxyRejection(env, c.RunID, j, rej)
		}
	}
	ev := env.event(c.RunID, events.TypeProxyCompleted, p)
	state := projections.ProxyCompleted
	if p.Fenced {
		state = q.State
	}
	return Decision{Events: []events.Event{ev}, Result: ProxyAnswer{
		OK: true, JobID: c.JobID, RequestID: c.RequestID, Generation: q.Generation, State: state, Fenced: p.Fenced,
	}}, nil
}

// currentCall reports whether call q of job j may still receive its result
// (T15): live, of the job's current lease, the job running.
func currentCall(j projections.JobHeader, q projections.ProxyRequest) bool {
	return q.Live() && j.LeaseActive && q.Generation == j.Generation && j.Status == events.JobRunning
}

// windsDown: a result delivered to a current call ends it; a completion of
// a call already completed is refused with nothing recorded; a completion
// of any other call records only that it was fenced, and can be sent for
// the same call again and again, so it is measured against the run's quotas
// (quota.go).
func (c *ProxyComplete) windsDown(s *projections.State) bool {
	j, ok := s.JobHeader(c.RunID, c.JobID)
	if !ok {
		return true // refused, nothing recorded
	}
	q, ok := s.ProxyRequestOf(c.RunID, c.JobID, c.RequestID)
	// refused, nothing recorded; or delivered
	return !ok || q.State == projections.ProxyCompleted || currentCall(j, q)
}

// ProxyCancel is the worker's cancel of one of its calls (T16): honoured
// only for a known, live request of the current lease of a running job;
// otherwise refused and recorded.
type ProxyCancel struct {
	RunID       string
	TaskID      string
	JobID       string
	RequestID   string
	NonceDigest string
}

// Kind implements Command.
func (*ProxyCancel) Kind() string { return "proxy.cancel" }

func (c *ProxyCancel) decide(s *projections.State, env *Env) (Decision, error) {
	j, err := workerJob(s, "proxy.cancel", c.RunID, c.TaskID, c.JobID)
	if err != nil {
		return Decision{}, err
	}
	rej := &events.ProxyRejected{RequestID: c.RequestID, Op: events.ProxyOpCancel}
	if longerThan(c.RequestID, MaxRequestIDChars) {
		rej.RequestID, rej.RequestIDChars = "", utf8.RuneCountInString(c.RequestID)
	}
	q, known := s.ProxyRequestOf(c.RunID, c.JobID, c.RequestID)
	switch {
	case !sameNonce(j, c.NonceDigest):
		rej.Reason, rej.Message = events.ProxyReasonNonce, "proxy nonce mismatch"
	case !known || !q.Live():
		rej.Reason, rej.Message = events.ProxyReasonBadRequestID, fmt.Sprintf("request %q is not a live request "+
			"of job %s", rej.RequestID, c.JobID)
	case j.Status != events.JobRunning:
		rej.Reason, rej.Message = events.ProxyReasonNotRunning,
			fmt.Sprintf("job %s is %s, not running", c.JobID, j.Status)
	case !j.LeaseActive || q.Generation != j.Generation:
		rej.Reason, rej.Message = events.ProxyReasonNoLease, fmt.Sprintf("request %q belongs to lease %d, not the "+
			"current one", c.RequestID, q.Generation)
	}
	if rej.Reason != "" {
		return proxyRejection(env, c.RunID, j, rej)
	}
	ev := env.event(c.RunID, events.TypeProxyCancelled,
		&events.ProxyCancelled{JobID: c.JobID, RequestID: c.RequestID, Generation: q.Generation, By: "worker"})
	return Decision{Events: []events.Event{ev}, Result: ProxyAnswer{OK: true, JobID: c.JobID, RequestID: c.RequestID,
		Generation: q.Generation, State: projections.ProxyCancelled}}, nil
}

// JobDisconnect records that the worker's IPC went away: every pending
// proxied call fails (T19). The job keeps its status and lease; the manager
// decides what follows (a pause, a stop).
type JobDisconnect struct {
	RunID string
	JobID string
}

// Kind implements Command.
func (*JobDisconnect) Kind() string { return "job.disconnect" }

func (c *JobDisconnect) decide(s *projections.State, env *Env) (Decision, error) {
	j, err := jobOf(s, c.RunID, c.JobID)
	if err != nil {
		return Decision{}, err
	}
	var evs []events.Event
	for _, id := range s.LiveRequests(c.RunID, c.JobID) {
		q, _ := s.ProxyRequestOf(c.RunID, c.JobID, id)
		evs = append(evs, env.event(c.RunID, events.TypeProxyCancelled,
			&events.ProxyCancelled{JobID: c.JobID, RequestID: id, Generation: q.Generation, By: "disconnect"}))
	}
	return Decision{Events: evs, Result: JobResult{OK: true, JobID: c.JobID, Status: j.Status,
		Generation: j.Generation, Cancelled: len(evs)}}, nil
}

// The messages of a T14 refusal (payload-too-large).
const (
	argumentsTooLarge = "arguments of %d bytes exceed the %d-byte limit"
	resultTooLarge    = "result of %d bytes exceeds the %d-byte limit"
)

// payloadTooLarge makes rej the T14 refusal of size bytes past limit; format words it from the two.
func payloadTooLarge(rej *events.ProxyRejected, format string, size, limit int64) {
	rej.Reason, rej.Limit, rej.Bytes = events.ProxyReasonPayloadTooLarge, limit, size
	rej.Message = fmt.Sprintf(format, size, limit)
}
