package commands

import (
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// CredentialIssue records a worker credential for a task (D§7.8) by the
// sha-256 digest of its secret. The broker mints the secret, sets Digest and
// answers the secret to its caller only; the log never sees it.
//
// It is refused (forbidden) for a shadow task at or beyond maxDepth (SPEC
// §4.1 step 7, D7): a grandchild at the depth limit cannot delegate, so it
// gets no credential at all.
type CredentialIssue struct {
	RunID  string
	TaskID string
	// Digest is the lowercase hex sha-256 of the secret. ParseCommand leaves
	// it empty: the broker sets it after minting the secret.
	Digest string
}

// MaxHelloTaskIDUnits is the longest task id a worker's hello carries, in UTF-16 units as JavaScript's .length
// counts them (pi-crew's bound, broker/wire's maxCredentialLen).
const MaxHelloTaskIDUnits = 256

// Kind implements Command.
func (*CredentialIssue) Kind() string { return "credential.issue" }

// CredentialResult is the answer to credential.issue and credential.revoke.
// The broker adds the token to credential.issue's answer.
type CredentialResult struct {
	OK      bool   `json:"ok"`
	TaskID  string `json:"taskId"`
	Role    string `json:"role"`
	Revoked bool   `json:"revoked,omitempty"`
}

func (c *CredentialIssue) decide(s *projections.State, env *Env) (Decision, error) {
	if !validDigest(c.Digest) {
		return Decision{}, badParams("credential.issue: digest must be 64 lowercase hex chars (set by the broker)")
	}
	if c.TaskID == events.OrchestratorKey {
		return Decision{}, badParams("credential.issue: the orchestrator credential is issued by run.create")
	}
	run, ok := s.Run(c.RunID)
	if !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	if run.Status.Stale() {
		return Decision{}, reject(CodeForbidden, "run-terminal", "credential.issue: run %s is %s",
			c.RunID, run.Status)
	}
	t, ok := s.Task(c.RunID, c.TaskID)
	if !ok {
		return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.TaskID, c.RunID)
	}
	// NB: only an imported task's id can be past it (task.create takes ASCII ids); checked after the look-up, so
	// that an unknown task is no-task whatever its id.
	if len(c.TaskID) > MaxHelloTaskIDUnits { // NB: no more units than bytes: most ids need no count
		if n := utf16Units(c.TaskID); n > MaxHelloTaskIDUnits {
			return Decision{}, badParams("credential.issue: the task's id is %d UTF-16 units, more than the %d a "+
				"hello carries", n, MaxHelloTaskIDUnits)
		}
	}
	if limit := env.Config.MaxDepth; t.Shadow() && t.EffectiveDepth() >= limit {
		return Decision{}, reject(CodeForbidden, events.ReasonDepthExceeded,
			"credential.issue: task %s is at depth %d and maxDepth is %d; a grandchild at the depth limit "+
				"cannot delegate", c.TaskID, t.EffectiveDepth(), limit)
	}
	ev := env.event(c.RunID, events.TypeCredentialIssued, &events.CredentialIssued{
		TaskID: c.TaskID, Role: events.RoleWorker, Digest: c.Digest,
	})
	return Decision{Events: []events.Event{ev}, Result: CredentialResult{OK: true, TaskID: c.TaskID,
		Role: events.RoleWorker}}, nil
}

// CredentialRevoke revokes the current credential of a key (a task id, or
// events.OrchestratorKey); the broker refuses it from the next frame on.
// Revoking a key with no live credential is bad-params. It ends the worker:
// the lease its job holds is cleared (endWorkerLeases), and the question its
// task is parked on closes in the same batch (asker-ended), the task resuming
// as at the deadline — nobody can answer it any more (wait.resolve is the
// worker's), and left pending it would keep the run's waitState up to an hour
// past the credential.
type CredentialRevoke struct {
	RunID  string
	TaskID string
	Reason string
}

// Kind implements Command.
func (*CredentialRevoke) Kind() string { return "credential.revoke" }

func (c *CredentialRevoke) decide(s *projections.State, env *Env) (Decision, error) {
	if longerThan(c.Reason, MaxIDChars) {
		return Decision{}, badParams("credential.revoke: reason must be at most %d chars", MaxIDChars)
	}
	if _, ok := s.Run(c.RunID); !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	cr, ok := s.Credential(c.RunID, c.TaskID)
	if !ok || cr.Revoked {
		return Decision{}, badParams("credential.revoke: %q has no live credential in run %q", c.TaskID, c.RunID)
	}
	evs := []events.Event{env.event(c.RunID, events.TypeCredentialRevoked, &events.CredentialRevoked{
		TaskID: c.TaskID, Digest: cr.Digest, Reason: c.Reason,
	})}
	if t, ok := s.Task(c.RunID, c.TaskID); ok {
		evs = append(evs, expireParked(s, env, c.RunID, t, events.AskReasonAskerEnded)...)
	}
	return Decision{Events: evs, Result: CredentialResult{OK: true, TaskID: c.TaskID, Role: cr.Role,
		Revoked: true}}, nil
}
