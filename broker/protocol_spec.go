package broker

import (
	"fmt"
	"slices"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// methodSpec is what the protocol description (Describe) needs to know about a method beyond what the code
// tells: a command method's roles, strictness and params keys come from commands.DescribeMethod, so its params
// here only add bounds, defaults and notes to keys its parse function reads (naming another key fails Describe).
// A method the broker serves itself lists every key here, as its handler reads them.
type methodSpec struct {
	summary string
	roles   []string    // broker methods only
	strict  bool        // broker methods only: unknown params keys are refused
	params  []paramDesc // see above
	results []any       // zero values of the Go types the result may be (more than one: a union)
	// errors are the per-request codes it may answer, besides the closing ones any request may meet (and a
	// command's internal: Describe adds it).
	errors []wire.Code
	pushes []string
}

var (
	rolesAll     = []string{events.RoleWorker, events.RoleOrchestrator, events.RoleAdmin}
	rolesRuntime = []string{events.RoleOrchestrator, events.RoleAdmin}
	rolesAdmin   = []string{events.RoleAdmin}
	rolesWorker  = []string{events.RoleWorker}
)

// Codes a command on a run (errsRunCommand), on a task or delegation (errsTaskCommand) may answer; a message adds
// its run's quotas. Only a command that appends a message can pass the run's message rate (rate-limit). NB: what a
// worker's command names of its own — its run, its task — is never missing: runs and tasks are never removed, and
// they exist while its credential does; so a worker's own method answers no-manifest and no-task only where the
// pi-crew contract lists them (see unreachedCodes in protocol_errors_test.go).
var (
	errsRunCommand = []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeDiskFull,
		wire.CodeUnavailable}
	errsTaskCommand = []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeNoTask,
		wire.CodeDiskFull, wire.CodeUnavailable}
	errsMessage = append(slices.Clip(errsTaskCommand), wire.CodeQuotaExceeded, wire.CodeRateLimit)
	errsJob     = []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodePolicyDenied,
		wire.CodeDiskFull, wire.CodeUnavailable}
	// A command a client can repeat without winding its run down, or whose refusal is recorded as itself alone
	// (job.rejected), counts against the run's events and bytes quotas.
	errsRepeatableTaskCommand = append(slices.Clip(errsTaskCommand), wire.CodeQuotaExceeded)
	errsRepeatableJob         = append(slices.Clip(errsJob), wire.CodeQuotaExceeded)
	// A worker's proxy message names its own job: a job of another task is forbidden, an unknown one bad-params.
	errsProxyMessage = []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodePolicyDenied, wire.CodeDiskFull,
		wire.CodeUnavailable, wire.CodeQuotaExceeded}
)

// largeAnswers are the commands whose result can be larger than the smallest frame leaves it room for beside an id
// as wide as an error answering that id allows (53 bytes; protocol_errors_test.go reaches each): such a command is
// refused oversize-frame before anything is recorded. A command of a smaller result is answered whenever an error
// would be, so it never answers oversize-frame.
var largeAnswers = []string{"credential.issue", "credential.revoke", "delegate.cancel", "delegate.request",
	"delegate.settle", "escalate", "job.disconnect", "job.transition", "lease.clear", "manifest.revalidate", "msg.send",
	"proxy.cancel", "proxy.request", "run.create", "steer.push", "wait.request"}

// Shorthands for params. Lengths count chars (Unicode code points).
func pStr(name string, required bool, minLen, maxLen int) paramDesc {
	return paramDesc{Name: name, Type: "string", Required: required, MinLength: minLen, MaxLength: maxLen}
}

func pInt(name string, lo, hi float64, def any) paramDesc {
	return paramDesc{Name: name, Type: "integer", Min: num(lo), Max: num(hi), Default: def}
}

func num(f float64) *float64 { return &f }

func pEnum(name string, required bool, def any, values ...string) paramDesc {
	return paramDesc{Name: name, Type: "string", Required: required, Enum: values, Default: def}
}

func note(p paramDesc, n string) paramDesc { p.Note = n; return p }

// statusText is the free text of a status change (a summary, a reason, an error), kept in the log for good.
func statusText(name string) paramDesc { return pStr(name, false, 0, commands.MaxStatusTextChars) }

