package wire

// Code is an error code as it appears in an error frame's "code" field. The set and spelling are pi-crew's
// BrokerErrorCode (D§7.6) plus CodeInternal; a pi-crew client treats every code as an opaque string, so a code it
// does not know is still safe to send. Codes are immutable strings and their methods are safe for concurrent use.
type Code string

// Connection-closing codes: the broker sends an error frame with one of these and then closes the connection.
const (
	// CodeProtocol: the peer broke the protocol (no hello first, a second hello). An undecodable frame gets no
	// frame at all, only the close.
	CodeProtocol Code = "protocol"
	// CodeAuth: the hello was rejected, or a run-scoped method was called on a connection bound to no run. The
	// message never says which hello field was wrong.
	CodeAuth Code = "auth"
	// CodeStaleToken: the run and task exist but the token is not one the broker knows, or a worker's run is
	// terminal. pi-crew sends it after a restart; crewlog persists credential digests and does not.
	CodeStaleToken Code = "stale-token"
	// CodeRevoked: the credential the connection authenticated with has been revoked; checked before every frame.
	CodeRevoked Code = "revoked"
	// CodeTooManyConnections: crewlog's. The daemon, the run or the credential holds as many connections as it may
	// (or the rest are reserved for the admin and orchestrators), or a hello would wait too long for its pace. Sent
	// instead of the hello ack, or as the only frame of a connection over the daemon's cap.
	CodeTooManyConnections Code = "too-many-connections"
	// CodeIdleTimeout: crewlog's. The connection sent no request for the idle timeout and held no subscription
	// or wait.
	CodeIdleTimeout Code = "idle-timeout"
)

// Per-request codes: the connection stays open.
const (
	// CodeOversizeFrame: a body is over its size limit. An oversize line gets no frame: the connection is closed.
	CodeOversizeFrame Code = "oversize-frame"
	// CodeForbidden: the caller's role or credential kind may not call this method.
	CodeForbidden Code = "forbidden"
	// CodeBadParams: params are missing, mistyped or out of range, or the target is in the wrong state.
	CodeBadParams Code = "bad-params"
	// CodeNoManifest: the run does not exist or cannot be loaded.
	CodeNoManifest Code = "no-manifest"
	// CodeNoTask: the task does not exist in the run.
	CodeNoTask Code = "no-task"
	// CodeDurableFailed: a message could not be written durably (msg.send).
	CodeDurableFailed Code = "durable-failed"
	// CodeReplayFailed: the event log could not be read (events.since).
	CodeReplayFailed Code = "replay-failed"
	// CodeClose: the connection or broker closed while the request waited (task.waitStatus).
	CodeClose Code = "close"
	// CodeWaitTimeout: task.waitStatus reached its timeout before the status was reached.
	CodeWaitTimeout Code = "wait-timeout"
	// CodeWaitFailed: task.waitStatus failed for a reason other than a timeout.
	CodeWaitFailed Code = "wait-failed"
	// CodeSteerFailed: steer.push could not record the steering message.
	CodeSteerFailed Code = "steer-failed"
	// CodeEscalateFailed: escalate could not record the message.
	CodeEscalateFailed Code = "escalate-failed"
	// CodePolicyDisabled: the feature is switched off by configuration (nesting, asks).
	CodePolicyDisabled Code = "policy-disabled"
	// CodePolicyDenied: admission policy refused the request; the message gives the rule.
	CodePolicyDenied Code = "policy-denied"
	// CodeBusy: retry later. pi-crew sends it when a run lock is contended; crewlog has no such lock but keeps
	// the code so clients that handle it keep working.
	CodeBusy Code = "busy"
	// CodeTooManyWaits: crewlog's. The connection or its credential has as many task.waitStatus requests in
	// flight as it may; retry when one has ended.
	CodeTooManyWaits Code = "too-many-waits"
	// CodeTooManySubscriptions: crewlog's. The credential's connections hold as many subscriptions as they may.
	CodeTooManySubscriptions Code = "too-many-subscriptions"
	// CodeNotImplemented: unknown method; see NotImplemented for pi-crew's message.
	CodeNotImplemented Code = "not-implemented"
	// CodeTimeout: in pi-crew's type but never sent by its broker; reserved. Its client also uses it locally.
	CodeTimeout Code = "timeout"
	// CodeRateLimit: in pi-crew's type but never sent by pi-crew (it has no rate limiting); crewlog sends it when
	// a run's message rate quota refuses a message.
	CodeRateLimit Code = "rate-limit"
	// CodeInternal: crewlog's code for a failure the broker did not map to a code; the message is generic and
	// the full error goes to the log. Not in pi-crew's type.
	CodeInternal Code = "internal"
	// CodeDiskFull: crewlog's code for a write refused because the daemon's disk has less free space than its
	// configured minimum. Nothing was decided or recorded: retry later with the same commandId.
	CodeDiskFull Code = "disk-full"
	// CodeQuotaExceeded: crewlog's code for a command refused because its run reached a quota (events in its
	// stream, bytes of its text); the message names the quota. Not in pi-crew's type.
	CodeQuotaExceeded Code = "quota-exceeded"
	// CodeUnavailable: crewlog's code for a command this crewd could not have decided and whose outcome it did
	// not learn: in a cluster, no writer answered it (a failover) or this crewd stopped before the writer's answer
	// reached it. It may have been decided: retry with the same commandId, which learns its outcome once a writer
	// answers (a command sent without one is in doubt). Not in pi-crew's type.
	CodeUnavailable Code = "unavailable"
)

