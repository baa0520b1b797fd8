package events

// Delegation event types (D§3.5). Every delegate event carries taskId = the
// PARENT task and subId = the delegation (and shadow task) id "gc-<uuid>".
const (
	TypeDelegateRequested       = "delegate.requested"
	TypeDelegateAdmitted        = "delegate.admitted"
	TypeDelegateRejected        = "delegate.rejected"
	TypeDelegateSpawned         = "delegate.spawned"
	TypeDelegateCompleted       = "delegate.completed"
	TypeDelegateFailed          = "delegate.failed"
	TypeDelegateTimedOut        = "delegate.timed_out"
	TypeDelegateCancelRequested = "delegate.cancel_requested"
	TypeDelegateCancelled       = "delegate.cancelled"
)

// DelegateAgent is the agent name of every shadow task (D§2.5).
const DelegateAgent = "delegate"

// Rejection reasons of delegate.rejected (D§3.5 plus crewlog's
// unmetered-denied). run-lock-busy does not exist: crewlog has no run lock.
const (
	ReasonNestingDisabled  = "nesting-disabled"
	ReasonNoTask           = "no-task"
	ReasonParentNotRunning = "parent-not-running"
	ReasonRoleDenied       = "role-denied"
	ReasonTrustDenied      = "trust-denied"
	ReasonDepthExceeded    = "depth-exceeded"
	ReasonSlotsExhausted   = "slots-exhausted"
	// ReasonSlotShareExceeded: the requesting run already holds its share
	// of the pool while another run waits for a slot (crewlog only).
	ReasonSlotShareExceeded  = "slot-share-exceeded"
	ReasonBudgetInsufficient = "budget-insufficient"
	ReasonUnmeteredDenied    = "unmetered-denied"
	ReasonModelInvalid       = "model-invalid"
	ReasonTimeoutInvalid     = "timeout-invalid"
	ReasonWorkspaceConflict  = "workspace-conflict"
)

// ParentCancelRequestedMessage is the message of a parent-not-running rejection whose parent is a delegation asked
// to cancel: its status is still running, so the message is what tells it from a rejection because the run ended.
const ParentCancelRequestedMessage = "parent was asked to cancel"

// DelegateRequested is written right after the subId is minted, in the same
// batch as the decision (admitted or rejected), so it never dangles.
type DelegateRequested struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	SubID  string `json:"subId" msgpack:"subId"`
	Role   string `json:"role" msgpack:"role"`
}

// DelegateAdmitted admits a delegation. pi-crew's keys are {subId,
// childDepth, role, unmetered?, reservedTokens?}; crewlog adds what the
// shadow task, the delegation record and the runtime's spawn need, so the
// shadow, the slot and the spawn parameters all follow from this event.
//
// Metered is the negation of Unmetered (pi-crew writes unmetered only when
// true); a metered admission is followed by budget.reserved even when the
// reservation is 0, because that event seeds the parent's allocation.
type DelegateAdmitted struct {
	TaskID     string `json:"taskId" msgpack:"taskId"`
	SubID      string `json:"subId" msgpack:"subId"`
	ChildDepth int    `json:"childDepth" msgpack:"childDepth"`
	Role       string `json:"role" msgpack:"role"`
	Unmetered  bool   `json:"unmetered,omitempty" msgpack:"unmetered,omitempty"`
	// ReservedTokens is present only when > 0 (pi-crew).
	ReservedTokens int64 `json:"reservedTokens,omitempty" msgpack:"reservedTokens,omitempty"`
	// Model is the grandchild's model: the requested one, else the parent's.
	Model      string  `json:"model,omitempty" msgpack:"model,omitempty"`
	TimeoutSec float64 `json:"timeoutSec" msgpack:"timeoutSec"`
	// Deadline is admission time + timeoutSec, unix ms; expiry adds the
	// configured grace to it.
	Deadline int64 `json:"deadline" msgpack:"deadline"`
	// Cwd is the parent's cwd read at admission: the shadow's cwd and the
	// grandchild's spawn directory.
	Cwd         string `json:"cwd" msgpack:"cwd"`
	Title       string `json:"title" msgpack:"title"`
	Description string `json:"description,omitempty" msgpack:"description,omitempty"`
	// Prompt, MaxTurns and ParentRole are what the runtime needs to spawn
	// (D§4.2 step 16); the projections do not keep the prompt.
	Prompt     string `json:"prompt" msgpack:"prompt"`
	MaxTurns   int    `json:"maxTurns,omitempty" msgpack:"maxTurns,omitempty"`
	ParentRole string `json:"parentRole,omitempty" msgpack:"parentRole,omitempty"`
	// Policy optionally records what the admission policy saw, for
	// replay --explain of admissions too.
	Policy *Policy `json:"policy,omitempty" msgpack:"policy,omitempty"`
}

