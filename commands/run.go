package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// MaxBudgetTotal bounds a run's budgetTotal (events.MaxBudgetTotal).
const MaxBudgetTotal = events.MaxBudgetTotal

// RunCreate opens a run (issue the orchestrator's credential in the same
// batch when OrchestratorDigest is set: the broker mints the secret and
// passes only its sha-256 digest, so the secret never reaches the log).
type RunCreate struct {
	RunID    string // minted when empty
	Team     string
	Workflow string
	Goal     string
	Cwd      string
	// BudgetTotal, BudgetWarning and BudgetAbort are nil when not given;
	// a given 0 is kept (events.RunCreated).
	BudgetTotal        *int64
	BudgetUnlimited    bool
	BudgetWarning      *float64
	BudgetAbort        *float64
	OrchestratorDigest string
}

// Kind implements Command.
func (*RunCreate) Kind() string { return "run.create" }

// RunCreateResult is the answer to run.create. The broker adds the
// orchestrator's token, which the engine never sees.
type RunCreateResult struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
}

func (c *RunCreate) decide(s *projections.State, env *Env) (Decision, error) {
	id := c.RunID
	if id == "" {
		id = newRunID(env)
	}
	switch {
	case !safeRunID(id):
		return Decision{}, badParams("run.create: runId must be 1..%d chars of [A-Za-z0-9_-]", MaxRunIDChars)
	case c.Team == "" || longerThan(c.Team, MaxIDChars):
		return Decision{}, badParams("run.create: team must be 1..%d chars", MaxIDChars)
	}
	if bad := budgetProblem(c.BudgetTotal, c.BudgetWarning, c.BudgetAbort); bad != "" {
		return Decision{}, badParams("run.create: %s", bad)
	}
	if err := checkText(c.Kind(), textField{"goal", c.Goal, MaxBodyChars},
		textField{"workflow", c.Workflow, MaxIDChars}, textField{"cwd", c.Cwd, MaxCwdChars}); err != nil {
		return Decision{}, err
	}
	if _, exists := s.Run(id); exists {
		return Decision{}, badParams("run.create: run %q already exists", id)
	}
	evs := []events.Event{env.event(id, events.TypeRunCreated, &events.RunCreated{
		Team: c.Team, Workflow: c.Workflow, Goal: c.Goal, Cwd: c.Cwd, BudgetTotal: c.BudgetTotal,
		BudgetUnlimited: c.BudgetUnlimited, BudgetWarning: c.BudgetWarning, BudgetAbort: c.BudgetAbort,
	})}
	if c.OrchestratorDigest != "" {
		if !validDigest(c.OrchestratorDigest) {
			return Decision{}, badParams("run.create: orchestrator digest must be 64 lowercase hex chars")
		}
		evs = append(evs, env.event(id, events.TypeCredentialIssued, &events.CredentialIssued{
			TaskID: events.OrchestratorKey, Role: events.RoleOrchestrator, Digest: c.OrchestratorDigest,
		}))
	}
	return Decision{Events: evs, Result: RunCreateResult{RunID: id, Status: string(projections.RunQueued)}}, nil
}

// budgetProblem says what makes a run's budget one run.create refuses, "" when there is nothing: an imported
// run.created is held to the same.
func budgetProblem(total *int64, warning, abort *float64) string {
	switch {
	case total != nil && !events.BudgetTotalOK(*total):
		return fmt.Sprintf("budgetTotal must be an integer in 0..%d", int64(MaxBudgetTotal))
	case !fraction(warning) || !fraction(abort):
		return "budgetWarning and budgetAbort must be fractions in [0,1]"
	}
	return ""
}

func fraction(f *float64) bool { return f == nil || events.BudgetFractionOK(*f) }

// runTransitions is the D§2.2 machine (from === to is always allowed).
var runTransitions = map[projections.RunStatus][]projections.RunStatus{
	projections.RunQueued: {projections.RunPlanning, projections.RunRunning, projections.RunCancelled,
		projections.RunFailed},
	projections.RunPlanning: {projections.RunRunning, projections.RunBlocked, projections.RunCancelled,
		projections.RunFailed},
	projections.RunRunning: {projections.RunBlocked, projections.RunCompleted, projections.RunFailed,
		projections.RunCancelled},
	projections.RunBlocked:   {projections.RunRunning, projections.RunCancelled, projections.RunFailed},
	projections.RunCompleted: {projections.RunRunning, projections.RunCancelled},
	projections.RunFailed:    {projections.RunRunning, projections.RunCancelled},
	projections.RunCancelled: {projections.RunRunning},
}

