package commands

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Parameter bounds of delegate.request (D§4.1, SPEC §4.1 step 2).
const (
	MaxPromptChars      = events.MaxPromptChars
	MaxDescriptionChars = events.MaxDescriptionChars
	MaxModelChars       = events.MaxModelChars
	MaxTurnsLimit       = 200
	MaxBudgetTokens     = 100_000_000
	DefaultTimeoutSec   = 900
	MaxTimeoutSec       = events.MaxTimeoutSec
	DefaultDelegateRole = "explorer"
	// rejectedMessageChars bounds delegate.rejected's message, as pi-crew.
	rejectedMessageChars = events.MaxRejectedMessageChars
	// MaxRecordedRoleChars bounds the requested role as crewlog records and
	// quotes it (events.MaxRecordedRoleChars).
	MaxRecordedRoleChars = events.MaxRecordedRoleChars
)

// Roles a grandchild may take (D§4.3 check 1) and those that can write.
var (
	delegateRoles = []string{"explorer", "analyst", "executor"}
	writeRoles    = []string{"executor", "test-engineer"}
)

// DelegateRequest is a worker's request to spawn a grandchild (SPEC §4.1).
// RunID and TaskID (the parent) come from the worker's task-scoped
// credential, never from the params. Optional params are pointers: absent
// and zero are different things to the policy.
type DelegateRequest struct {
	RunID        string
	TaskID       string
	Prompt       string
	Description  *string
	Role         *string
	Model        *string
	MaxTurns     *int
	BudgetTokens *int64
	TimeoutSec   *float64
	// Untrusted marks an escalation context the trust gate refuses
	// (D§4.3 check 2). crewlog's broker never sets it: enabling nesting is
	// the trust decision.
	Untrusted bool
}

// Kind implements Command.
func (*DelegateRequest) Kind() string { return "delegate.request" }

// DelegateResult is the answer to an admitted request (D§7.5).
type DelegateResult struct {
	OK                bool    `json:"ok"`
	GrandchildTaskRef string  `json:"grandchildTaskRef"`
	ChildDepth        int     `json:"childDepth"`
	TimeoutSec        float64 `json:"timeoutSec"`
}