// Client-local codes: a client reports these for failures that never reached a broker. A broker never sends them.
const (
	// CodeFallbackSticky: earlier connection attempts failed and the client stays in fallback until reconnected.
	CodeFallbackSticky Code = "fallback-sticky"
	// CodeBadMethod: the method name does not match the method syntax, so it was not sent.
	CodeBadMethod Code = "bad-method"
	// CodeNoSocket: no broker socket is configured or it does not exist.
	CodeNoSocket Code = "no-socket"
	// CodeEncodeFailed: the request could not be encoded (not serialisable, or over the frame cap).
	CodeEncodeFailed Code = "encode-failed"
	// CodeMissingCredentials: the client has no token for the hello.
	CodeMissingCredentials Code = "missing-credentials"
	// CodeClosed: the client was closed, or the connection closed with the request pending.
	CodeClosed Code = "closed"
	// CodeExhausted: every connection attempt failed.
	CodeExhausted Code = "exhausted"
	// CodeRequestFailed: the request failed for another local reason.
	CodeRequestFailed Code = "request-failed"
	// CodeSocketError: the socket reported an error.
	CodeSocketError Code = "socket-error"
)

// Messages pi-crew sends verbatim (D§7.4, D§7.5); the broker uses them so a pi-crew client sees the same text.
const (
	MsgHelloRequired  = "hello required"           // protocol: first frame was not hello
	MsgHelloCompleted = "hello already completed"  // protocol: second hello
	MsgHelloRejected  = "hello rejected"           // auth: any hello shape, protocol or token mismatch
	MsgNotAuthed      = "not authed"               // auth: run-scoped method without a bound run
	MsgTokenRevoked   = "token revoked"            // revoked
	MsgRunTerminal    = "run is already terminal"  // stale-token: worker token for a finished run
	MsgTaskTerminal   = "task is already terminal" // stale-token: worker token for a finished task (crewlog's)
	MsgStaleToken     = "run/task exist but this broker did not issue the token; re-issue required"
	MsgInvalidParams  = "invalid params" // bad-params: generic shape failure
)

type codeInfo struct {
	code    Code
	message string // default message, for errors built with an empty one
	closes  bool
	local   bool
}

// registry lists every code once, in the order of D§7.6, crewlog's own next to their kind. A table rather than a map
// so Codes has a stable order that generated documentation can follow.
var registry = []codeInfo{
	{CodeProtocol, "protocol error", true, false},
	{CodeAuth, MsgNotAuthed, true, false},
	{CodeStaleToken, MsgStaleToken, true, false},
	{CodeRevoked, MsgTokenRevoked, true, false},
	{CodeTooManyConnections, "too many connections", true, false},
	{CodeIdleTimeout, "idle connection closed", true, false},
	{CodeOversizeFrame, "frame too large", false, false},
	{CodeForbidden, "forbidden", false, false},
	{CodeBadParams, MsgInvalidParams, false, false},
	{CodeNoManifest, "run not found", false, false},
	{CodeNoTask, "task not found", false, false},
	{CodeDurableFailed, "durable write failed", false, false},
	{CodeReplayFailed, "event replay failed", false, false},
	{CodeClose, "connection closed", false, false},
	{CodeWaitTimeout, "wait timed out", false, false},
	{CodeWaitFailed, "wait failed", false, false},
	{CodeSteerFailed, "steer failed", false, false},
	{CodeEscalateFailed, "escalate failed", false, false},
	{CodePolicyDisabled, "disabled by policy", false, false},
	{CodePolicyDenied, "denied by policy", false, false},
	{CodeBusy, "busy, retry later", false, false},
	{CodeTooManyWaits, "too many waits in flight", false, false},
	{CodeTooManySubscriptions, "too many subscriptions", false, false},
	{CodeNotImplemented, "method is not implemented", false, false},
	{CodeTimeout, "timed out", false, false},
	{CodeRateLimit, "rate limited", false, false},
	{CodeInternal, "internal error", false, false},
	{CodeDiskFull, "disk full, retry later", false, false},
	{CodeQuotaExceeded, "run quota exceeded", false, false},
	{CodeUnavailable, "no writer answered; retry with the same commandId", false, false},
	{CodeFallbackSticky, "broker unavailable until reconnect", false, true},
	{CodeBadMethod, "invalid method name", false, true},
	{CodeNoSocket, "no broker socket", false, true},
	{CodeEncodeFailed, "request could not be encoded", false, true},
	{CodeMissingCredentials, "missing broker credentials", false, true},
	{CodeClosed, "client closed", false, true},
	{CodeExhausted, "connection attempts exhausted", false, true},
	{CodeRequestFailed, "request failed", false, true},
	{CodeSocketError, "socket error", false, true},
}

func (c Code) info() (codeInfo, bool) {
	for _, i := range registry {
		if i.code == c {
			return i, true
		}
	}
	return codeInfo{}, false
}

// Codes returns every registered code, server codes first, in the order of D§7.6.
func Codes() []Code {
	out := make([]Code, len(registry))
	for i, info := range registry {
		out[i] = info.code
	}
	return out
}

// Valid reports whether c is a registered code (server or client-local).
func (c Code) Valid() bool {
	_, ok := c.info()
	return ok
}

// Message returns the default message for c: pi-crew's wording where D§7 records one, a plain description
// otherwise. It is "" for an unregistered code.
func (c Code) Message() string {
	i, _ := c.info()
	return i.message
}

// Closes reports whether the broker closes the connection after sending an error with this code.
func (c Code) Closes() bool {
	i, _ := c.info()
	return i.closes
}

// Local reports whether c is client-local: produced by a client, never sent by a broker.
func (c Code) Local() bool {
	i, _ := c.info()
	return i.local
}
