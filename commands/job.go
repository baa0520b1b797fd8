package commands

import (
	"encoding/json"
	"fmt"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Jobs (D§9): a manager (the run's orchestrator, or the admin) delegates a
// bounded job to a worker (a task of the run) with an explicit grant of its
// own tools; the worker calls them through the proxy (job_proxy.go) while
// the job holds an executor lease (job_lease.go). Every refusal of a rule
// records the inputs the rule saw: job.rejected for the manager's
// operations, proxy.rejected for proxy messages.

// Bounds of the job commands' ids.
const (
	MaxJobsPerRun     = 64
	MaxJobIDChars     = 128
	MaxRootChars      = 512
	MaxRequestIDChars = 128 // T8
)

// JobCreate creates a job with its grant (T1–T3) and its nonce (T7): the
// broker mints the nonce, sets NonceDigest and answers the nonce to its
// caller only; the log keeps the digest.
type JobCreate struct {
	RunID  string
	JobID  string
	TaskID string
	Tools  json.RawMessage
	// NonceDigest is the lowercase hex sha-256 of the nonce. ParseCommand
	// leaves it empty: the broker sets it after minting the nonce.
	NonceDigest string
}

// Kind implements Command.
func (*JobCreate) Kind() string { return "job.create" }

// JobResult answers the job commands.
type JobResult struct {
	OK             bool   `json:"ok"`
	JobID          string `json:"jobId"`
	Status         string `json:"status"`
	Generation     int64  `json:"generation,omitempty"`
	Tools          int    `json:"tools,omitempty"`
	ManifestDigest string `json:"manifestDigest,omitempty"`
	Aborted        int    `json:"aborted,omitempty"`
	Cancelled      int    `json:"cancelled,omitempty"`
}

// jobRejection records a refused manager operation (job.rejected) and
// answers it policy-denied with the same reason.
func jobRejection(env *Env, runID string, p *events.JobRejected) (Decision, error) {
	ev := env.event(runID, events.TypeJobRejected, p)
	return Decision{Events: []events.Event{ev}}, reject(CodePolicyDenied, p.Reason, "%s", p.Message)
}

// jobRun checks the run of a job command: it exists.
func jobRun(s *projections.State, runID string) (projections.Run, error) {
	run, ok := s.Run(runID)
	if !ok {
		return run, reject(CodeNoManifest, "no-manifest", "run %q not found", runID)
	}
	return run, nil
}

// jobOf finds a job of the run, or refuses no-job (nothing recorded: there
// is no job to record it on).
func jobOf(s *projections.State, runID, jobID string) (projections.JobHeader, error) {
	j, ok := s.JobHeader(runID, jobID)
	if ok {
		return j, nil // a job's run exists
	}
	if _, err := jobRun(s, runID); err != nil {
		return j, err
	}
	return j, reject(CodeBadParams, "no-job", "job %q not found in run %q", jobID, runID)
}

func validJobID(op, id string) error {
	if !safeID(id) || len(id) > MaxJobIDChars {
		return badParams("%s: jobId must be 1..%d chars of [A-Za-z0-9_-]", op, MaxJobIDChars)
	}
	return nil
}

func (c *JobCreate) decide(s *projections.State, env *Env) (Decision, error) {
	if !validDigest(c.NonceDigest) {
		return Decision{}, badParams("job.create: nonce digest must be 64 lowercase hex chars (set by the broker)")
	}
	if err := validJobID("job.create", c.JobID); err != nil {
		return Decision{}, err
	}
	run, err := jobRun(s, c.RunID)
	if err != nil {
		return Decision{}, err
	}
	if run.Status.Stale() {
		return Decision{}, reject(CodeForbidden, "run-terminal", "job.create: run %s is %s", c.RunID, run.Status)
	}
	if _, ok := s.Task(c.RunID, c.TaskID); !ok {
		return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.TaskID, c.RunID)
	}
	if _, ok := s.JobHeader(c.RunID, c.JobID); ok {
		return Decision{}, badParams("job.create: job %q already exists", c.JobID)
	}
	rej := &events.JobRejected{JobID: c.JobID, Op: "create"}
	n, live := s.JobCount(c.RunID)
	switch {
	case n >= MaxJobsPerRun:
		rej.Reason, rej.Limit = "job-limit", MaxJobsPerRun
		rej.Message = fmt.Sprintf("job.create: run %s already holds %d jobs", c.RunID, n)
		return jobRejection(env, c.RunID, rej)
	case live != "":
		rej.Reason, rej.Live = "job-active", live
		rej.Message = fmt.Sprintf("job.create: job %s is still live; one live job at a time", live)
		return jobRejection(env, c.RunID, rej)
	case workerEnded(s, c.RunID, c.TaskID):
		// NB: such a job could never get a lease (lease.open refuses it, worker-ended) and would hold the run's one
		// live-job place until the manager moved it.
		rej.Reason = LeaseReasonWorkerEnded
		rej.Message = fmt.Sprintf("job.create: the worker of task %s has ended: its task is terminal or its "+
			"credential revoked", c.TaskID)
		return jobRejection(env, c.RunID, rej)
	}
	limit := env.Config.JobLimits().ManifestBytes
	tools, size, digest, merr := parseManifest(c.Tools, limit)
	if merr != nil {
		rej.Reason, rej.Tool, rej.Bytes = merr.reason, merr.tool, merr.bytes
		if merr.index >= 0 {
			rej.Index = &merr.index
		}
		if merr.reason == reasonManifestTooLarge {
			rej.Limit = limit
		}
		rej.Message = "job.create: " + merr.msg
		return jobRejection(env, c.RunID, rej)
	}
	p := &events.JobCreated{
		JobID: c.JobID, TaskID: c.TaskID, Tools: make([]string, len(tools)), Fingerprints: make([]string, len(tools)),
		Callables: make([]string, len(tools)), ManifestBytes: size, ManifestDigest: digest,
		NonceDigest: c.NonceDigest,
	}
	for i, t := range tools {
		p.Tools[i], p.Fingerprints[i], p.Callables[i] = t.name, t.fingerprint, t.callable
		if t.readOnly {
			p.ReadOnly = append(p.ReadOnly, t.name)
		}
	}
	ev := env.event(c.RunID, events.TypeJobCreated, p)
	return Decision{Events: []events.Event{ev}, Result: JobResult{
		OK: true, JobID: c.JobID, Status: events.JobStarting, Tools: len(tools), ManifestDigest: digest,
	}}, nil
}

// JobRootsReset empties the run's revoked-root set and lifts its
// saturation: the manager session's shutdown (T18).
type JobRootsReset struct {
	RunID string
}

// Kind implements Command.
func (*JobRootsReset) Kind() string { return "job.roots_reset" }

func (c *JobRootsReset) decide(s *projections.State, env *Env) (Decision, error) {
	if _, err := jobRun(s, c.RunID); err != nil {
		return Decision{}, err
	}
	roots, saturated := s.RevokedRootCount(c.RunID)
	res := map[string]any{"ok": true, "roots": roots, "saturated": saturated}
	if roots == 0 && !saturated {
		return Decision{Result: res}, nil
	}
	ev := env.event(c.RunID, events.TypeJobRootsReset, &events.JobRootsReset{Roots: roots, Saturated: saturated})
	return Decision{Events: []events.Event{ev}, Result: res}, nil
}