func (c *DelegateRequest) decide(s *projections.State, env *Env) (Decision, error) {
	// Step 2: params. No event: nothing about the request is trustworthy.
	if err := c.validate(); err != nil {
		return Decision{}, err
	}
	// Step 3: the run must exist. No event.
	run, ok := s.Run(c.RunID)
	if !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	cfg := env.Config
	role := DefaultDelegateRole
	if c.Role != nil {
		role = truncate(*c.Role, MaxRecordedRoleChars)
	}
	// Everything the decision records, in one allocation.
	rec := new(delegateRecords)
	policy := &rec.policy
	*policy = events.Policy{
		NestingEnabled: cfg.NestingEnabled, Trusted: !c.Untrusted, Role: role,
		MaxDepth: cfg.MaxDepth, Held: s.SlotsHeld(), Capacity: cfg.MaxSlots,
		UnmeteredDelegates: cfg.UnmeteredDelegates, CatalogSize: catalogSize(cfg.ModelCatalog),
		Serialize: cfg.SerializeOnPathOverlap, TimeoutSec: c.timeout(),
	}
	if cfg.BudgetMode != events.BudgetModePicrew {
		policy.BudgetMode = cfg.BudgetMode
	}
	if c.Model != nil {
		policy.Model = strings.TrimSpace(*c.Model)
	}
	if c.BudgetTokens != nil {
		policy.Requested = *c.BudgetTokens
	}

	// Step 4: the capability gate, before a subId exists.
	if !cfg.NestingEnabled {
		rec.rejected = events.DelegateRejected{
			TaskID: c.TaskID, Reason: events.ReasonNestingDisabled,
			Message: truncate(nestingDisabledPolicyMessage, rejectedMessageChars), Policy: policy,
		}
		evs := append(rec.events[:0], env.event(c.RunID, events.TypeDelegateRejected, &rec.rejected))
		return Decision{Events: evs}, reject(CodePolicyDisabled, events.ReasonNestingDisabled,
			"%s", nestingDisabledMessage)
	}

	// Step 5: mint the subId; requested and the decision commit together.
	// NB: the subId is the tail of the shadow task's default title, one
	// string for both.
	title := defaultTitlePrefix + "gc-" + env.NewID()
	subID := title[len(defaultTitlePrefix):]
	rec.requested = events.DelegateRequested{TaskID: c.TaskID, SubID: subID, Role: role}
	evs := append(rec.events[:0], env.event(c.RunID, events.TypeDelegateRequested, &rec.requested))
	deny := func(code, reason, wireMsg, eventMsg string) (Decision, error) {
		rec.rejected = events.DelegateRejected{
			TaskID: c.TaskID, SubID: subID, Reason: reason, Message: truncate(eventMsg, rejectedMessageChars),
			Policy: policy,
		}
		evs = append(evs, env.event(c.RunID, events.TypeDelegateRejected, &rec.rejected))
		return Decision{Events: evs}, reject(code, reason, "%s", wireMsg)
	}

	// Step 6: policy checks, in order.
	parent, ok := s.Task(c.RunID, c.TaskID)
	if !ok {
		msg := fmt.Sprintf("task '%s' not found", c.TaskID)
		return deny(CodeNoTask, events.ReasonNoTask, msg, msg)
	}
	policy.ParentStatus, policy.ParentRole = string(parent.Status), parent.Role
	policy.Depth = parent.EffectiveDepth()
	policy.ChildDepth = policy.Depth + 1
	if parent.Status != projections.TaskRunning {
		return deny(CodeBadParams, events.ReasonParentNotRunning,
			fmt.Sprintf("delegate: parent task '%s' is %s, not running", c.TaskID, parent.Status),
			fmt.Sprintf("task is %s", parent.Status))
	}
	// A run that ended takes its tasks with it (GS-14): no grandchild may
	// start after the run's delegations were asked to cancel.
	if run.Status.Stale() {
		return deny(CodeBadParams, events.ReasonParentNotRunning,
			fmt.Sprintf("delegate: run '%s' is %s, its tasks cannot delegate", c.RunID, run.Status),
			fmt.Sprintf("run is %s", run.Status))
	}
	// A delegation asked to cancel is on its way out, as its run's are: a
	// grandchild it started now would outlive it, holding a slot and a
	// reservation that nobody asked to cancel.
	if parent.Shadow() {
		if d, ok := s.Delegation(c.RunID, c.TaskID); ok && d.CancelRequested {
			return deny(CodeBadParams, events.ReasonParentNotRunning,
				fmt.Sprintf("delegate: parent task '%s' was asked to cancel, it cannot delegate", c.TaskID),
				events.ParentCancelRequestedMessage)
		}
	}
	denied := func(reason, msg string) (Decision, error) { return deny(CodePolicyDenied, reason, msg, msg) }
	if !slices.Contains(delegateRoles, role) {
		return denied(events.ReasonRoleDenied, fmt.Sprintf(
			"delegate rejected: requested grandchild role '%s' is not one of explorer/analyst/executor", role))
	}
	if c.Untrusted {
		return denied(events.ReasonTrustDenied,
			"delegate rejected: untrusted escalation context (trust gate is manual-only)")
	}
	if policy.ChildDepth > cfg.MaxDepth {
		return denied(events.ReasonDepthExceeded, fmt.Sprintf(
			"delegate rejected: spawn depth %d exceeds maxDepth %d (parent task '%s' is at depth %d)",
			policy.ChildDepth, cfg.MaxDepth, c.TaskID, policy.Depth))
	}
	// NB: a run refused a slot waits for one (fair slots), so the refusal
	// records the later check that refuses the request as well, if any
	// (policy.otherwise): such a request waits for nothing, or a worker could
	// keep every other run at its share by sending it whenever the pool is
	// full, leaving slots idle without ever taking one.
	deniedSlot := func(reason, msg string) (Decision, error) {
		scratch := *policy
		policy.Otherwise = c.checkAdmission(s, run, parent, role, cfg, &scratch).reason
		return denied(reason, msg)
	}
	if policy.Held >= policy.Capacity {
		return deniedSlot(events.ReasonSlotsExhausted, fmt.Sprintf(
			"delegate rejected: nested spawn budget exhausted; %d/%d in flight", policy.Held, policy.Capacity))
	}
	if msg, unfair := slotShareExceeded(s, c.RunID, env, policy); unfair {
		return deniedSlot(events.ReasonSlotShareExceeded, msg)
	}
	if msg, unfair := workerSlotShareExceeded(s, c.RunID, c.TaskID, env, policy); unfair {
		return deniedSlot(events.ReasonSlotShareExceeded, msg)
	}
	adm := c.checkAdmission(s, run, parent, role, cfg, policy)
	if adm.reason != "" {
		return denied(adm.reason, adm.msg)
	}
	b, timeout := adm.budget, adm.timeout

	// Admitted: the shadow task, the slot and the reservation all follow
	// from these events.
	model := parent.Model
	if c.Model != nil {
		model = strings.TrimSpace(*c.Model)
	}
	desc := ""
	if c.Description != nil {
		desc = *c.Description
		title = defaultTitlePrefix + desc
	}
	admitted := &rec.admitted
	*admitted = events.DelegateAdmitted{
		TaskID: c.TaskID, SubID: subID, ChildDepth: policy.ChildDepth, Role: role, Unmetered: !b.metered,
		Model: model, TimeoutSec: timeout, Deadline: env.millis() + int64(timeout*1000), Cwd: parent.Cwd,
		Title: title, Description: desc, Prompt: c.Prompt, ParentRole: parent.Role, Policy: policy,
	}
	if c.MaxTurns != nil {
		admitted.MaxTurns = *c.MaxTurns
	}
	if b.metered && policy.Requested > 0 {
		admitted.ReservedTokens = policy.Requested
	}
	evs = append(evs, env.event(c.RunID, events.TypeDelegateAdmitted, admitted))
	if b.metered {
		rec.reserved = events.BudgetReserved{TaskID: c.TaskID, SubID: subID, Tokens: policy.Requested,
			GrantedTokens: b.granted}
		evs = append(evs, env.event(c.RunID, events.TypeBudgetReserved, &rec.reserved))
	}
	rec.result = DelegateResult{OK: true, GrandchildTaskRef: subID, ChildDepth: policy.ChildDepth,
		TimeoutSec: timeout}
	return Decision{Events: evs, Result: &rec.result}, nil
}

