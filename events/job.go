package events

// Job event types: pi-task-dispatcher's jobs, executor leases and proxied
// tool calls (D§9). A job lives in its run's stream (the manager is the
// run's orchestrator, the worker one of its tasks); every event carries the
// job id.
const (
	TypeJobCreated                 = "job.created"
	TypeJobStatusChanged           = "job.status_changed"
	TypeJobRootsReset              = "job.roots_reset"
	TypeJobRejected                = "job.rejected"
	TypeLeaseOpened                = "lease.opened"
	TypeLeaseCleared               = "lease.cleared"
	TypeProxyRequested             = "proxy.requested"
	TypeProxyRejected              = "proxy.rejected"
	TypeProxyCompleted             = "proxy.completed"
	TypeProxyCancelled             = "proxy.cancelled"
	TypeManifestRevalidated        = "manifest.revalidated"
	TypeManifestRevalidationFailed = "manifest.revalidation_failed"
)

// Job statuses, the dispatcher's (D§9). Starting, running and paused are
// live; the others are terminal.
const (
	JobStarting     = "starting"
	JobRunning      = "running"
	JobPaused       = "paused"
	JobCheckpointed = "checkpointed"
	JobTakenOver    = "taken_over"
	JobCancelled    = "cancelled"
	JobHardStopped  = "hard_stopped"
	JobFailed       = "failed"
)

// Reasons of proxy.rejected, exactly the dispatcher's refusals (T4, T7–T14).
const (
	ProxyReasonNonce              = "nonce"
	ProxyReasonReplay             = "replay"
	ProxyReasonRequestLimit       = "request-limit"
	ProxyReasonNoLease            = "no-lease"
	ProxyReasonNotRunning         = "not-running"
	ProxyReasonNotGranted         = "not-granted"
	ProxyReasonInFlight           = "in-flight"
	ProxyReasonPayloadTooLarge    = "payload-too-large"
	ProxyReasonRevalidationFailed = "revalidation-failed"
	ProxyReasonBadRequestID       = "bad-request-id"
)

// Values of ProxyRejected.Op: the proxy message refused.
const (
	ProxyOpRequest    = "request"
	ProxyOpComplete   = "complete"
	ProxyOpCancel     = "cancel"
	ProxyOpRevalidate = "revalidate"
)

// Values of LeaseOpened.Mode and ManifestRevalidated.Mode.
const (
	LeaseStart    = "start"
	LeaseContinue = "continue"
	// RevalidateCall is a revalidation before one proxied execution.
	RevalidateCall = "call"
)

// JobCreated fixes a job's capability grant (T1–T3, T20). The manifest
// itself is not kept: each tool is its name, the sha-256 of its canonical
// JSON (T2's fingerprint) and its callable identity, index for index, which
// is all revalidation (T4) compares. NonceDigest is the sha-256 of the
// per-job nonce (T7); the nonce itself never reaches the log.
type JobCreated struct {
	JobID        string   `json:"jobId" msgpack:"jobId"`
	TaskID       string   `json:"taskId" msgpack:"taskId"`
	Tools        []string `json:"tools" msgpack:"tools"`
	Fingerprints []string `json:"fingerprints" msgpack:"fingerprints"`
	Callables    []string `json:"callables" msgpack:"callables"`
	// ReadOnly names the granted tools whose annotations.readOnlyHint is
	// exactly true: every other granted tool is mutating (T20).
	ReadOnly       []string `json:"readOnly" msgpack:"readOnly"`
	ManifestBytes  int64    `json:"manifestBytes" msgpack:"manifestBytes"`
	ManifestDigest string   `json:"manifestDigest" msgpack:"manifestDigest"`
	NonceDigest    string   `json:"nonceDigest" msgpack:"nonceDigest"`
}