// Metered reports whether the admission charged the parent's ledger.
func (p *DelegateAdmitted) Metered() bool { return !p.Unmetered }

// DelegateRejected records every admission denial (never silent). SubID is
// empty for nesting-disabled, which is decided before a subId is minted.
// Message is truncated to 120 chars like pi-crew's.
type DelegateRejected struct {
	TaskID  string  `json:"taskId" msgpack:"taskId"`
	SubID   string  `json:"subId,omitempty" msgpack:"subId,omitempty"`
	Reason  string  `json:"reason" msgpack:"reason"`
	Message string  `json:"message,omitempty" msgpack:"message,omitempty"`
	Policy  *Policy `json:"policy,omitempty" msgpack:"policy,omitempty"`
}

// Policy is the input the admission policy saw. pi-crew's policy field was a
// text ("nesting.enabled=false"); crewlog records the numbers, so
// `crewctl replay --explain` can say why a decision went the way it did
// without logs. Fields the decision did not reach may be zero.
type Policy struct {
	NestingEnabled bool   `json:"nestingEnabled" msgpack:"nestingEnabled"`
	Trusted        bool   `json:"trusted" msgpack:"trusted"`
	ParentStatus   string `json:"parentStatus,omitempty" msgpack:"parentStatus,omitempty"`
	ParentRole     string `json:"parentRole,omitempty" msgpack:"parentRole,omitempty"`
	Role           string `json:"role,omitempty" msgpack:"role,omitempty"`
	// Depth is the parent's depth (absent = 1); ChildDepth = Depth + 1.
	Depth      int `json:"depth" msgpack:"depth"`
	ChildDepth int `json:"childDepth" msgpack:"childDepth"`
	MaxDepth   int `json:"maxDepth" msgpack:"maxDepth"`
	// Held and Capacity are the daemon-wide nested slots.
	Held     int `json:"held" msgpack:"held"`
	Capacity int `json:"capacity" msgpack:"capacity"`
	// Budget inputs: the parent's grant and spend, the requested
	// budgetTokens, whether the request was metered and the config knob.
	Metered            bool   `json:"metered" msgpack:"metered"`
	Granted            int64  `json:"granted" msgpack:"granted"`
	Spent              int64  `json:"spent" msgpack:"spent"`
	Requested          int64  `json:"requested" msgpack:"requested"`
	UnmeteredDelegates string `json:"unmeteredDelegates,omitempty" msgpack:"unmeteredDelegates,omitempty"`
	// BudgetMode is the config's budget mode when it is not the default;
	// in nested mode RunPool and RunSpent are the run's budgetTotal and the
	// spend of its workflow tasks, the pool a workflow task draws from.
	BudgetMode string `json:"budgetMode,omitempty" msgpack:"budgetMode,omitempty"`
	RunPool    int64  `json:"runPool,omitempty" msgpack:"runPool,omitempty"`
	RunSpent   int64  `json:"runSpent,omitempty" msgpack:"runSpent,omitempty"`
	// Model is the requested model; CatalogSize is -1 when no catalog is
	// configured (every model allowed) and 0 for an empty catalog (none).
	Model       string  `json:"model,omitempty" msgpack:"model,omitempty"`
	CatalogSize int     `json:"catalogSize" msgpack:"catalogSize"`
	TimeoutSec  float64 `json:"timeoutSec" msgpack:"timeoutSec"`
	// Workspace gate inputs.
	Serialize   bool `json:"serializeOnPathOverlap" msgpack:"serializeOnPathOverlap"`
	Overlapping int  `json:"overlapping" msgpack:"overlapping"`
	// Slot share inputs (crewlog only), recorded when at least one other
	// run waited for a slot: Waiting other runs waited, the requesting run
	// held RunHeld slots, and its share was SlotShare. Absent when no run
	// waited, so the share played no part.
	Waiting   int `json:"waiting,omitempty" msgpack:"waiting,omitempty"`
	RunHeld   int `json:"runHeld,omitempty" msgpack:"runHeld,omitempty"`
	SlotShare int `json:"slotShare,omitempty" msgpack:"slotShare,omitempty"`
	// A worker's slot share inputs (crewlog only), recorded on a refusal by
	// that share alone: the task whose share the requesting worker uses (its
	// own, or the workflow task whose delegation started it) held WorkerHeld
	// slots with its delegations, at least its share (SlotShare too), while
	// WorkerWaiting other tasks of the run waited for a slot. Absent
	// otherwise: a request within its share is not checked for waiters.
	WorkerWaiting int `json:"workerWaiting,omitempty" msgpack:"workerWaiting,omitempty"`
	WorkerHeld    int `json:"workerHeld,omitempty" msgpack:"workerHeld,omitempty"`
	// Otherwise is, on a refusal for a slot (slots-exhausted,
	// slot-share-exceeded), the reason a later check refuses the request
	// for as well: such a refusal does not make its run wait for a slot.
	// Absent when the request would have been admitted with a slot free.
	Otherwise string `json:"otherwise,omitempty" msgpack:"otherwise,omitempty"`
}