// checkAdmission is the policy checks of SPEC §4.1 step 6 after the slot checks — budget-insufficient,
// unmetered-denied, model-invalid, timeout-invalid, workspace-conflict, in that order — recording their inputs in
// policy: the first that refuses the request (reason and message), or none with the budget and timeout it is
// admitted with.
func (c *DelegateRequest) checkAdmission(s *projections.State, run projections.Run, parent projections.Task,
	role string, cfg projections.Config, policy *events.Policy) (a admission) {
	refuse := func(reason, msg string) admission { a.reason, a.msg = reason, msg; return a }
	b := meter(s, run, c.TaskID, cfg)
	a.budget = b
	policy.Metered, policy.Granted, policy.Spent = b.metered, b.granted, b.spent
	if b.nested {
		policy.RunPool, policy.RunSpent = b.pool, b.poolSpent
	}
	if b.metered {
		if policy.Requested > b.granted-b.spent {
			return refuse(events.ReasonBudgetInsufficient, fmt.Sprintf(
				"delegate rejected: requested budget %d tokens exceeds parent task '%s' remaining allocation %d "+
					"(%d granted - %d spent)", policy.Requested, c.TaskID, b.granted-b.spent, b.granted, b.spent))
		}
		if policy.Requested > b.remaining() {
			return refuse(events.ReasonBudgetInsufficient, fmt.Sprintf(
				"delegate rejected: requested budget %d tokens exceeds the run's remaining budget %d (%d "+
					"budgetTotal - %d spent by its tasks; budget mode nested)", policy.Requested, b.remaining(),
				b.pool, b.poolSpent))
		}
	} else if cfg.UnmeteredDelegates == events.UnmeteredDeny {
		return refuse(events.ReasonUnmeteredDenied,
			"delegate rejected: the run has no budget to meter this delegation and unmeteredDelegates is deny")
	}
	if c.Model != nil && cfg.ModelCatalog != nil && !slices.Contains(cfg.ModelCatalog, strings.TrimSpace(*c.Model)) {
		return refuse(events.ReasonModelInvalid, fmt.Sprintf(
			"delegate rejected: model '%s' is not in the resolved model catalog", strings.TrimSpace(*c.Model)))
	}
	a.timeout = c.timeout()
	if t := a.timeout; math.IsNaN(t) || math.IsInf(t, 0) || t < 1 || t > MaxTimeoutSec {
		return refuse(events.ReasonTimeoutInvalid, fmt.Sprintf(
			"delegate rejected: timeoutSec %s is outside 1..%d (default %d)", jsNumber(t), MaxTimeoutSec,
			DefaultTimeoutSec))
	}
	if slices.Contains(writeRoles, role) && !cfg.SerializeOnPathOverlap {
		policy.Overlapping = overlappingExecutors(s, c.RunID, parent)
		if policy.Overlapping > 0 {
			return refuse(events.ReasonWorkspaceConflict, fmt.Sprintf(
				"delegate rejected: parent task '%s' cwd overlaps %d in-flight executor(s) and "+
					"limits.serializeOnPathOverlap is off — use a read-only grandchild role (explorer/analyst) "+
					"or enable serialization", c.TaskID, policy.Overlapping))
		}
	}
	return a
}

