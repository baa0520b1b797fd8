package broker

import (
	"encoding/json"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Hello answers (D§7.4). Every failure closes the connection. errNotReadBack is also the answer to a request whose
// credential's run the log cannot give back (credentialEndedAnswer).
var (
	errHelloRejected = wire.NewError(wire.CodeAuth, wire.MsgHelloRejected)
	errNotReadBack   = wire.NewError(wire.CodeReplayFailed, "")
	errStaleToken    = wire.NewError(wire.CodeStaleToken, wire.MsgStaleToken)
	errRunTerminal   = wire.NewError(wire.CodeStaleToken, wire.MsgRunTerminal)
	errTaskTerminal  = wire.NewError(wire.CodeStaleToken, wire.MsgTaskTerminal)
	errRevoked       = wire.NewError(wire.CodeRevoked, wire.MsgTokenRevoked)
)

// adminHello is the admin form of hello: {"protocol":1,"role":"admin","token":…}, with no runId or taskId. The
// role field is otherwise ignored (pi-crew derives the role from the token), so a client cannot claim admin: it
// still needs the admin token.
type adminHello struct {
	Protocol json.RawMessage `json:"protocol"`
	Role     string          `json:"role"`
	Token    *string         `json:"token"`
	RunID    *string         `json:"runId"`
	TaskID   *string         `json:"taskId"`
}

// authenticate decides a hello. It returns the identity, or the *wire.Error to send before closing.
func (s *Server) authenticate(params json.RawMessage) (identity, *wire.Error) {
	var a adminHello
	if json.Unmarshal(params, &a) == nil && a.Role == events.RoleAdmin && a.RunID == nil && a.TaskID == nil {
		return s.authenticateAdmin(a)
	}
	h, err := wire.DecodeHello(params)
	if err != nil {
		return identity{}, errHelloRejected
	}
	digest := digestOf(h.Token)
	// NB: no Warm here. A hello is not yet authenticated: it must cost no read of the log, so a cold run is
	// checked against its summary alone (classifyCold), and is read back only for a request its credential may make.
	var (
		id  identity
		bad *wire.Error
	)
	s.eng.Read(func(st *projections.State) { id, bad = classify(st, h.RunID, h.TaskID, digest) })
	return id, bad
}

func (s *Server) authenticateAdmin(a adminHello) (identity, *wire.Error) {
	var protocol float64
	if json.Unmarshal(a.Protocol, &protocol) != nil || protocol != wire.ProtocolVersion || a.Token == nil ||
		*a.Token == "" || wire.UTF16Len(*a.Token) > 256 || s.opts.AdminDigest == "" {
		return identity{}, errHelloRejected
	}
	if !sameDigest(digestOf(*a.Token), s.opts.AdminDigest) {
		return identity{}, errHelloRejected
	}
	return identity{role: events.RoleAdmin}, nil
}

// classify resolves a run-scoped hello against the credentials in st (D§7.4 [idx], SPEC §5):
//
//  1. the run's orchestrator credential matches → orchestrator, whatever taskId the hello names (pi-crew checks
//     the orchestrator token first; GS-20(c));
//  2. the credential of (runId, taskId) matches → worker, unless the run is completed/failed/cancelled
//     (stale-token "run is already terminal") or the task is terminal (stale-token "task is already terminal");
//  3. the secret is the revoked secret of either key → revoked;
//  4. no match, but the run has that task → stale-token — wrong, superseded and never-issued tokens look the same
//     to the broker (D§7.4 [idx], GS-19: pi-crew's client re-issues on it);
//  5. anything else → auth "hello rejected".
//
// NB: an unknown run, an unknown task and the orchestrator key of any run (known or not) with a wrong token all
// answer auth "hello rejected", so a hello cannot tell whether a run exists. Only a caller that already names an
// existing run and one of its tasks learns that the pair exists (stale-token): that is pi-crew's contract, which its
// client depends on, and it reveals nothing a caller could enumerate without knowing the run id.
func classify(st *projections.State, runID, taskID, digest string) (identity, *wire.Error) {
	switch _, ok, err := st.LookupRun(runID); {
	case err != nil:
		// NB: a run whose summary the log cannot give back is not known to be unknown, nor its token to be bad: the
		// answer is every other request's for it, and a run the log does not hold answers alike meanwhile (its
		// absence is read from the same index), so it tells nobody whether the run exists.
		return identity{}, errNotReadBack
	case !ok:
		return identity{}, errHelloRejected
	}
	// NB: a known run that is not hot is cold, and IsHot reads nothing: the summary is not read again.
	if !st.IsHot(runID) {
		return classifyCold(st, runID, digest)
	}
	orch, hasOrch := st.Credential(runID, events.OrchestratorKey)
	if hasOrch && !orch.Revoked && sameDigest(orch.Digest, digest) {
		return identity{role: events.RoleOrchestrator, runID: runID, key: events.OrchestratorKey, digest: digest}, nil
	}
	cred, hasCred := st.Credential(runID, taskID)
	if hasCred && taskID != events.OrchestratorKey && !cred.Revoked && sameDigest(cred.Digest, digest) {
		if bad := workerEnded(st, runID, taskID); bad != nil {
			return identity{}, bad
		}
		_, attempt, _ := st.TaskAttempt(runID, taskID)
		return identity{role: events.RoleWorker, runID: runID, taskID: taskID, key: taskID, digest: digest,
			attempt: attempt}, nil
	}
	if hasOrch && orch.Revoked && sameDigest(orch.Digest, digest) ||
		hasCred && cred.Revoked && sameDigest(cred.Digest, digest) {
		return identity{}, errRevoked
	}
	if _, hasTask := st.Task(runID, taskID); hasTask {
		return identity{}, errStaleToken
	}
	return identity{}, errHelloRejected
}

// classifyCold is classify for a cold run (commands/tier.go), from what memory keeps of it: its Run record and its
// orchestrator credential (State.Credential reads that one from the summary). Any other key's credential, and the
// run's tasks, are only in the log, and re-folding the run there before the caller is authenticated would let a
// client holding no valid token make the daemon read runs back at will. So steps 1 and 3 for the orchestrator key
// are as above, and every other hello naming a cold run answers auth "hello rejected", as for an unknown run: a
// cold run has ended long ago (a worker's hello would be refused whatever its token, "run is already terminal"),
// and the answer still tells nobody whether the run or a task of it exists.
func classifyCold(st *projections.State, runID, digest string) (identity, *wire.Error) {
	orch, ok, err := st.LookupCredential(runID, events.OrchestratorKey)
	switch {
	case err != nil:
		return identity{}, errNotReadBack // its summary, read again, could not be: not a token known to be bad
	case ok && !orch.Revoked && sameDigest(orch.Digest, digest):
		return identity{role: events.RoleOrchestrator, runID: runID, key: events.OrchestratorKey, digest: digest}, nil
	case ok && orch.Revoked && sameDigest(orch.Digest, digest):
		return identity{}, errRevoked
	}
	return identity{}, errHelloRejected
}

// workerEnded is the answer to a worker whose run or task has ended, nil while both go on.
func workerEnded(st *projections.State, runID, taskID string) *wire.Error {
	if status, ok := st.RunStatus(runID); !ok || status.Stale() {
		return errRunTerminal
	}
	if status, ok := st.TaskStatus(runID, taskID); ok && status.Terminal() {
		return errTaskTerminal
	}
	return nil
}

// recheck re-validates an authenticated connection's credential against the newest published state; it runs
// before every request, and the feed runs it for a run's connections when the run's credentials, status or task
// statuses change (closeEnded), so a revocation takes effect at the connection's next frame. The check is by
// secret: a re-issued credential for the same key does not rescue a connection that used the old secret; and a
// worker's by attempt: a retry of its task (which makes an ended task live again) does not rescue the connection of
// the attempt before.
func (s *Server) recheck(id identity) *wire.Error {
	var bad *wire.Error
	s.eng.Read(func(st *projections.State) { bad = checkCredential(st, id) })
	return bad
}

// checkCredential is recheck against st.
func checkCredential(st *projections.State, id identity) *wire.Error {
	c := id.credential()
	if c == nil {
		return nil // the admin digest is daemon configuration, not state; it changes only with a restart
	}
	return credentialEndedAnswer(commands.CheckCredential(st, *c))
}

// credential is the credential id authenticated with, for the engine to check again when it decides a request
// (commands.Request.Credential); nil for the admin.
func (id identity) credential() *commands.Credential {
	if id.role == events.RoleAdmin {
		return nil
	}
	c := &commands.Credential{RunID: id.runID, Key: id.key, Digest: id.digest}
	if id.role == events.RoleWorker {
		c.TaskID, c.Attempt, c.Since = id.taskID, id.attempt, id.since
	}
	return c
}

// credentialEndedAnswer is the answer to a request whose credential has ended, nil while it is live: a worker's
// run or task that ended answers as its hello would (stale-token), any other end revoked.
func credentialEndedAnswer(end commands.CredentialEnd) *wire.Error {
	switch end {
	case commands.CredentialLive:
		return nil
	case commands.CredentialRunEnded:
		return errRunTerminal
	case commands.CredentialTaskEnded:
		return errTaskTerminal
	case commands.CredentialUnread:
		// NB: the run's summary could not be read back from the log (the engine logged it with the run's id): the
		// credential has not ended, so this is no closing code.
		return errNotReadBack
	}
	return errRevoked
}