// DelegateSpawned is the runtime's report that the grandchild process exists:
// queued → running. A report after a terminal state changes nothing.
type DelegateSpawned struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	SubID  string `json:"subId" msgpack:"subId"`
	PID    int    `json:"pid" msgpack:"pid"`
}

// DelegateSettled is the shape of the four terminal delegate events
// (pi-crew {subId, ok}). The settle batch delivers the fenced result first
// (mailbox.appended, MessageID) and charges any excess (budget.charged)
// before this event frees the slot.
type DelegateSettled struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	SubID  string `json:"subId" msgpack:"subId"`
	OK     bool   `json:"ok" msgpack:"ok"`
	// UsageTokens is the grandchild's self-reported usage, when it gave one.
	UsageTokens int64 `json:"usageTokens,omitempty" msgpack:"usageTokens,omitempty"`
	// MessageID is the mailbox message that carried the result.
	MessageID string `json:"messageId,omitempty" msgpack:"messageId,omitempty"`
	// Expired is set on delegate.timed_out when the engine's clock, not the
	// runtime, timed the delegation out (deadline + grace passed).
	Expired bool   `json:"expired,omitempty" msgpack:"expired,omitempty"`
	Error   string `json:"error,omitempty" msgpack:"error,omitempty"`
}

// Terminal delegate payloads: the event type is the outcome.
type (
	DelegateCompleted DelegateSettled
	DelegateFailed    DelegateSettled
	DelegateTimedOut  DelegateSettled
	DelegateCancelled DelegateSettled
)

// DelegateCancelRequested records the intent to cancel an in-flight
// delegation (run cancelled, or an explicit cancel). The runtime kills the
// process and settles with outcome cancelled.
type DelegateCancelRequested struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	SubID  string `json:"subId" msgpack:"subId"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
}
