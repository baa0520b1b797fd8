package events

// Engine event types.
const TypeEngineConfigured = "engine.configured"

// Values of EngineConfigured.UnmeteredDelegates.
const (
	UnmeteredAllow = "allow"
	UnmeteredDeny  = "deny"
)

// Values of EngineConfigured.BudgetMode: how a delegation's grant is found.
//
//   - picrew (the default, pi-crew 0.11.46): every task without an
//     allocation, a shadow task too, is seeded with the run's whole
//     budgetTotal, so spend across depths is not bounded by it;
//   - nested: a shadow task's grant is the reservation its parent made for
//     it, and the run's workflow tasks share one pool of budgetTotal, so
//     the run's total spend never exceeds budgetTotal.
const (
	BudgetModePicrew = "picrew"
	BudgetModeNested = "nested"
)

// EngineConfigured records the admission knobs in force, written whenever
// they change, so replay re-evaluates a decision with the config that made
// it. Its stream is EngineStream.
type EngineConfigured struct {
	NestingEnabled         bool   `json:"nestingEnabled" msgpack:"nestingEnabled"`
	MaxDepth               int    `json:"maxDepth" msgpack:"maxDepth"`
	MaxSlots               int    `json:"maxSlots" msgpack:"maxSlots"`
	SerializeOnPathOverlap bool   `json:"serializeOnPathOverlap" msgpack:"serializeOnPathOverlap"`
	UnmeteredDelegates     string `json:"unmeteredDelegates" msgpack:"unmeteredDelegates"`
	// NB: nil means "no catalog" (every model allowed) and an empty,
	// non-nil slice means "empty catalog" (every explicit model denied), so
	// this field must never be omitempty.
	ModelCatalog   []string `json:"modelCatalog" msgpack:"modelCatalog"`
	SettleGraceSec int      `json:"settleGraceSec" msgpack:"settleGraceSec"`
	// Fair slots and run quotas (crewlog only). Zero switches a rule off,
	// which is also what a log written before these knobs existed means.
	SlotShare       int   `json:"slotShare,omitempty" msgpack:"slotShare,omitempty"`
	SlotWaitSec     int   `json:"slotWaitSec,omitempty" msgpack:"slotWaitSec,omitempty"`
	QuotaEvents     int64 `json:"quotaEvents,omitempty" msgpack:"quotaEvents,omitempty"`
	QuotaBytes      int64 `json:"quotaBytes,omitempty" msgpack:"quotaBytes,omitempty"`
	QuotaMsgsPerMin int   `json:"quotaMsgsPerMin,omitempty" msgpack:"quotaMsgsPerMin,omitempty"`
	// QuotaReserve is the percent of each run quota only the run's orchestrator and the admin may use; absent (0),
	// as in every log written before it existed, the workers may use the whole quota.
	QuotaReserve int `json:"quotaReserve,omitempty" msgpack:"quotaReserve,omitempty"`
	// QuotaWorkerMsgShare is the percent of what a run's workers share of its message rate that any one of them may
	// use; absent (0), as in every log written before it existed, one worker may use all of it.
	QuotaWorkerMsgShare int `json:"quotaWorkerMsgShare,omitempty" msgpack:"quotaWorkerMsgShare,omitempty"`
	// QuotaWorkerShare is the percent of what a run's workers share of its events quota and of its bytes quota
	// that any one of them may have appended; absent (0), as in every log written before it existed, one worker may
	// use all of each.
	QuotaWorkerShare int `json:"quotaWorkerShare,omitempty" msgpack:"quotaWorkerShare,omitempty"`
	// BudgetMode is BudgetModePicrew (absent, the default) or
	// BudgetModeNested.
	BudgetMode string `json:"budgetMode,omitempty" msgpack:"budgetMode,omitempty"`
	// WaitMethodsDisabled switches wait.request / wait.resolve off
	// (pi-crew's broker.waitMethodsEnabled=false). Absent, as in every log
	// written before the switch existed, they are on.
	WaitMethodsDisabled bool `json:"waitMethodsDisabled,omitempty" msgpack:"waitMethodsDisabled,omitempty"`
	// The job limits (D§9's constants). Absent (0), as in every log written
	// before jobs existed, each is the dispatcher's own value.
	ProxyPayloadBytes  int64 `json:"proxyPayloadBytes,omitempty" msgpack:"proxyPayloadBytes,omitempty"`
	ProxyManifestBytes int64 `json:"proxyManifestBytes,omitempty" msgpack:"proxyManifestBytes,omitempty"`
	ProxyMaxInFlight   int   `json:"proxyMaxInFlight,omitempty" msgpack:"proxyMaxInFlight,omitempty"`
	ProxyMaxRequests   int   `json:"proxyMaxRequests,omitempty" msgpack:"proxyMaxRequests,omitempty"`
	RevokedRootLimit   int   `json:"revokedRootLimit,omitempty" msgpack:"revokedRootLimit,omitempty"`
	// RerouteEndedAttempts settles a delegation made by an attempt of its parent task that a retry has ended into
	// the run inbox (rerouted), as one whose parent has ended. Absent (false), as in every log written before the
	// knob existed, its result is delivered to the parent task, whichever attempt of it runs.
	RerouteEndedAttempts bool `json:"rerouteEndedAttempts,omitempty" msgpack:"rerouteEndedAttempts,omitempty"`
	// ShareByDelegator counts what the worker of a delegation's shadow task appends and sends, and the result
	// delivered for a delegation, for the share of the run's quotas of the workflow task whose delegation started
	// it. Absent (false), as in every log written before the knob existed, each task's worker has a share of its
	// own and a result counts for none.
	ShareByDelegator bool `json:"shareByDelegator,omitempty" msgpack:"shareByDelegator,omitempty"`
	// WorkerSlotShare holds one worker of a run, with the delegations it started, to SlotShare slots while another
	// task of its run waits for one. Absent (false), as in every log written before the knob existed, only a run
	// has a share of the slots.
	WorkerSlotShare bool `json:"workerSlotShare,omitempty" msgpack:"workerSlotShare,omitempty"`
}
