package events

// Run lifecycle event types (D§3.3). run.<status> is one type per status of
// the D§2.2 machine.
const (
	TypeRunCreated       = "run.created"
	TypeRunQueued        = "run.queued"
	TypeRunPlanning      = "run.planning"
	TypeRunRunning       = "run.running"
	TypeRunBlocked       = "run.blocked"
	TypeRunCompleted     = "run.completed"
	TypeRunFailed        = "run.failed"
	TypeRunCancelled     = "run.cancelled"
	TypeRunBudgetWarning = "run.budget_warning"
	TypeRunBudgetAbort   = "run.budget_abort"
	// TypeRunQuotaExceeded records that a run's quota refused a command
	// (crewlog only); see RunQuotaExceeded.
	TypeRunQuotaExceeded = "run.quota_exceeded"
	// TypeTaskBudgetFairShare is run budget enforcement's per-task flag
	// (D§4.4); it lives with the run budget events it accompanies.
	TypeTaskBudgetFairShare = "task.budget_fair_share"
)

// Quota names: the per-run limit a run.quota_exceeded reports.
const (
	QuotaEvents  = "events"   // events in the run's stream
	QuotaBytes   = "bytes"    // bytes of text the run holds: every string its events record (events.TextBytes)
	QuotaMsgRate = "msg-rate" // messages appended in the last minute
	// QuotaWorkerMsgRate: messages one worker (with the delegations it started, under config shareByDelegator)
	// appended in the last minute, against its share of what the run's workers share (config quotaWorkerMsgShare).
	QuotaWorkerMsgRate = "worker-msg-rate"
	// QuotaWorkerEvents and QuotaWorkerBytes: the events and the bytes of text one worker (with the delegations it
	// started and their results, under config shareByDelegator) appended to the run, against its share of what the
	// run's workers share of each quota (config quotaWorkerShare).
	QuotaWorkerEvents = "worker-events"
	QuotaWorkerBytes  = "worker-bytes"
)

// RunQuotaExceeded records a command a run quota refused: which command of
// which caller, the quota, what the run had used (Used) and what the
// command would have added (Adding) against the limit (Max). Refusals are
// recorded at most once per run per minute (QuotaWindowSec), so a flood of
// refused commands cannot grow the log it is being kept from growing; each
// refusal still answers quota-exceeded.
type RunQuotaExceeded struct {
	Method string `json:"method" msgpack:"method"`
	TaskID string `json:"taskId,omitempty" msgpack:"taskId,omitempty"`
	Quota  string `json:"quota" msgpack:"quota"`
	Used   int64  `json:"used" msgpack:"used"`
	Adding int64  `json:"adding" msgpack:"adding"`
	Max    int64  `json:"max" msgpack:"max"`
}

// QuotaWindowSec is the window of the message rate quota, and the least
// time between two run.quota_exceeded of one run.
const QuotaWindowSec = 60

// RunCreated opens a run. Unlike pi-crew's {team, workflow} it carries every
// manifest field the engine keeps, so the run is rebuilt from the log alone.
// A new run starts in status queued.
type RunCreated struct {
	Team     string `json:"team" msgpack:"team"`
	Workflow string `json:"workflow,omitempty" msgpack:"workflow,omitempty"`
	Goal     string `json:"goal" msgpack:"goal"`
	Cwd      string `json:"cwd" msgpack:"cwd"`
	// BudgetTotal is the run-level token cap; nil means unset. A defined
	// budgetTotal meters delegations, 0 included (a grant of 0), as
	// pi-crew's `budgetTotal !== undefined`. NB: before explicit values were
	// kept, 0 was written as absent; such payloads still read as unset.
	BudgetTotal     *int64 `json:"budgetTotal,omitempty" msgpack:"budgetTotal,omitempty"`
	BudgetUnlimited bool   `json:"budgetUnlimited,omitempty" msgpack:"budgetUnlimited,omitempty"`
	// BudgetWarning and BudgetAbort are fractions of BudgetTotal; nil means
	// unset, and enforcement then uses pi-crew's defaults 0.8 and 0.95. An
	// explicit 0 is kept (pi-crew's `budgetWarning ?? 0.8`).
	BudgetWarning *float64 `json:"budgetWarning,omitempty" msgpack:"budgetWarning,omitempty"`
	BudgetAbort   *float64 `json:"budgetAbort,omitempty" msgpack:"budgetAbort,omitempty"`
}

// RunStatusChanged is the payload shared in shape by every run.<status>
// event; the new status is the type itself. pi-crew put the summary in the
// envelope's message; crewlog keeps it in the payload.
type RunStatusChanged struct {
	Summary string `json:"summary,omitempty" msgpack:"summary,omitempty"`
	Reason  string `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// One named payload type per run.<status> event, so a payload identifies its
// event type on its own.
type (
	RunQueued    RunStatusChanged
	RunPlanning  RunStatusChanged
	RunRunning   RunStatusChanged
	RunBlocked   RunStatusChanged
	RunCompleted RunStatusChanged
	RunFailed    RunStatusChanged
	RunCancelled RunStatusChanged
)

// RunBudget is the shape of run.budget_warning and run.budget_abort (D§3.3).
type RunBudget struct {
	BudgetTotal int64 `json:"budgetTotal" msgpack:"budgetTotal"`
	// BudgetUsed is Σ task usage input+output+cacheWrite when the threshold was crossed.
	BudgetUsed int64 `json:"budgetUsed" msgpack:"budgetUsed"`
	// Threshold is "warning" or "abort".
	Threshold string `json:"threshold" msgpack:"threshold"`
}

// Run budget payloads.
type (
	RunBudgetWarning RunBudget
	RunBudgetAbort   RunBudget
)

// TaskBudgetFairShare flags a task whose own usage (input+output+cacheWrite)
// went above its fair share of the run budget: more than half of
// BudgetTotal (and more than a tenth), as pi-crew's checkPerTaskBudget. It
// is a warning; the task keeps running.
type TaskBudgetFairShare struct {
	TaskID      string `json:"taskId" msgpack:"taskId"`
	BudgetTotal int64  `json:"budgetTotal" msgpack:"budgetTotal"`
	TaskUsage   int64  `json:"taskUsage" msgpack:"taskUsage"`
}

// RunStatusType names the run.<status> event of a D§2.2 status; ok is false
// for anything that is not a run status.
func RunStatusType(status string) (typ string, ok bool) {
	switch status {
	case "queued", "planning", "running", "blocked", "completed", "failed", "cancelled":
		return "run." + status, true
	}
	return "", false
}