// runParam is the run of a broker method's request: the credential's, or for the admin, required.
var runParam = note(pStr("runId", false, 1, 256),
	"the admin must name the run; a worker or orchestrator may leave it out (its credential's run)")

var (
	limitParam  = pInt("limit", 1, maxQueryLimit, defaultQueryLimit)
	cursorParam = note(pStr("cursor", false, 0, 64), "nextCursor of the previous page")
	runStatuses = []string{string(projections.RunQueued), string(projections.RunPlanning),
		string(projections.RunRunning), string(projections.RunBlocked), string(projections.RunCompleted),
		string(projections.RunFailed), string(projections.RunCancelled)}
	taskStatuses = []string{string(projections.TaskQueued), string(projections.TaskRunning),
		string(projections.TaskWaiting), string(projections.TaskCompleted), string(projections.TaskFailed),
		string(projections.TaskCancelled), string(projections.TaskSkipped), string(projections.TaskNeedsAttention)}
	priorities = []string{"urgent", "normal", "low"}
	sinceParam = note(paramDesc{Name: "sinceSeq", Type: "number", Default: 0},
		"the last seq already seen; floored, a negative one counts as 0, past 2^53 as 2^53, no number as 0 (as pi-crew)")
)

// Result shapes of methods that answer a map rather than a Go type of their own. Only Describe reads them.
type (
	pingResult struct {
		Pong     bool `json:"pong"`
		Protocol int  `json:"protocol"`
	}
	eventsPage struct {
		Events  []teamEvent `json:"events"`
		NextSeq uint64      `json:"nextSeq"`
		HasMore bool        `json:"hasMore"`
	}
	runStatusResult struct {
		OK     bool   `json:"ok"`
		RunID  string `json:"runId"`
		Status string `json:"status"`
	}
	taskStatusResult struct {
		OK     bool   `json:"ok"`
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	spawnedResult struct {
		OK     bool   `json:"ok"`
		SubID  string `json:"subId"`
		Status string `json:"status"`
	}
	cancelResult struct {
		OK              bool   `json:"ok"`
		SubID           string `json:"subId"`
		CancelRequested bool   `json:"cancelRequested"`
	}
	runCreateResult struct {
		commands.RunCreateResult
		OrchestratorToken string `json:"orchestratorToken"`
	}
	credentialResult struct {
		commands.CredentialResult
		Token string `json:"token,omitempty"` // credential.issue only
	}
	tasksPage struct {
		Tasks      []WireTask `json:"tasks"`
		NextCursor string     `json:"nextCursor,omitempty"`
		HasMore    bool       `json:"hasMore"`
		Total      int        `json:"total"`
	}
	delegationsPage struct {
		Delegations []WireDelegation `json:"delegations"`
		NextCursor  string           `json:"nextCursor,omitempty"`
		HasMore     bool             `json:"hasMore"`
		Total       int              `json:"total"`
	}
	jobCreateResult struct {
		commands.JobResult
		Nonce string `json:"nonce"` // the job's secret, to this caller only
	}
	rootsResetResult struct {
		OK        bool `json:"ok"`
		Roots     int  `json:"roots"`
		Saturated bool `json:"saturated"`
	}
	jobsResult struct {
		Jobs       []JobSummary `json:"jobs"`
		NextCursor string       `json:"nextCursor,omitempty"`
	}
	ledgerPage struct {
		Accounts   []wireAccount `json:"accounts"`
		NextCursor string        `json:"nextCursor,omitempty"`
		HasMore    bool          `json:"hasMore"`
		Total      int           `json:"total"`
	}
)

// protocolPush is a push frame kind: its event name and the Go type of its data.
type protocolPush struct {
	event   string
	data    any
	hasSeq  bool
	summary string
}

var protocolPushes = []protocolPush{
	{wire.EventTeamEvent, teamEvent{}, true,
		"an event of the subscribed run, in seq order, replay then live; seq is its version in the run's stream"},
	{wire.EventMailboxMessage, mailboxPush{}, true,
		"a message for the connection's task (or, for the orchestrator, the run inbox), once durable; seq is 0; " +
			"best effort: msg.inbox is authoritative"},
	{wire.EventResync, resyncData{}, false,
		"the subscription fell behind and stopped: fromSeq is the first seq not delivered; subscribe again from fromSeq-1"},
}

// resyncData is the data of a resync frame (wire.Resync).
type resyncData struct {
	FromSeq uint64 `json:"fromSeq"`
}

// helloLengthNote says how hello's strings are bounded: as pi-crew's broker bounds them, in UTF-16 units
// (wire.DecodeHello), where every other length of the description counts code points.
const helloLengthNote = "at most 256 UTF-16 units, as pi-crew's broker counts (a char outside the BMP counts two), " +
	"so stricter than maxLength, which counts code points"

var protocolSpec = map[string]methodSpec{
	wire.MethodHello: {
		summary: "the first request of every connection: authenticate with a token; the role comes from the token",
		roles:   rolesAll,
		params: []paramDesc{
			{Name: "protocol", Type: "integer", Required: true, Min: num(wire.ProtocolVersion),
				Max: num(wire.ProtocolVersion)},
			note(pStr("runId", false, 1, 256), "worker and orchestrator: required; "+helloLengthNote),
			note(pStr("taskId", false, 1, 256), "worker: its task; orchestrator: \"orchestrator\"; "+helloLengthNote),
			note(pStr("token", true, 1, 256), helloLengthNote),
			note(pEnum("role", false, nil, events.RoleAdmin), "\"admin\" with the admin token, and no runId or taskId"),
		},
		results: []any{wire.HelloAck{}},
		errors: []wire.Code{wire.CodeProtocol, wire.CodeAuth, wire.CodeStaleToken, wire.CodeRevoked,
			wire.CodeTooManyConnections, wire.CodeReplayFailed},
	},
	wire.MethodPing: {summary: "liveness", roles: rolesAll, results: []any{pingResult{}}},
	wire.MethodMsgSend: {
		summary: "append a mailbox message (orchestrator: any recipient and kind; worker: parent, group or a task of " +
			"its run)",
		params: []paramDesc{
			note(paramDesc{Name: "to", MaxItems: commands.MaxRecipients},
				"task ids, \"parent\" (the run inbox), \"all\" (orchestrator), \"group\" (worker)"),
			note(paramDesc{Name: "body"}, "any JSON value, stored as its JSON text; a worker's message is refused "+
				"(oversize-frame) when a copy would not fit in a msg.inbox page"),
			note(pEnum("kind", false, nil, events.KindMessage, events.KindNotify, events.KindSteer, events.KindFollowUp,
				events.KindResponse, events.KindGroupJoin), "worker: message or notify"),
			pEnum("priority", false, "normal", priorities...),
			pStr("replyTo", false, 0, commands.MaxIDChars),
			pStr("subject", false, 0, commands.MaxSubjectChars),
			note(pStr("questionId", false, 1, commands.MaxQuestionIDChars),
				"kind response only: the parked question the message answers"),
		},
		results: []any{commands.SendResult{}},
		// NB: no no-task: a task it sends to that does not exist is bad-params, and the worker's own always exists.
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeDiskFull,
			wire.CodeUnavailable, wire.CodeQuotaExceeded, wire.CodeRateLimit},
		pushes: []string{wire.EventMailboxMessage},
	},
	wire.MethodMsgInbox: {
		summary: "the caller's unacknowledged messages in append order (orchestrator: the run inbox)",
		roles:   rolesAll,
		params: []paramDesc{runParam,
			note(pStr("taskId", false, 1, 256), "admin only: the task's mailbox (absent: the run inbox)"),
			note(paramDesc{Name: "limit", Type: "number", Min: num(1), Default: defaultInboxLimit},
				"pi-crew's: a finite number ≥ 1, floored and clamped to 1000"),
			note(pStr("cursor", false, 0, 64), "a stringified offset, pi-crew's: nextCursor of the previous page, \"0\" "+
				"or the decimal ordinal of a message of the mailbox (acknowledged ones counted)")},
		results: []any{inboxResult{}},
		errors:  []wire.Code{wire.CodeBadParams, wire.CodeForbidden, wire.CodeNoManifest, wire.CodeOversizeFrame},
	},
	wire.MethodEventsSince: {
		summary: "a page of the run's events after sinceSeq",
		roles:   rolesAll,
		params: []paramDesc{runParam, sinceParam, note(paramDesc{Name: "limit", Type: "number", Default: maxSinceLimit},
			"floored and clamped to 1..1000, no number as 1000 (as pi-crew)")},
		results: []any{eventsPage{}},
		errors: []wire.Code{wire.CodeBadParams, wire.CodeForbidden, wire.CodeNoManifest, wire.CodeReplayFailed,
			wire.CodeOversizeFrame},
	},
	wire.MethodEventsSubscribe: {
		summary: "replay the run's events after sinceSeq, then push them live; one subscription per connection",
		roles:   rolesAll,
		params: []paramDesc{runParam, sinceParam,
			note(paramDesc{Name: "types", Type: "string[]", MaxItems: MaxTypeFilter, MaxLength: MaxTypeLen},
				"only these event types (maxLength: of each)")},
		results: []any{subscribeResult{}},
		errors: []wire.Code{wire.CodeBadParams, wire.CodeForbidden, wire.CodeNoManifest,
			wire.CodeTooManySubscriptions},
		pushes: []string{wire.EventTeamEvent, wire.EventResync},
	},
	wire.MethodTaskWaitStatus: {
		summary: "answer once the task's status equals until (any terminal status satisfies a terminal until)",
		roles:   rolesAll,
		params: []paramDesc{runParam, pStr("taskId", true, 1, 256),
			pEnum("until", true, nil, "queued", "running", "waiting", "completed", "failed", "blocked", "cancelled"),
			note(paramDesc{Name: "timeoutMs", Type: "number", Default: defaultWaitMs},
				"floored and clamped to 0..60000, no number as 30000 (as pi-crew)")},
		results: []any{waitResult{}},
		errors: []wire.Code{wire.CodeBadParams, wire.CodeForbidden, wire.CodeNoManifest, wire.CodeNoTask,
			wire.CodeWaitTimeout, wire.CodeTooManyWaits, wire.CodeClose},
	},
	wire.MethodSteerPush: {
		summary: "an urgent steering message to a task",
		params: []paramDesc{pStr("taskId", true, 1, 256), pStr("body", true, 1, commands.MaxSteerChars),
			pEnum("priority", false, "urgent", priorities...)},
		results: []any{commands.SteerResult{}},
		errors:  errsMessage,
		pushes:  []string{wire.EventMailboxMessage},
	},
	wire.MethodEscalate: {
		summary: "a follow-up message to a task (default the sender's own)",
		params: []paramDesc{note(paramDesc{Name: "to"}, "a task of the run or \"parent\""),
			pEnum("priority", false, "normal", priorities...)},
		results: []any{commands.EscalateResult{}},
		// NB: no no-task: a recipient that does not exist is bad-params, and the worker's own task always exists.
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeQuotaExceeded,
			wire.CodeRateLimit, wire.CodeDiskFull, wire.CodeUnavailable},
		pushes: []string{wire.EventMailboxMessage},
	},
	wire.MethodWaitRequest: {
		summary: "park the caller's task on a question until it is answered (msg.send kind response) or times out",
		params: []paramDesc{
			note(paramDesc{Name: "to"}, "the caller's own task; any other is forbidden"),
			note(paramDesc{Name: "options", MaxItems: commands.MaxAskOptions, MaxLength: commands.MaxAskOptionChars},
				"maxLength: of each"),
			pStr("question", true, 1, commands.MaxQuestionChars),
			note(paramDesc{Name: "timeoutSec", Default: commands.DefaultAskTimeout}, "clamped to 1..3600"),
		},
		results: []any{commands.WaitResult{}},
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeNoTask,
			wire.CodePolicyDisabled, wire.CodeQuotaExceeded, wire.CodeDiskFull, wire.CodeUnavailable},
	},
	wire.MethodWaitResolve: {
		summary: "resume the caller's task after its question was answered",
		params: []paramDesc{note(paramDesc{Name: "to"}, "the caller's own task; any other is forbidden"),
			pStr("questionId", true, 1, commands.MaxQuestionIDChars)},
		results: []any{commands.ResolveResult{}},
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodePolicyDisabled,
			wire.CodeQuotaExceeded, wire.CodeDiskFull, wire.CodeUnavailable},
	},
	wire.MethodDelegateRequest: {
		summary: "ask for a grandchild; the runtime spawns it (delegate.spawned) and settles it (delegate.settle)",
		params: []paramDesc{
			pStr("prompt", true, 1, commands.MaxPromptChars),
			pStr("description", false, 1, commands.MaxDescriptionChars),
			note(paramDesc{Name: "role", Default: "explorer"},
				"explorer, analyst or executor; others are a recorded role-denied"),
			pStr("model", false, 1, commands.MaxModelChars),
			pInt("maxTurns", 1, commands.MaxTurnsLimit, nil),
			pInt("budgetTokens", 0, commands.MaxBudgetTokens, 0),
			note(pInt("timeoutSec", 1, commands.MaxTimeoutSec, commands.DefaultTimeoutSec),
				"out of range is a recorded timeout-invalid"),
		},
		results: []any{commands.DelegateResult{}},
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeNoTask,
			wire.CodePolicyDisabled, wire.CodePolicyDenied, wire.CodeQuotaExceeded, wire.CodeDiskFull, wire.CodeUnavailable},
	},
	"run.create": {
		summary: "create a run; the answer carries the orchestrator's token",
		params: []paramDesc{
			note(pStr("runId", false, 1, commands.MaxRunIDChars), "[A-Za-z0-9_-]; minted when absent"),
			pStr("team", true, 1, commands.MaxIDChars), pStr("goal", true, 0, commands.MaxBodyChars),
			pStr("workflow", false, 0, commands.MaxIDChars), pStr("cwd", true, 0, commands.MaxCwdChars),
			note(pInt("budgetTotal", 0, commands.MaxBudgetTotal, nil), "meters delegations, 0 included"),
			{Name: "budgetWarning", Min: num(0), Max: num(1), Default: commands.DefaultBudgetWarning},
			{Name: "budgetAbort", Min: num(0), Max: num(1), Default: commands.DefaultBudgetAbort},
		},
		results: []any{runCreateResult{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeDiskFull, wire.CodeUnavailable},
	},
	"run.transition": {
		summary: "move the run to a status; a terminal one asks every delegation in flight to cancel",
		params:  []paramDesc{pEnum("to", true, nil, runStatuses...), statusText("summary"), statusText("reason")},
		results: []any{runStatusResult{}},
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeDiskFull,
			wire.CodeUnavailable, wire.CodeQuotaExceeded},
	},
	"task.create": {
		summary: "add a workflow task (queued)",
		params: []paramDesc{
			note(paramDesc{Name: "dependsOn", MaxItems: commands.MaxDependsOn}, "task ids of the run"),
			pStr("taskId", true, 1, 256),
			pStr("role", true, 1, commands.MaxIDChars), pStr("agent", true, 1, commands.MaxIDChars),
			pStr("title", true, 0, commands.MaxTitleChars), pStr("cwd", true, 0, commands.MaxCwdChars),
			pStr("stepId", false, 0, commands.MaxIDChars), pStr("model", false, 0, commands.MaxModelChars),
			pInt("depth", 0, commands.MaxMaxDepth, nil),
		},
		results: []any{taskStatusResult{}},
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeQuotaExceeded,
			wire.CodeDiskFull, wire.CodeUnavailable},
	},
	"task.transition": {
		summary: "move a task to a status (terminal to non-terminal only by retry)",
		params: []paramDesc{pEnum("to", true, nil, taskStatuses...), statusText("error"), statusText("reason"),
			pStr("cwd", false, 0, commands.MaxCwdChars)},
		results: []any{taskStatusResult{}},
		errors:  errsRepeatableTaskCommand,
	},
	"task.usage": {
		summary: "report a task's token usage; crossing the run's thresholds records budget events",
		params: []paramDesc{pInt("input", 0, commands.MaxUsageTokens, nil), pInt("output", 0, commands.MaxUsageTokens, nil),
			pInt("cacheRead", 0, commands.MaxUsageTokens, nil), pInt("cacheWrite", 0, commands.MaxUsageTokens, nil),
			pInt("turns", 0, commands.MaxUsageTokens, nil), {Name: "cost", Min: num(0)}},
		results: []any{commands.UsageResult{}},
		errors:  errsRepeatableTaskCommand,
	},
	"credential.issue": {
		summary: "issue (or re-issue) a worker's token for a task or a grandchild (subId); the answer carries it",
		results: []any{credentialResult{}},
		errors:  errsRepeatableTaskCommand,
	},
	"credential.revoke": {
		summary: "revoke a task's (or the orchestrator's) token; its open connections end at once",
		params: []paramDesc{note(paramDesc{Name: "taskId"}, "a task id or \"orchestrator\""),
			pStr("reason", false, 0, commands.MaxIDChars)},
		results: []any{credentialResult{}},
		errors:  errsRunCommand,
	},
	"delegate.spawned": {
		summary: "the grandchild's process exists: queued → running (a late report is a no-op)",
		params:  []paramDesc{pInt("pid", 1, commands.MaxPID, nil)},
		results: []any{spawnedResult{}},
		errors:  errsTaskCommand,
	},
	"delegate.settle": {
		summary: "the grandchild ended: deliver its fenced result to the parent, charge usage above the reservation, " +
			"free the slot",
		params: []paramDesc{pEnum("outcome", true, nil, "ok", "failed", "timed_out", "cancelled"),
			note(pStr("text", true, 0, 0), fmt.Sprintf("its first %d chars are delivered (the fence, D§6.2), fewer when "+
				"the message delivering them would not fit in a msg.inbox page", commands.MaxResultChars)),
			pInt("usageTokens", 0, commands.MaxUsageTokens, nil)},
		results: []any{commands.SettleResult{}},
		errors:  errsTaskCommand,
		pushes:  []string{wire.EventMailboxMessage},
	},
	"delegate.cancel": {
		summary: "ask the runtime to cancel a delegation and every in-flight one below it (records " +
			"delegate.cancel_requested for each)",
		params:  []paramDesc{statusText("reason")},
		results: []any{cancelResult{}},
		errors:  errsTaskCommand,
	},
	"mailbox.deliver": {
		summary: "mark messages delivered (worker: its own mailbox; absent taskId: the run inbox)",
		params:  []paramDesc{{Name: "messageIds", MaxItems: commands.MaxMessageIDs}},
		results: []any{commands.MailboxResult{}},
		errors:  errsRunCommand,
	},
	"mailbox.ack": {
		summary: "mark messages acknowledged; they leave msg.inbox",
		params:  []paramDesc{{Name: "messageIds", MaxItems: commands.MaxMessageIDs}},
		results: []any{commands.MailboxResult{}},
		errors:  errsRunCommand,
	},
	"query.run": {
		summary: "the run, and what its quotas count", roles: rolesRuntime, strict: true,
		params:  []paramDesc{runParam},
		results: []any{runResult{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeOversizeFrame},
	},
	"query.runs": {
		summary: "every run, in creation order (newest first with newest)", roles: rolesAdmin, strict: true,
		params: []paramDesc{
			{Name: "status", Type: "string | string[]", MaxItems: 16, MaxLength: 32, Enum: runStatuses},
			limitParam, cursorParam, {Name: "newest", Type: "boolean", Default: false},
		},
		results: []any{runsResult{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeOversizeFrame},
	},
	"query.tasks": {
		summary: "a page of the run's tasks (shadow tasks included); with taskId, a page of that task's dependsOn",
		roles:   rolesRuntime, strict: true,
		params: []paramDesc{runParam, note(pStr("taskId", false, 1, 256), "page one task's dependsOn"), limitParam,
			cursorParam},
		results: []any{tasksPage{}, taskDependsOnPage{}},
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeNoTask,
			wire.CodeOversizeFrame},
	},
	"query.delegations": {
		summary: "a page of the run's delegations, in admission order", roles: rolesRuntime, strict: true,
		params:  []paramDesc{runParam, limitParam, cursorParam},
		results: []any{delegationsPage{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeOversizeFrame},
	},
	"query.ledger": {
		summary: "a page of the run's budget accounts; with taskId, a page of that account's history",
		roles:   rolesRuntime, strict: true,
		params: []paramDesc{runParam, note(pStr("taskId", false, 1, 256), "page one account's history"), limitParam,
			cursorParam},
		results: []any{ledgerPage{}, accountHistory{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeNoTask},
	},
	"query.slots": {
		summary: "the daemon-wide slot pool (a run's credentials see only its run's holders)",
		roles:   rolesAll, strict: true,
		params:  []paramDesc{note(pStr("runId", false, 1, 256), "optional for the admin; one it names must exist")},
		results: []any{WireSlots{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest},
	},
	"query.mailbox": {
		summary: "a page of one mailbox, acknowledged messages too unless pending", roles: rolesRuntime, strict: true,
		params: []paramDesc{runParam, note(pStr("taskId", false, 1, 256), "absent: the run inbox"), limitParam, cursorParam,
			{Name: "pending", Type: "boolean", Default: false}},
		results: []any{inboxResult{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeOversizeFrame},
	},

	// Jobs, executor leases and proxied tool calls (D§9). A refused rule is recorded and answered policy-denied.
	"job.create": {
		summary: "create a job for a task with its tool grant (manifests); the answer carries the job's nonce",
		params: []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars), pStr("taskId", true, 1, 256),
			note(paramDesc{Name: "tools"}, "the grant: an array of tool manifests (docs/protocol.md)")},
		results: []any{jobCreateResult{}},
		errors:  append(slices.Clip(errsRepeatableTaskCommand), wire.CodePolicyDenied),
	},
	"lease.open": {
		summary: "open an executor lease on a job (start, or continue a paused one with its current grant)",
		params: []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars), pEnum("mode", true, nil, "start", "continue"),
			pStr("rootToolCallId", true, 1, commands.MaxRootChars), note(paramDesc{Name: "tools"},
				"continue: the current grant, required (without it, bad-params); an empty list is a grant")},
		results: []any{commands.JobResult{}},
		errors:  errsRepeatableJob,
	},
	"lease.clear": {
		summary: "clear a job's lease: its root is revoked and its calls aborted",
		params:  []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars), pStr("reason", false, 0, commands.MaxIDChars)},
		results: []any{commands.JobResult{}},
		errors:  errsRepeatableJob,
	},
	"job.transition": {
		summary: "move a job to a status (an active lease is cleared first)",
		params: []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars),
			pEnum("to", true, nil, "paused", "checkpointed", "taken_over", "cancelled", "hard_stopped", "failed"),
			pStr("reason", false, 0, commands.MaxIDChars)},
		results: []any{commands.JobResult{}},
		errors:  errsRepeatableJob,
	},
	"job.disconnect": {
		summary: "the worker's connection to the job went away: every pending call fails",
		params:  []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars)},
		results: []any{commands.JobResult{}},
		errors:  errsRunCommand,
	},
	"job.roots_reset": {
		summary: "empty the run's revoked-root set and lift its saturation (the manager session's shutdown)",
		results: []any{rootsResetResult{}},
		errors:  errsRunCommand,
	},
	"proxy.request": {
		summary: "a worker's proxied tool call under its job's lease",
		params: []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars),
			note(paramDesc{Name: "requestId"}, "1..128 chars, else a recorded bad-request-id"),
			note(paramDesc{Name: "nonce"}, "the job's nonce from job.create"),
			pStr("tool", true, 1, commands.MaxToolNameChars), note(paramDesc{Name: "args"}, "a JSON-safe object; "+
				"arguments the manager could not read whole in proxy.requested are refused (oversize-frame)")},
		results: []any{commands.ProxyAnswer{}},
		errors:  errsProxyMessage,
	},
	"manifest.revalidate": {
		summary: "revalidate the grant before executing an admitted call (a different grant hard-stops the job)",
		params: []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars),
			pStr("requestId", true, 0, commands.MaxRequestIDChars),
			note(paramDesc{Name: "tools"}, "the grant as the manager sees it now")},
		results: []any{commands.ProxyAnswer{}},
		errors:  errsJob,
	},
	"proxy.complete": {
		summary: "deliver a proxied call's result (recorded fenced, never delivered, when the call's lease is gone)",
		params: []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars),
			pStr("requestId", true, 0, commands.MaxRequestIDChars),
			note(paramDesc{Name: "result"}, "an object: content, structuredContent, isError, terminate are kept; one "+
				"proxy.result could not answer in a frame is refused (oversize-frame)")},
		results: []any{commands.ProxyAnswer{}},
		errors:  append(slices.Clip(errsRepeatableJob), wire.CodeOversizeFrame),
	},
	"proxy.cancel": {
		summary: "a worker cancels its live proxied call",
		params:  []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars)},
		results: []any{commands.ProxyAnswer{}},
		errors:  errsProxyMessage,
	},
	methodProxyResult: {
		summary: "the state of one of the worker's proxied calls and, once delivered, its result",
		roles:   rolesWorker, strict: true,
		params: []paramDesc{pStr("jobId", true, 1, commands.MaxJobIDChars),
			pStr("requestId", true, 1, commands.MaxRequestIDChars*4)},
		results: []any{proxyResult{}},
		// NB: no no-manifest: a worker's run exists while its credential does (a cold run's refuses its hello).
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeOversizeFrame},
	},
	"job.authorize": {
		summary: "the nested-call decision for a tool under a parent tool call, from the run's state",
		roles:   rolesRuntime, strict: true,
		params: []paramDesc{runParam, pStr("parentToolCallId", false, 0, 4*commands.MaxRootChars),
			pStr("tool", true, 1, commands.MaxToolNameChars)},
		results: []any{projections.Authorization{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest},
	},
	"query.jobs": {
		summary: "a page of the run's jobs, in creation order", roles: rolesRuntime, strict: true,
		params:  []paramDesc{runParam, limitParam, cursorParam},
		results: []any{jobsResult{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeOversizeFrame},
	},
	"query.job": {
		summary: "one job: its summary, grant, revoked roots and a page of its proxied calls",
		roles:   rolesRuntime, strict: true,
		params: []paramDesc{runParam, pStr("jobId", true, 1, commands.MaxJobIDChars), pInt("limit", 1, 500, 100),
			note(pStr("cursor", false, 0, 16), "nextCursor of the previous page")},
		results: []any{JobDetail{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNoManifest, wire.CodeOversizeFrame},
	},
	methodAdminCheckpoint: {
		summary: "a consistent copy of the store in dir while the daemon runs", roles: rolesAdmin, strict: true,
		params: []paramDesc{note(pStr("dir", true, 1, 4096),
			"an absolute path that must not exist, nor lie inside the store; its parent must")},
		results: []any{checkpointResult{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeDiskFull, wire.CodeInternal},
	},
	methodImportAppend: {
		summary: "import another runtime's recorded history through the daemon, each write once (its commandId in " +
			"the engine's namespace)",
		roles: rolesAdmin, strict: true,
		params: []paramDesc{
			pStr("source", true, 1, commands.MaxImportSourceChars),
			note(paramDesc{Name: "writes", Type: "Record<string, unknown>[]", Required: true, MaxItems: MaxImportWrites},
				"each {commandId: string of at most 256 bytes starting \"import:\", "+
					"runId: string (a run id, or \"$import\" for import.checkpoint), "+
					"events: {type: string, time?: integer (source unix ms), payload: object (the type's payload)}[] of 1..16}"),
		},
		results: []any{importAppendResult{}},
		// Its writes are engine commands: a stopped engine answers internal, as every command method does.
		errors: []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeDiskFull, wire.CodeUnavailable,
			wire.CodeInternal},
	},
	methodImportCheckpoints: {
		summary: "the newest import checkpoint of every file a source's imports recorded, by path",
		roles:   rolesAdmin, strict: true,
		params: []paramDesc{pStr("source", true, 1, commands.MaxImportSourceChars),
			note(pStr("cursor", false, 0, events.MaxImportPathChars), "nextCursor of the previous page"),
			pInt("limit", 1, maxCheckpointPage, maxCheckpointPage)},
		results: []any{importCheckpointsResult{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeReplayFailed, wire.CodeOversizeFrame},
	},
	methodDashboardLogin: {
		summary: "a one-time login link to the dashboard crewd serves, valid for ten minutes",
		roles:   rolesAdmin, strict: true,
		results: []any{dashboardLoginResult{}},
		errors:  []wire.Code{wire.CodeForbidden, wire.CodeBadParams, wire.CodeNotImplemented},
	},
}
