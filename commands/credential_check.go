package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/projections"
)

// Credential is the secret a request authenticated with, by its digest:
// the engine checks it again against the state it decides the request on
// (Request.Credential). The broker checks every request's credential before
// it hands the request on, against the state published then; a revocation,
// or the end of the worker's task or run, committed between that check and
// the decision would otherwise let the request through after it.
type Credential struct {
	RunID  string
	Key    string // the task id, or events.OrchestratorKey
	Digest string
	// TaskID is a worker's task, "" for the orchestrator: a worker's
	// credential ends with its task and its run as well.
	TaskID string
	// Attempt is a worker's task's retries (projections.Task.Retries) when
	// its hello was authenticated: a retry starts a new attempt, and the
	// credential ends for the attempt before as if its task had ended,
	// whether or not the task ended first (the secret stays the task's: a
	// new hello with it is the new attempt's). NB: by count, not status: a
	// retry makes an ended task live again, so an end undone before the
	// broker acted on it would leave the ended attempt acting for the next.
	Attempt int
	// Since is the position of the state a worker's hello was bound on (0: not known, and not checked): the run's
	// end after it ends the credential even once the run is reopened, as the end of its task does when the task is
	// retried. NB: the broker ends the connections a run's end ends as its feed reaches the end; a reopening
	// published before then would otherwise have the run's newest status admit them in between.
	Since uint64
}

// CredentialEnd is why a credential no longer admits its holder.
type CredentialEnd uint8

const (
	CredentialLive      CredentialEnd = iota
	CredentialRevoked                 // revoked, replaced by another secret, or never issued
	CredentialRunEnded                // a worker's run is terminal (or cold: it ended long ago)
	CredentialTaskEnded               // a worker's task is terminal, or was retried since (Credential.Attempt)
	// CredentialUnread: the run is cold and its summary (or the records holding the credential) could not be read
	// back from the log (projections.ErrNotReadBack), so the credential is known neither to hold nor to have ended.
	CredentialUnread
)

// CheckCredential is what s says of c.
func CheckCredential(s *projections.State, c Credential) CredentialEnd {
	status, found, err := s.LookupRunStatus(c.RunID)
	if err != nil {
		// NB: not revoked, which ends the holder's connections as if its credential were gone for good.
		return CredentialUnread
	}
	worker := c.TaskID != ""
	if worker && found && !s.IsHot(c.RunID) {
		// A cold run (found, and not in memory: its summary is not read
		// again). NB: before Credential: a cold run's worker credentials are
		// in the log only, and a run is made cold long after it ended.
		return CredentialRunEnded
	}
	cred, ok, err := s.LookupCredential(c.RunID, c.Key)
	if err != nil {
		return CredentialUnread // NB: its summary read again, or its records read back, failed: not revoked
	}
	if !ok || cred.Revoked || !SameDigest(cred.Digest, c.Digest) {
		return CredentialRevoked
	}
	if !worker {
		return CredentialLive
	}
	if !found || status.Stale() || c.Since != 0 && s.RunEndedAt(c.RunID) > c.Since {
		return CredentialRunEnded
	}
	if status, retries, ok := s.TaskAttempt(c.RunID, c.TaskID); ok && (status.Terminal() || retries != c.Attempt) {
		return CredentialTaskEnded
	}
	return CredentialLive
}

// CredentialEndedError answers a request whose credential had ended in the
// state it would have been decided on: nothing was decided or recorded.
type CredentialEndedError struct {
	End CredentialEnd
}

func (e *CredentialEndedError) Error() string {
	return "commands: the credential has ended (" + e.reason() + "); nothing was recorded"
}

// reason names the end for the error and the engine's observer, as the
// answer's code and message do for the client.
func (e *CredentialEndedError) reason() string {
	switch e.End {
	case CredentialRunEnded:
		return "run-terminal"
	case CredentialTaskEnded:
		return "task-terminal"
	}
	return "revoked"
}

// credentialEnded is the error of req against s, nil when req carries no
// credential or its credential is live.
func credentialEnded(s *projections.State, req *Request) error {
	if req.Credential == nil {
		return nil
	}
	switch end := CheckCredential(s, *req.Credential); end {
	case CredentialLive:
	case CredentialUnread:
		return fmt.Errorf("commands: the credential of run %s cannot be checked: %w", req.Credential.RunID,
			projections.ErrNotReadBack)
	default:
		return &CredentialEndedError{End: end}
	}
	return nil
}