// admission is the outcome of DelegateRequest.checkAdmission: a refusal (reason, message) or the budget and timeout
// of the admission.
type admission struct {
	reason, msg string
	budget      budget
	timeout     float64
}

// defaultTitlePrefix begins a shadow task's title: its description, or else
// its subId, follows.
const defaultTitlePrefix = "delegate: "

// delegateRecords is everything delegate.request records, allocated at once
// (a decision made a dozen small allocations, a tenth of the writer's). Its
// events hold payloads pointing into it; the read models copy the fields
// they keep out of these payloads (projections.Apply may keep a pointer
// from a payload: none of these has one it keeps), so it lives as long as
// its events do.
type delegateRecords struct {
	policy    events.Policy
	requested events.DelegateRequested
	rejected  events.DelegateRejected
	admitted  events.DelegateAdmitted
	reserved  events.BudgetReserved
	events    [3]events.Event // requested, then rejected or admitted and reserved
	result    DelegateResult
}

func (c *DelegateRequest) timeout() float64 {
	if c.TimeoutSec == nil {
		return DefaultTimeoutSec
	}
	return *c.TimeoutSec
}

// validate is SPEC §4.1 step 2. The allowed role set and the timeout range
// are policy checks (recorded), not parameter checks: any role string,
// empty or long, is decided by the role gate.
func (c *DelegateRequest) validate() error {
	invalid := func(what string) error { return badParams("delegate.request: invalid params: %s", what) }
	n := utf8.RuneCountInString(c.Prompt)
	switch {
	case c.RunID == "" || c.TaskID == "":
		return reject(CodeForbidden, "no-task-credential",
			"delegate requires a task-scoped token; re-dispatch with PI_CREW_BROKER_TASK_ID")
	case strings.TrimSpace(c.Prompt) == "" || n > MaxPromptChars:
		return invalid(fmt.Sprintf("prompt must be a non-empty string of at most %d chars", MaxPromptChars))
	case c.Description != nil && (*c.Description == "" ||
		utf8.RuneCountInString(*c.Description) > MaxDescriptionChars):
		return invalid(fmt.Sprintf("description must be 1..%d chars", MaxDescriptionChars))
	case c.Model != nil && (strings.TrimSpace(*c.Model) == "" || utf8.RuneCountInString(*c.Model) > MaxModelChars):
		return invalid(fmt.Sprintf("model must be 1..%d chars", MaxModelChars))
	case c.MaxTurns != nil && (*c.MaxTurns < 1 || *c.MaxTurns > MaxTurnsLimit):
		return invalid(fmt.Sprintf("maxTurns must be an integer in 1..%d", MaxTurnsLimit))
	case c.BudgetTokens != nil && (*c.BudgetTokens < 0 || *c.BudgetTokens > MaxBudgetTokens):
		return invalid(fmt.Sprintf("budgetTokens must be an integer in 0..%d", MaxBudgetTokens))
	}
	return nil
}

// pi-crew's texts for a delegate.request refused at the capability gate: the
// wire message of the broker, and the policy's message recorded on the event.
const (
	nestingDisabledMessage = "delegate is disabled: nesting.enabled=false (fail-closed default; " +
		"delegate.rejected recorded in events.jsonl)"
	nestingDisabledPolicyMessage = "delegate rejected: governed nesting is disabled (nesting.enabled=false, the " +
		"fail-closed default; enable it in USER config)"
)

// overlappingExecutors counts the run's running executor-class tasks other than parent whose cwd is exactly
// parent's (D§4.7: exact equality, not prefix). It reads the run's counts of running tasks by role and cwd
// (State.RunningTasks), not a walk of its live tasks: a run may hold thousands, and each delegate.request a worker
// sends would walk them all on the writer that every run shares.
func overlappingExecutors(s *projections.State, runID string, parent projections.Task) int {
	n := 0
	for _, role := range writeRoles {
		n += s.RunningTasks(runID, role, parent.Cwd)
	}
	if parent.Status == projections.TaskRunning && slices.Contains(writeRoles, parent.Role) {
		n-- // NB: the parent, running in its own cwd (as admission requires), is no conflict of its own
	}
	return n
}

func catalogSize(c []string) int {
	if c == nil {
		return -1
	}
	return len(c)
}

// truncate cuts s to at most n characters, on a char boundary.
func truncate(s string, n int) string {
	if !longerThan(s, n) {
		return s
	}
	chars := 0
	for at := range s {
		if chars == n {
			return s[:at]
		}
		chars++
	}
	return s
}
