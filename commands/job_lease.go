package commands

import (
	"encoding/json"
	"fmt"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// LeaseOpen opens a job's executor lease (T5) by start (from starting) or
// continue (from paused only, T6, after revalidating the grant, T4). The
// lease's generation is one more than the job's last, so a result of an
// older lease is told apart (T15). A job whose worker has ended (its task
// terminal, its credential revoked) gets no lease: worker-ended.
type LeaseOpen struct {
	RunID          string
	JobID          string
	Mode           string
	RootToolCallID string
	// Tools is the manager's current grant, revalidated on continue.
	Tools json.RawMessage
}

// Kind implements Command.
func (*LeaseOpen) Kind() string { return "lease.open" }

func (c *LeaseOpen) decide(s *projections.State, env *Env) (Decision, error) {
	if c.Mode != events.LeaseStart && c.Mode != events.LeaseContinue {
		return Decision{}, badParams("lease.open: mode must be start or continue")
	}
	if c.RootToolCallID == "" || longerThan(c.RootToolCallID, MaxRootChars) {
		return Decision{}, badParams("lease.open: rootToolCallId must be 1..%d chars", MaxRootChars)
	}
	if c.Mode == events.LeaseContinue && len(c.Tools) == 0 {
		// NB: a request without the grant is malformed, not a grant that changed: refused with nothing recorded,
		// where revalidating nothing against the job's grant would hard-stop the job (T4) for a missing param. An
		// empty list is a grant, and is revalidated.
		return Decision{}, badParams("lease.open: tools (the manager's current grant) is required to continue: it " +
			"is revalidated against the job's (T4)")
	}
	j, err := jobOf(s, c.RunID, c.JobID)
	if err != nil {
		return Decision{}, err
	}
	if run, _ := s.Run(c.RunID); run.Status.Stale() {
		return Decision{}, reject(CodeForbidden, "run-terminal", "lease.open: run %s is %s", c.RunID, run.Status)
	}
	rej := &events.JobRejected{JobID: c.JobID, Op: "lease.open", Status: j.Status, Generation: j.Generation,
		LeaseActive: j.LeaseActive}
	switch {
	case workerEnded(s, c.RunID, j.TaskID):
		rej.Reason = LeaseReasonWorkerEnded
		rej.Message = fmt.Sprintf("lease.open: the worker of job %s (task %s) has ended: its task is terminal or "+
			"its credential revoked", c.JobID, j.TaskID)
		return jobRejection(env, c.RunID, rej)
	case j.LeaseActive:
		rej.Reason = "lease-active"
		rej.Message = fmt.Sprintf("lease.open: job %s already holds lease %d; at most one active lease per job",
			c.JobID, j.Generation)
		return jobRejection(env, c.RunID, rej)
	case c.Mode == events.LeaseStart && j.Status != events.JobStarting:
		rej.Reason = "not-starting"
		rej.Message = fmt.Sprintf("lease.open: start needs a starting job; job %s is %s", c.JobID, j.Status)
		return jobRejection(env, c.RunID, rej)
	case c.Mode == events.LeaseContinue && j.Status != events.JobPaused:
		rej.Reason = "not-paused"
		rej.Message = fmt.Sprintf("lease.open: continue needs a paused job; job %s is %s", c.JobID, j.Status)
		return jobRejection(env, c.RunID, rej)
	}
	var evs []events.Event
	if c.Mode == events.LeaseContinue {
		ok, revEvs := revalidateGrant(s, env, c.RunID, j, events.LeaseContinue, "", c.Tools)
		evs = append(evs, revEvs...)
		if !ok {
			return Decision{Events: evs}, reject(CodePolicyDenied, events.ProxyReasonRevalidationFailed,
				"lease.open: the grant of job %s changed since it was created; the job is hard-stopped", c.JobID)
		}
	}
	gen := j.Generation + 1
	evs = append(evs,
		env.event(c.RunID, events.TypeLeaseOpened,
			&events.LeaseOpened{JobID: c.JobID, Generation: gen, RootToolCallID: c.RootToolCallID, Mode: c.Mode}),
		env.event(c.RunID, events.TypeJobStatusChanged,
			&events.JobStatusChanged{JobID: c.JobID, From: j.Status, To: events.JobRunning, Reason: c.Mode}),
	)
	return Decision{Events: evs, Result: JobResult{OK: true, JobID: c.JobID, Status: events.JobRunning,
		Generation: gen}}, nil
}

// workerEnded reports whether the worker of a job of run runID, task taskID,
// has ended: its task is terminal, or its credential revoked (and not issued
// again). A lease is not opened for it: it would outlive the credential.
func workerEnded(s *projections.State, runID, taskID string) bool {
	if t, ok := s.Task(runID, taskID); ok && t.Status.Terminal() {
		return true
	}
	cr, ok := s.Credential(runID, taskID)
	return ok && cr.Revoked
}

// LeaseClear clears a job's lease without changing its status (stop,
// dispose, child failure: T5); the job keeps its status until the manager
// moves it, and no proxied call is admitted meanwhile (no-lease).
type LeaseClear struct {
	RunID  string
	JobID  string
	Reason string
}

// Kind implements Command.
func (*LeaseClear) Kind() string { return "lease.clear" }

func (c *LeaseClear) decide(s *projections.State, env *Env) (Decision, error) {
	if longerThan(c.Reason, MaxIDChars) {
		return Decision{}, badParams("lease.clear: reason must be at most %d chars", MaxIDChars)
	}
	j, err := jobOf(s, c.RunID, c.JobID)
	if err != nil {
		return Decision{}, err
	}
	if !j.LeaseActive {
		rej := &events.JobRejected{JobID: c.JobID, Op: "lease.clear", Reason: "no-lease", Status: j.Status,
			Generation: j.Generation, Message: fmt.Sprintf("lease.clear: job %s holds no active lease", c.JobID)}
		return jobRejection(env, c.RunID, rej)
	}
	reason := c.Reason
	if reason == "" {
		reason = "cleared"
	}
	ev := clearLease(s, env, c.RunID, j, reason)
	aborted := ev.Payload.(*events.LeaseCleared).Aborted
	return Decision{Events: []events.Event{ev}, Result: JobResult{OK: true, JobID: c.JobID, Status: j.Status,
		Generation: j.Generation, Aborted: aborted}}, nil
}

// clearLease is the lease.cleared that ends j's active lease: it revokes the
// root into the run's bounded set, or saturates the set when it is full
// (T18), and aborts the requests in flight.
func clearLease(s *projections.State, env *Env, runID string, j projections.JobHeader, reason string) events.Event {
	roots, saturated := s.RevokedRootCount(runID) // NB: not a copy of the roots of every lease cleared before
	p := &events.LeaseCleared{JobID: j.JobID, Generation: j.Generation, RootToolCallID: j.Root, Reason: reason,
		Aborted: j.InFlight}
	// NB: a root revoked already is not added again (the fold), so it does not fill the set.
	if !saturated && roots >= env.Config.JobLimits().RevokedRoots && !s.RootRevoked(runID, j.Root) {
		p.Saturated = true
	}
	return env.event(runID, events.TypeLeaseCleared, p)
}

// JobTransition moves a job to paused or a terminal status (running is
// reached only by lease.open). An active lease is cleared first, in the
// same batch (T5).
type JobTransition struct {
	RunID  string
	JobID  string
	To     string
	Reason string
}

// Kind implements Command.
func (*JobTransition) Kind() string { return "job.transition" }

func (c *JobTransition) decide(s *projections.State, env *Env) (Decision, error) {
	switch c.To {
	case events.JobPaused, events.JobCheckpointed, events.JobTakenOver, events.JobCancelled, events.JobHardStopped,
		events.JobFailed:
	default:
		return Decision{}, badParams("job.transition: to must be paused, checkpointed, taken_over, cancelled, " +
			"hard_stopped or failed")
	}
	if longerThan(c.Reason, MaxIDChars) {
		return Decision{}, badParams("job.transition: reason must be at most %d chars", MaxIDChars)
	}
	j, err := jobOf(s, c.RunID, c.JobID)
	if err != nil {
		return Decision{}, err
	}
	rej := &events.JobRejected{JobID: c.JobID, Op: "job.transition", Status: j.Status, Generation: j.Generation,
		LeaseActive: j.LeaseActive}
	switch {
	case projections.JobTerminal(j.Status):
		rej.Reason = "job-terminal"
		rej.Message = fmt.Sprintf("job.transition: job %s is %s", c.JobID, j.Status)
		return jobRejection(env, c.RunID, rej)
	case c.To == events.JobPaused && j.Status != events.JobRunning:
		rej.Reason = "not-running"
		rej.Message = fmt.Sprintf("job.transition: only a running job pauses; job %s is %s", c.JobID, j.Status)
		return jobRejection(env, c.RunID, rej)
	}
	return Decision{Events: stopJob(s, env, c.RunID, j, c.To, c.Reason),
		Result: JobResult{OK: true, JobID: c.JobID, Status: c.To, Generation: j.Generation}}, nil
}

// stopJob clears j's lease if active, then changes its status.
func stopJob(s *projections.State, env *Env, runID string, j projections.JobHeader, to,
	reason string) []events.Event {
	var evs []events.Event
	if j.LeaseActive {
		evs = append(evs, clearLease(s, env, runID, j, to))
	}
	return append(evs, env.event(runID, events.TypeJobStatusChanged,
		&events.JobStatusChanged{JobID: j.JobID, From: j.Status, To: to, Reason: reason}))
}

// revalidateGrant compares the manager's current grant with job j's (T4).
// On success it returns manifest.revalidated; on failure the failure's
// record, then (for a call) the call's proxy.rejected, then the job's
// hard stop.
func revalidateGrant(s *projections.State, env *Env, runID string, j projections.JobHeader, mode, requestID string,
	raw json.RawMessage) (bool, []events.Event) {
	pg, _, _ := s.JobPage(runID, j.JobID, 0, 0) // the grant alone: none of the calls the job has seen; the run is hot
	full := pg.Job
	want := make([]manifestTool, len(full.Tools))
	for i := range full.Tools {
		want[i] = manifestTool{name: full.Tools[i], fingerprint: full.Fingerprints[i], callable: full.Callables[i]}
	}
	fail := &events.ManifestRevalidationFailed{JobID: j.JobID, Mode: mode, RequestID: requestID}
	got, _, digest, merr := parseManifest(raw, env.Config.JobLimits().ManifestBytes)
	if merr != nil {
		fail.Index, fail.Cause, fail.Want, fail.Got = merr.index, merr.reason, full.ManifestDigest, merr.msg
	} else if i, cause, w, g, ok := revalidate(want, got); !ok {
		fail.Index, fail.Cause, fail.Want, fail.Got = i, cause, w, g
	} else {
		return true, []events.Event{env.event(runID, events.TypeManifestRevalidated, &events.ManifestRevalidated{
			JobID: j.JobID, Mode: mode, RequestID: requestID, Digest: digest,
		})}
	}
	evs := []events.Event{env.event(runID, events.TypeManifestRevalidationFailed, fail)}
	if requestID != "" {
		evs = append(evs, env.event(runID, events.TypeProxyRejected, &events.ProxyRejected{
			JobID: j.JobID, RequestID: requestID, Reason: events.ProxyReasonRevalidationFailed,
			Op: events.ProxyOpRevalidate, Message: fmt.Sprintf("the grant changed at tool %d (%s); the job is "+
				"hard-stopped", fail.Index, fail.Cause),
			Status: j.Status, Generation: j.Generation, LeaseActive: j.LeaseActive, InFlight: j.InFlight,
			Seen: j.Seen,
		}))
		j.InFlight-- // the refused call is no longer in flight when the lease clears
	}
	return false, append(evs, stopJob(s, env, runID, j, events.JobHardStopped,
		events.ProxyReasonRevalidationFailed)...)
}

// LeaseReasonWorkerEnded is the reason of the lease.cleared recorded when a
// lease's worker ends (endWorkerLeases).
const LeaseReasonWorkerEnded = "worker-ended"

// EndedWorker names the worker ev ends: its task (a task's terminal status,
// a shadow task's delegation settled, its credential revoked), or every
// worker of its run (the run terminal, all). ok is false for any other
// event. These are the events after which the broker refuses the worker's
// credential (a re-issue is not one: the task goes on, with a new secret).
// NB: nor is a retry, after which the broker refuses the connections of the
// attempt before (Credential.Attempt): the task, and its job, go on, the job
// under a new lease (the attempt's own is cleared: endedAttempt).
func EndedWorker(ev events.Event) (taskID string, all, ok bool) {
	switch p := ev.Payload.(type) {
	case *events.TaskCompleted:
		return p.TaskID, false, true
	case *events.TaskFailed:
		return p.TaskID, false, true
	case *events.TaskNeedsAttention:
		return p.TaskID, false, true
	case *events.TaskCancelled:
		return p.TaskID, false, true
	case *events.TaskSkipped:
		return p.TaskID, false, true
	case *events.DelegateCompleted:
		return p.SubID, false, true // a shadow task's id is its delegation's
	case *events.DelegateFailed:
		return p.SubID, false, true
	case *events.DelegateTimedOut:
		return p.SubID, false, true
	case *events.DelegateCancelled:
		return p.SubID, false, true
	case *events.CredentialRevoked:
		return p.TaskID, false, true
	case *events.RunCompleted, *events.RunFailed, *events.RunCancelled:
		return "", true, true
	}
	return "", false, false
}

// endedAttempt is EndedWorker, and a retry's task: a retry starts a new
// attempt of the task, and the broker ends the connections of the attempt
// before (Credential.Attempt), so the lease that attempt's worker held ends
// with them. NB: not in EndedWorker: the credential is not ended, the new
// attempt's hello is accepted with it.
func endedAttempt(ev events.Event) (taskID string, all, ok bool) {
	if p, retried := ev.Payload.(*events.TaskRetried); retried {
		return p.TaskID, false, true
	}
	return EndedWorker(ev)
}

// endWorkerLeases follows every event of evs that ends a worker (EndedWorker)
// or its attempt (a retry, endedAttempt) with the lease.cleared of each active lease that worker's job holds, unless
// evs already clear it: a lease never outlives its worker's credential. Left
// open, its admitted calls could still be revalidated and executed, and
// nested calls under its root still granted, until the manager cleared it.
// The clearing is the one lease.clear records (the root revoked, or the
// run's set saturated; the calls aborted, so their in-flight count is
// freed); the job keeps its status, as after lease.clear.
//
// Every decision passes through here (decideIn), so no command that ends a
// worker (task.transition, a budget abort, a delegation's settlement or
// expiry, run.transition, credential.revoke) can forget it. A run holds at
// most one live job, so at most one active lease: the saturation each
// clearing reads from s is exact.
func endWorkerLeases(s *projections.State, env *Env, evs []events.Event) []events.Event {
	var out []events.Event // nil until a lease is cleared
	for i, ev := range evs {
		if out != nil {
			out = append(out, ev)
		}
		taskID, all, ok := endedAttempt(ev)
		if !ok {
			continue
		}
		for _, j := range s.ActiveLeases(ev.Stream) {
			if !all && j.TaskID != taskID || clears(evs, j.JobID) || clears(out, j.JobID) {
				continue
			}
			if out == nil {
				out = append(make([]events.Event, 0, len(evs)+1), evs[:i+1]...)
			}
			out = append(out, clearLease(s, env, ev.Stream, j, LeaseReasonWorkerEnded))
		}
	}
	if out == nil {
		return evs
	}
	return out
}

// clears reports whether evs hold a lease.cleared of job jobID.
func clears(evs []events.Event, jobID string) bool {
	for _, ev := range evs {
		if p, ok := ev.Payload.(*events.LeaseCleared); ok && p.JobID == jobID {
			return true
		}
	}
	return false
}