// RunTransition moves a run along the D§2.2 machine. A run that becomes
// terminal (completed, failed, cancelled) records a cancel intent for every
// delegation still in flight (D9), and times out the question of every task
// parked on one, which resumes (ask_end.go), in the same batch.
type RunTransition struct {
	RunID   string
	To      string
	Summary string
	Reason  string
}

// Kind implements Command.
func (*RunTransition) Kind() string { return "run.transition" }

func (c *RunTransition) decide(s *projections.State, env *Env) (Decision, error) {
	if err := checkText(c.Kind(), textField{"summary", c.Summary, MaxStatusTextChars},
		textField{"reason", c.Reason, MaxStatusTextChars}); err != nil {
		return Decision{}, err
	}
	run, ok := s.Run(c.RunID)
	if !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	typ, ok := events.RunStatusType(c.To)
	if !ok {
		return Decision{}, badParams("run.transition: %q is not a run status", c.To)
	}
	to := projections.RunStatus(c.To)
	if to != run.Status && !contains(runTransitions[run.Status], to) {
		return Decision{}, badParams("run.transition: run %s cannot go from %s to %s", c.RunID, run.Status, to)
	}
	evs := []events.Event{env.event(c.RunID, typ,
		runStatusPayload(to, events.RunStatusChanged{Summary: c.Summary, Reason: c.Reason}))}
	if to.Stale() {
		evs = append(evs, cancelInFlight(s, env, c.RunID, fmt.Sprintf("run %s", to))...)
		evs = append(evs, closeRunQuestions(s, env, c.RunID)...)
	}
	return Decision{Events: evs, Result: map[string]any{"ok": true, "runId": c.RunID, "status": c.To}}, nil
}

// windsDown: a run ends through a terminal status, reached from running, or
// from queued, planning or blocked directly; → running from those is how a
// run gets to complete. The rest — the same status again, → planning, →
// blocked, and → running from a terminal status (a reopened run) — can come
// round again, and is measured against the run's quotas (quota.go).
func (c *RunTransition) windsDown(s *projections.State) bool {
	run, ok := s.Run(c.RunID)
	if !ok {
		return true // refused, nothing recorded
	}
	to := projections.RunStatus(c.To)
	return to != run.Status && (to.Stale() || to == projections.RunRunning && !run.Status.Stale())
}

// clippedTo implements statusTexter.
func (c *RunTransition) clippedTo(n int) Command {
	short := *c
	if !clipTexts(n, &short.Summary, &short.Reason) {
		return nil
	}
	return &short
}

// runStatusPayload gives the payload type of run.<to>.
func runStatusPayload(to projections.RunStatus, p events.RunStatusChanged) any {
	switch to {
	case projections.RunQueued:
		return (*events.RunQueued)(&p)
	case projections.RunPlanning:
		return (*events.RunPlanning)(&p)
	case projections.RunRunning:
		return (*events.RunRunning)(&p)
	case projections.RunBlocked:
		return (*events.RunBlocked)(&p)
	case projections.RunCompleted:
		return (*events.RunCompleted)(&p)
	case projections.RunFailed:
		return (*events.RunFailed)(&p)
	}
	return (*events.RunCancelled)(&p)
}

// cancelInFlight records delegate.cancel_requested for every in-flight
// delegation of the run not already asked to cancel.
func cancelInFlight(s *projections.State, env *Env, runID, reason string) []events.Event {
	var evs []events.Event
	// NB: the delegations in flight only (at most the slot pool), never every delegation the run has settled.
	s.EachInFlight(runID, func(d projections.Delegation) bool {
		if !d.CancelRequested {
			evs = append(evs, env.event(runID, events.TypeDelegateCancelRequested,
				&events.DelegateCancelRequested{TaskID: d.ParentTaskID, SubID: d.SubID, Reason: reason}))
		}
		return true
	})
	return evs
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