// JobStatusChanged moves a job between the dispatcher's statuses. A change
// out of running always follows the lease.cleared that ended its lease
// (T5: the lease is cleared before a paused, idle or terminal state shows).
type JobStatusChanged struct {
	JobID  string `json:"jobId" msgpack:"jobId"`
	From   string `json:"from" msgpack:"from"`
	To     string `json:"to" msgpack:"to"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// JobRejected records a refused manager operation on a job with what the
// rule saw: a grant refused by T1–T3 (Index and Tool name the tool, Bytes
// and Limit the sizes), a second lease (T5), a continue from another status
// than paused (T6), a transition from a terminal status, a second live job.
type JobRejected struct {
	JobID       string `json:"jobId" msgpack:"jobId"`
	Op          string `json:"op" msgpack:"op"`
	Reason      string `json:"reason" msgpack:"reason"`
	Message     string `json:"message" msgpack:"message"`
	Status      string `json:"status,omitempty" msgpack:"status,omitempty"`
	Generation  int64  `json:"generation" msgpack:"generation"`
	LeaseActive bool   `json:"leaseActive" msgpack:"leaseActive"`
	Index       *int   `json:"index,omitempty" msgpack:"index,omitempty"`
	Tool        string `json:"tool,omitempty" msgpack:"tool,omitempty"`
	Bytes       int64  `json:"bytes,omitempty" msgpack:"bytes,omitempty"`
	Limit       int64  `json:"limit,omitempty" msgpack:"limit,omitempty"`
	Live        string `json:"live,omitempty" msgpack:"live,omitempty"`
}

// JobRootsReset empties the run's revoked-root set and lifts its saturation
// (T18: the manager session's shutdown). Roots and Saturated are what it
// dropped.
type JobRootsReset struct {
	Roots     int  `json:"roots" msgpack:"roots"`
	Saturated bool `json:"saturated" msgpack:"saturated"`
}

// LeaseOpened opens a job's executor lease (T5): Generation is one more than
// the job's last; RootToolCallID is the manager's tool call that runs it.
type LeaseOpened struct {
	JobID          string `json:"jobId" msgpack:"jobId"`
	Generation     int64  `json:"generation" msgpack:"generation"`
	RootToolCallID string `json:"rootToolCallId" msgpack:"rootToolCallId"`
	Mode           string `json:"mode" msgpack:"mode"`
}

// LeaseCleared ends the job's lease: its root is revoked and every request
// still in flight under it is aborted (Aborted counts them). Saturated
// marks the clearing that found the run's revoked-root set full: the set
// was emptied and every nested call with a parent id is blocked until
// job.roots_reset (T18). Reason is the manager's (lease.clear), the job's
// new status (job.transition), or worker-ended: the clearing that follows,
// in the same batch, the event that ended the lease's worker (its task
// terminal, its delegation settled, its run terminal, its credential
// revoked).
type LeaseCleared struct {
	JobID          string `json:"jobId" msgpack:"jobId"`
	Generation     int64  `json:"generation" msgpack:"generation"`
	RootToolCallID string `json:"rootToolCallId" msgpack:"rootToolCallId"`
	Reason         string `json:"reason" msgpack:"reason"`
	Aborted        int    `json:"aborted" msgpack:"aborted"`
	Saturated      bool   `json:"saturated,omitempty" msgpack:"saturated,omitempty"`
}

// ProxyRequested admits one proxied tool call under the current lease. Args
// is the compact JSON of the arguments; Mutating follows from the grant
// (T20).
type ProxyRequested struct {
	JobID      string `json:"jobId" msgpack:"jobId"`
	RequestID  string `json:"requestId" msgpack:"requestId"`
	Generation int64  `json:"generation" msgpack:"generation"`
	Tool       string `json:"tool" msgpack:"tool"`
	Mutating   bool   `json:"mutating" msgpack:"mutating"`
	Args       string `json:"args" msgpack:"args"`
	ArgsBytes  int64  `json:"argsBytes" msgpack:"argsBytes"`
}

// ProxyRejected records a refused proxy message with what the rule saw:
// the job's status and lease generation, the requests in flight and seen,
// the limit that applied, the payload's size. RequestID is empty when the
// id itself was refused (bad-request-id); RequestIDChars then tells its
// length.
type ProxyRejected struct {
	JobID          string `json:"jobId" msgpack:"jobId"`
	RequestID      string `json:"requestId,omitempty" msgpack:"requestId,omitempty"`
	Reason         string `json:"reason" msgpack:"reason"`
	Message        string `json:"message" msgpack:"message"`
	Op             string `json:"op" msgpack:"op"`
	Tool           string `json:"tool,omitempty" msgpack:"tool,omitempty"`
	Status         string `json:"status" msgpack:"status"`
	Generation     int64  `json:"generation" msgpack:"generation"`
	LeaseActive    bool   `json:"leaseActive" msgpack:"leaseActive"`
	InFlight       int    `json:"inFlight" msgpack:"inFlight"`
	Seen           int    `json:"seen" msgpack:"seen"`
	Limit          int64  `json:"limit,omitempty" msgpack:"limit,omitempty"`
	Bytes          int64  `json:"bytes,omitempty" msgpack:"bytes,omitempty"`
	RequestIDChars int    `json:"requestIdChars,omitempty" msgpack:"requestIdChars,omitempty"`
}

// ProxyCompleted records a proxied call's result. Fenced marks a result that
// arrived after its lease was cleared or its request was no longer
// registered (T15): it is recorded and never delivered; CurrentGeneration is
// the job's generation when it arrived. Result is the compact JSON of the
// kept fields only (content, structuredContent, isError, terminate: T14).
type ProxyCompleted struct {
	JobID             string `json:"jobId" msgpack:"jobId"`
	RequestID         string `json:"requestId" msgpack:"requestId"`
	Generation        int64  `json:"generation" msgpack:"generation"`
	Result            string `json:"result,omitempty" msgpack:"result,omitempty"`
	ResultBytes       int64  `json:"resultBytes" msgpack:"resultBytes"`
	IsError           bool   `json:"isError,omitempty" msgpack:"isError,omitempty"`
	Fenced            bool   `json:"fenced,omitempty" msgpack:"fenced,omitempty"`
	CurrentGeneration int64  `json:"currentGeneration" msgpack:"currentGeneration"`
}

// ProxyCancelled ends an in-flight proxied call without a result: By is
// "worker" (the child's cancel, T16) or "disconnect" (the child's IPC went
// away, T19).
type ProxyCancelled struct {
	JobID      string `json:"jobId" msgpack:"jobId"`
	RequestID  string `json:"requestId" msgpack:"requestId"`
	Generation int64  `json:"generation" msgpack:"generation"`
	By         string `json:"by" msgpack:"by"`
}

// ManifestRevalidated records a successful revalidation of the grant (T4):
// before a continue (Mode continue) or before one proxied execution (Mode
// call, RequestID set), which it then allows.
type ManifestRevalidated struct {
	JobID     string `json:"jobId" msgpack:"jobId"`
	Mode      string `json:"mode" msgpack:"mode"`
	RequestID string `json:"requestId,omitempty" msgpack:"requestId,omitempty"`
	Digest    string `json:"digest" msgpack:"digest"`
}

// ManifestRevalidationFailed records a revalidation that found the grant
// changed (T4): Index is the first tool that differs (-1 for the count),
// Cause says how, Want and Got what was compared. The job is hard-stopped
// in the same batch.
type ManifestRevalidationFailed struct {
	JobID     string `json:"jobId" msgpack:"jobId"`
	Mode      string `json:"mode" msgpack:"mode"`
	RequestID string `json:"requestId,omitempty" msgpack:"requestId,omitempty"`
	Index     int    `json:"index" msgpack:"index"`
	Cause     string `json:"cause" msgpack:"cause"`
	Want      string `json:"want" msgpack:"want"`
	Got       string `json:"got" msgpack:"got"`
}
