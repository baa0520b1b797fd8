package commands

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

var (
	fxWorker = Caller{Role: events.RoleWorker, RunID: "R", TaskID: "02_exec"}
	fxOrch   = Caller{Role: events.RoleOrchestrator, RunID: "R"}
	fxAdmin  = Caller{Role: events.RoleAdmin}
)

func fxS(s string) *string { return &s }
func fxI(i int) *int       { return &i }
func fxI64(i int64) *int64 { return &i }

func TestParseCommandValid(t *testing.T) {
	tests := []struct {
		method string
		caller Caller
		params string
		want   Command
	}{
		{"delegate.request", fxWorker, `{"prompt":"find X"}`,
			&DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "find X"}},
		{"delegate.request", fxWorker,
			`{"prompt":"p","description":"d","role":"analyst","model":"m","maxTurns":2.0,"budgetTokens":1e3,` +
				`"timeoutSec":5.5,"extra":1}`, &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p",
				Description: fxS("d"), Role: fxS("analyst"), Model: fxS("m"), MaxTurns: fxI(2),
				BudgetTokens: fxI64(1000), TimeoutSec: fxF(5.5)}},
		{"delegate.request", fxWorker, `{"prompt":"p","role":null,"runId":"R"}`,
			&DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p"}},
		{"run.create", fxAdmin, `{"team":"t","goal":"g","cwd":"/w"}`, &RunCreate{Team: "t", Goal: "g", Cwd: "/w"}},
		{"run.create", fxAdmin,
			`{"runId":"R2","team":"t","workflow":"w","goal":"g","cwd":"/w","budgetTotal":1000,` +
				`"budgetUnlimited":true,"budgetWarning":0.5,"budgetAbort":0.9}`,
			&RunCreate{RunID: "R2", Team: "t", Workflow: "w", Goal: "g", Cwd: "/w",
				BudgetTotal: new(int64(1000)), BudgetUnlimited: true, BudgetWarning: new(0.5),
				BudgetAbort: new(0.9)}},
		{"run.transition", fxOrch, `{"to":"running","summary":"go"}`,
			&RunTransition{RunID: "R", To: "running", Summary: "go"}},
		{"run.transition", fxAdmin, `{"runId":"R9","to":"cancelled","reason":"r"}`,
			&RunTransition{RunID: "R9", To: "cancelled", Reason: "r"}},
		{"task.create", fxOrch,
			`{"taskId":"01_a","role":"executor","agent":"e","title":"t","cwd":"/w","dependsOn":["00_x"],` +
				`"stepId":"a","model":"m","depth":1}`,
			&TaskCreate{RunID: "R", TaskID: "01_a", Role: "executor", Agent: "e", Title: "t", Cwd: "/w",
				DependsOn: []string{"00_x"}, StepID: "a", Model: "m", Depth: 1}},
		{"task.create", fxOrch, `{"taskId":"01_a","role":"r","agent":"e","title":"t","cwd":"/w","dependsOn":null}`,
			&TaskCreate{RunID: "R", TaskID: "01_a", Role: "r", Agent: "e", Title: "t", Cwd: "/w"}},
		{"task.transition", fxOrch, `{"taskId":"01_a","to":"failed","error":"boom"}`,
			&TaskTransition{RunID: "R", TaskID: "01_a", To: "failed", Error: "boom"}},
		{"task.usage", fxOrch, `{"taskId":"01_a","input":1,"output":2,"cacheRead":3,"cacheWrite":4}`,
			&TaskUsage{RunID: "R", TaskID: "01_a", Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4}},
		{"task.usage", fxOrch,
			`{"taskId":"01_a","input":1,"output":2,"cacheRead":3,"cacheWrite":4,"cost":0.25,"turns":7}`,
			&TaskUsage{RunID: "R", TaskID: "01_a", Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4,
				Cost: 0.25, Turns: 7}},
		{"credential.issue", fxOrch, `{"taskId":"gc-1"}`, &CredentialIssue{RunID: "R", TaskID: "gc-1"}},
		{"credential.revoke", fxAdmin, `{"runId":"R","taskId":"gc-1"}`,
			&CredentialRevoke{RunID: "R", TaskID: "gc-1"}},
		{"delegate.spawned", fxOrch, `{"subId":"gc-1","pid":42}`,
			&DelegateSpawned{RunID: "R", SubID: "gc-1", PID: 42}},
		{"delegate.settle", fxOrch, `{"subId":"gc-1","outcome":"ok","text":"done","usageTokens":5000}`,
			&DelegateSettle{RunID: "R", SubID: "gc-1", Outcome: "ok", Text: "done", UsageTokens: fxI64(5000)}},
		{"delegate.settle", fxOrch, `{"subId":"gc-1","outcome":"failed","text":""}`,
			&DelegateSettle{RunID: "R", SubID: "gc-1", Outcome: "failed"}},
		{"delegate.cancel", fxOrch, `{"subId":"gc-1","reason":"user"}`,
			&DelegateCancel{RunID: "R", SubID: "gc-1", Reason: "user"}},
		{"msg.send", fxOrch,
			`{"to":"all","body":"<hi>","kind":"notify","priority":"low","replyTo":"m1","subject":"s"}`,
			&MessageSend{RunID: "R", To: []string{"all"}, Body: `"<hi>"`, MessageKind: "notify", Priority: "low",
				ReplyTo: "m1", Subject: "s"}},
		{"msg.send", fxOrch, `{"to":"02_exec","body":{"b":1,"a":[2]},"kind":"response","questionId":"q1"}`,
			&MessageSend{RunID: "R", To: []string{"02_exec"}, Body: `{"b":1,"a":[2]}`, MessageKind: "response",
				QuestionID: "q1"}},
		{"msg.send", fxWorker, `{"to":["parent","03_t"],"body":{"b":[1, 2]}}`,
			&MessageSend{RunID: "R", FromTask: "02_exec", To: []string{"parent", "03_t"}, Body: `{"b":[1,2]}`}},
		{"msg.send", fxAdmin, `{"runId":"R","to":"02_exec","body":42}`,
			&MessageSend{RunID: "R", To: []string{"02_exec"}, Body: "42"}},
		{"steer.push", fxOrch, `{"taskId":"02_exec","body":"focus","priority":"normal"}`,
			&SteerPush{RunID: "R", TaskID: "02_exec", Body: "focus", Priority: "normal"}},
		{"escalate", fxWorker, `{"body":"stuck"}`, &Escalate{RunID: "R", FromTask: "02_exec", Body: "stuck"}},
		{"escalate", fxOrch, `{"body":"b","to":"02_exec","priority":"urgent"}`,
			&Escalate{RunID: "R", To: "02_exec", Body: "b", Priority: "urgent"}},
		{"wait.request", fxWorker, `{"to":"02_exec","question":"Which API?","options":["a","b"],"timeoutSec":7200}`,
			&WaitRequest{RunID: "R", TaskID: "02_exec", Question: "Which API?", Options: []string{"a", "b"},
				TimeoutSec: fxF(7200)}},
		{"wait.request", fxWorker, `{"question":"q"}`, &WaitRequest{RunID: "R", TaskID: "02_exec", Question: "q"}},
		{"wait.resolve", fxWorker, `{"to":"02_exec","questionId":"Q"}`,
			&WaitResolve{RunID: "R", TaskID: "02_exec", QuestionID: "Q"}},
		{"mailbox.deliver", fxWorker, `{"messageIds":["m1","m2"]}`,
			&MailboxDeliver{RunID: "R", Recipient: "02_exec", MessageIDs: []string{"m1", "m2"}}},
		{"mailbox.deliver", fxWorker, `{"taskId":"02_exec","messageIds":["m1"]}`,
			&MailboxDeliver{RunID: "R", Recipient: "02_exec", MessageIDs: []string{"m1"}}},
		{"mailbox.ack", fxOrch, `{"messageIds":["m1"]}`,
			&MailboxAck{RunID: "R", Recipient: events.RunInbox, MessageIDs: []string{"m1"}}},
		{"mailbox.ack", fxOrch, `{"taskId":"03_t","messageIds":[]}`,
			&MailboxAck{RunID: "R", Recipient: "03_t", MessageIDs: []string{}}},
		{"job.create", fxOrch, `{"jobId":"J","taskId":"02_exec","tools":[]}`,
			&JobCreate{RunID: "R", JobID: "J", TaskID: "02_exec", Tools: json.RawMessage(`[]`)}},
		{"job.transition", fxOrch, `{"jobId":"J","to":"paused"}`,
			&JobTransition{RunID: "R", JobID: "J", To: "paused"}},
		{"job.disconnect", fxOrch, `{"jobId":"J"}`, &JobDisconnect{RunID: "R", JobID: "J"}},
		{"job.roots_reset", fxAdmin, `{"runId":"R"}`, &JobRootsReset{RunID: "R"}},
		{"lease.open", fxOrch, `{"jobId":"J","mode":"start","rootToolCallId":"c1"}`,
			&LeaseOpen{RunID: "R", JobID: "J", Mode: "start", RootToolCallID: "c1"}},
		{"lease.clear", fxOrch, `{"jobId":"J","reason":"dispose"}`,
			&LeaseClear{RunID: "R", JobID: "J", Reason: "dispose"}},
		{"manifest.revalidate", fxOrch, `{"jobId":"J","requestId":"r1","tools":[]}`,
			&ManifestRevalidate{RunID: "R", JobID: "J", RequestID: "r1", Tools: json.RawMessage(`[]`)}},
		{"proxy.complete", fxOrch, `{"jobId":"J","requestId":"r1","nonce":"n","result":{"content":[]}}`,
			&ProxyComplete{RunID: "R", JobID: "J", RequestID: "r1", NonceDigest: SecretDigest("n"),
				Result: json.RawMessage(`{"content":[]}`)}},
		// NB: the nonce is digested at once; a non-string request id is kept for the decision to refuse (T8).
		{"proxy.request", fxWorker, `{"jobId":"J","requestId":7,"nonce":"n","tool":"read"}`,
			&ProxyRequest{RunID: "R", TaskID: "02_exec", JobID: "J", RequestIDChars: -1,
				NonceDigest: SecretDigest("n"), Tool: "read", Args: json.RawMessage(`{}`)}},
		{"proxy.cancel", fxWorker, `{"jobId":"J","requestId":"r1","nonce":"n"}`,
			&ProxyCancel{RunID: "R", TaskID: "02_exec", JobID: "J", RequestID: "r1", NonceDigest: SecretDigest("n")}},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			got, err := ParseCommand(tc.method, json.RawMessage(tc.params), tc.caller)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.method, got.Kind())
		})
		seen[tc.method] = true
	}
	for _, m := range Methods() {
		require.True(t, seen[m], "no valid case for %s", m)
	}
}

func TestParseCommandInvalid(t *testing.T) {
	tests := []struct {
		name, method string
		caller       Caller
		params       string
		code, text   string
	}{
		// GS-02 (c): wrong JSON types and bad ranges before Decide.
		{"empty prompt", "delegate.request", fxWorker, `{"prompt":""}`, CodeBadParams,
			"delegate.request: invalid params"},
		{"no prompt", "delegate.request", fxWorker, `{}`, CodeBadParams,
			"delegate.request: invalid params: prompt must be a string"},
		{"fractional maxTurns", "delegate.request", fxWorker, `{"prompt":"p","maxTurns":1.5}`, CodeBadParams,
			"maxTurns must be an integer"},
		{"negative budgetTokens", "delegate.request", fxWorker, `{"prompt":"p","budgetTokens":-5}`, CodeBadParams,
			"budgetTokens must be an integer in 0..100000000"},
		{"overflowing budgetTokens", "delegate.request", fxWorker, `{"prompt":"p","budgetTokens":1e400}`,
			CodeBadParams, "budgetTokens must be an integer"},
		{"budgetTokens past int64", "delegate.request", fxWorker, `{"prompt":"p","budgetTokens":9223372036854775808}`,
			CodeBadParams, "budgetTokens must be an integer"},
		{"fractional budgetTokens", "delegate.request", fxWorker, `{"prompt":"p","budgetTokens":0.5}`, CodeBadParams,
			"budgetTokens must be an integer"},
		{"string budgetTokens", "delegate.request", fxWorker, `{"prompt":"p","budgetTokens":"NaN"}`, CodeBadParams,
			"budgetTokens must be an integer"},
		{"string maxTurns", "delegate.request", fxWorker, `{"prompt":"p","maxTurns":"3"}`, CodeBadParams,
			"maxTurns must be an integer"},
		{"huge maxTurns", "delegate.request", fxWorker, `{"prompt":"p","maxTurns":1e30}`, CodeBadParams,
			"maxTurns must be an integer"},
		{"numeric prompt", "delegate.request", fxWorker, `{"prompt":7}`, CodeBadParams, "prompt must be a string"},
		{"string timeout", "delegate.request", fxWorker, `{"prompt":"p","timeoutSec":"900"}`, CodeBadParams,
			"timeoutSec must be a finite number"},
		{"overflowing timeout", "delegate.request", fxWorker, `{"prompt":"p","timeoutSec":1e400}`, CodeBadParams,
			"timeoutSec must be a finite number"},
		{"params an array", "delegate.request", fxWorker, `["p"]`, CodeBadParams, "params must be an object"},
		{"params a string", "msg.send", fxOrch, `"x"`, CodeBadParams, "params must be an object"},
		{"params malformed", "msg.send", fxOrch, `{"to":`, CodeBadParams, "not valid JSON"},
		{"null params", "steer.push", fxOrch, `null`, CodeBadParams, "taskId must be a string"},
		{"unknown field on an engine method", "task.transition", fxOrch, `{"taskId":"a","to":"failed","eror":"x"}`,
			CodeBadParams, `unknown field "eror"`},
		{"the least of unknown fields", "task.transition", fxOrch,
			`{"zz":1,"taskId":"a","to":"failed","eror":"x","b":2}`, CodeBadParams, `unknown field "b"`},
		{"an empty unknown field", "task.transition", fxOrch, `{"a":1,"taskId":"a","":0,"to":"failed"}`,
			CodeBadParams, `unknown field ""`},
		{"missing usage counter", "task.usage", fxOrch, `{"taskId":"a","input":1,"output":2,"cacheRead":3}`,
			CodeBadParams, "cacheWrite must be an integer"},
		{"usage as string", "task.usage", fxOrch,
			`{"taskId":"a","input":"1","output":2,"cacheRead":3,"cacheWrite":4}`, CodeBadParams,
			"input must be an integer"},
		{"boolean as string", "run.create", fxAdmin, `{"team":"t","goal":"g","cwd":"/w","budgetUnlimited":"yes"}`,
			CodeBadParams, "budgetUnlimited must be a boolean"},
		{"fractional pid", "delegate.spawned", fxOrch, `{"subId":"gc-1","pid":1.5}`, CodeBadParams,
			"pid must be an integer"},
		{"dependsOn not strings", "task.create", fxOrch,
			`{"taskId":"a","role":"r","agent":"e","title":"t","cwd":"/w","dependsOn":[1]}`, CodeBadParams,
			"dependsOn must be an array of strings"},
		{"to a number", "msg.send", fxOrch, `{"to":5,"body":"b"}`, CodeBadParams,
			"to must be a string or an array of strings"},
		{"no body", "msg.send", fxOrch, `{"to":"a"}`, CodeBadParams, "body must be present"},
		{"options not a list", "wait.request", fxWorker, `{"question":"q","options":"a"}`, CodeBadParams,
			"options must be an array of strings"},
		{"messageIds missing", "mailbox.ack", fxOrch, `{}`, CodeBadParams, "messageIds must be an array of strings"},
		{"admin without runId", "run.transition", fxAdmin, `{"to":"running"}`, CodeBadParams,
			"runId is required with the admin credential"},
		{"runId not a string", "run.transition", fxAdmin, `{"runId":1,"to":"running"}`, CodeBadParams,
			"runId must be a string"},

		// Role checks.
		{"delegate.request by the orchestrator", "delegate.request", fxOrch, `{"prompt":"p"}`, CodeForbidden,
			"delegate requires a task-scoped token; re-dispatch with PI_CREW_BROKER_TASK_ID"},
		{"delegate.request by a run-scoped worker", "delegate.request", Caller{Role: events.RoleWorker, RunID: "R"},
			`{"prompt":"p"}`, CodeForbidden, "delegate requires a task-scoped token"},
		{"delegate.request by the admin", "delegate.request", fxAdmin, `{"prompt":"p"}`, CodeForbidden,
			"task-scoped token"},
		{"wait.request by the orchestrator", "wait.request", fxOrch, `{"question":"q"}`, CodeForbidden,
			"wait.request requires a task-scoped token"},
		{"wait.resolve by the orchestrator", "wait.resolve", fxOrch, `{"questionId":"q"}`, CodeForbidden,
			"task-scoped token"},
		{"wait.request to another task", "wait.request", fxWorker, `{"to":"03_t","question":"q"}`, CodeForbidden,
			"wait.request: 'to' must match the authenticated task"},
		{"wait.resolve to another task", "wait.resolve", fxWorker, `{"to":"03_t","questionId":"q"}`, CodeForbidden,
			"wait.resolve: 'to' must match the authenticated task"},
		{"run.create by the orchestrator", "run.create", fxOrch, `{"team":"t","goal":"g","cwd":"/w"}`, CodeForbidden,
			"requires the admin credential"},
		{"run.transition by a worker", "run.transition", fxWorker, `{"to":"running"}`, CodeForbidden,
			"requires an orchestrator or admin credential"},
		{"task.create by a worker", "task.create", fxWorker, `{}`, CodeForbidden, "orchestrator or admin"},
		{"task.usage by a worker", "task.usage", fxWorker, `{}`, CodeForbidden, "orchestrator or admin"},
		{"credential.issue by a worker", "credential.issue", fxWorker, `{"taskId":"gc-1"}`, CodeForbidden,
			"orchestrator or admin"},
		{"delegate.settle by a worker", "delegate.settle", fxWorker, `{}`, CodeForbidden, "orchestrator or admin"},
		// NB: a worker may not end, cancel or promote any delegation, its own included: its usage and outcome are the
		// runtime's report, never the worker's, so it cannot free a slot early or settle a sibling's.
		{"delegate.cancel by a worker", "delegate.cancel", fxWorker, `{"subId":"gc-1"}`, CodeForbidden,
			"orchestrator or admin"},
		{"delegate.spawned by a worker", "delegate.spawned", fxWorker, `{"subId":"gc-1","pid":42}`, CodeForbidden,
			"orchestrator or admin"},
		{"steer.push by a worker", "steer.push", fxWorker, `{"taskId":"02_exec","body":"b"}`, CodeForbidden,
			"orchestrator or admin"},
		{"another run's runId", "run.transition", fxOrch, `{"runId":"R2","to":"running"}`, CodeForbidden,
			"scoped to another run"},
		{"worker naming another run", "msg.send", fxWorker, `{"runId":"R2","to":"parent","body":"b"}`, CodeForbidden,
			"scoped to another run"},
		{"worker touching another mailbox", "mailbox.deliver", fxWorker, `{"taskId":"03_t","messageIds":["m"]}`,
			CodeForbidden, "only its own mailbox"},
		{"engine role", "msg.send", Caller{Role: events.RoleEngine, RunID: "R"}, `{"to":"a","body":"b"}`,
			CodeForbidden, "unknown caller role"},
		{"no role", "escalate", Caller{}, `{"body":"b"}`, CodeForbidden, "unknown caller role"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := ParseCommand(tc.method, json.RawMessage(tc.params), tc.caller)
			require.Nil(t, cmd)
			var rej *RejectedError
			require.ErrorAs(t, err, &rej)
			require.Equal(t, tc.code, rej.Code)
			require.Contains(t, rej.Message, tc.text)
			if tc.code == CodeBadParams {
				require.True(t, strings.HasPrefix(rej.Message, tc.method+": "), rej.Message)
			}
		})
	}
}

func TestParseCommandUnknownMethod(t *testing.T) {
	for _, m := range []string{"", "hello", "ping", "msg.inbox", "delegate.expire", "ask.expire",
		"engine.configure", "run.Create"} {
		cmd, err := ParseCommand(m, json.RawMessage(`{}`), fxAdmin)
		require.Nil(t, cmd)
		require.ErrorIs(t, err, ErrUnknownMethod, m)
		var rej *RejectedError
		require.False(t, errors.As(err, &rej), "an unknown method is not a rejection")
		require.True(t, strings.HasPrefix(err.Error(), "commands: "))
	}
}

func TestMethods(t *testing.T) {
	require.Equal(t, []string{
		"credential.issue", "credential.revoke", "delegate.cancel", "delegate.request", "delegate.settle",
		"delegate.spawned", "escalate", "mailbox.ack", "mailbox.deliver", "msg.send", "run.create",
		"run.transition", "steer.push", "task.create", "task.transition", "task.usage", "wait.request",
		"wait.resolve",
	}, slices.DeleteFunc(Methods(), isJobMethod))
	require.Equal(t, []string{
		"job.create", "job.disconnect", "job.roots_reset", "job.transition", "lease.clear", "lease.open",
		"manifest.revalidate", "proxy.cancel", "proxy.complete", "proxy.request",
	}, slices.DeleteFunc(Methods(), func(m string) bool { return !isJobMethod(m) }))
}

// Parsed commands decide like hand-built ones: GS-17 end to end through
// ParseCommand.
func TestParsedAskFlow(t *testing.T) {
	l := fxRunning(t, 0)
	w := Caller{Role: events.RoleWorker, RunID: fxRun, TaskID: "02_exec"}
	cmd, err := ParseCommand("wait.request", json.RawMessage(`{"to":"02_exec","question":"Which API?",`+
		`"options":["a","b"],"timeoutSec":7200}`), w)
	require.NoError(t, err)
	dec, err := fxDecide(t, l.s, cmd)
	require.NoError(t, err)
	res := dec.Result.(WaitResult)
	require.True(t, res.Clamped)
	require.Equal(t, int64(3600), res.TimeoutSec)
	l.apply(dec)
	cmd, err = ParseCommand("wait.resolve", json.RawMessage(`{"to":"02_exec","questionId":"`+res.QuestionID+`"}`), w)
	require.NoError(t, err)
	dec, err = fxDecide(t, l.s, cmd)
	require.NoError(t, err)
	require.Equal(t, []string{events.TypeAskAnswered, events.TypeTaskResumed}, fxTypes(dec.Events))
}

// FuzzParseCommand: no params can make ParseCommand panic, and what it
// returns is a command of the method or a rejection.
func FuzzParseCommand(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"p","maxTurns":1.5}`, `{"to":["a","b"],"body":{"x":1}}`, `null`, `[]`, `{"runId":"R"}`,
		`{"taskId":"a","input":1e308,"output":-1,"cacheRead":0,"cacheWrite":0}`, `{"messageIds":[null]}`,
		`{"timeoutSec":-0,"question":"\u0000"}`, `{"to":"02_exec","questionId":""}`, `{"pid":9223372036854775808}`,
	} {
		for i := range Methods() {
			f.Add(uint8(i), uint8(i%4), []byte(seed))
		}
	}
	callers := []Caller{fxWorker, fxOrch, fxAdmin, {Role: events.RoleWorker, RunID: "R"}}
	f.Fuzz(func(t *testing.T, m, c uint8, params []byte) {
		ms := Methods()
		method := ms[int(m)%len(ms)]
		cmd, err := ParseCommand(method, params, callers[int(c)%len(callers)])
		var members map[string]json.RawMessage
		if json.Unmarshal(params, &members) == nil && members != nil {
			// The object split into its members parses to the same command, or the same refusal.
			fromMembers, membersErr := ParseMembers(method, members, callers[int(c)%len(callers)])
			require.Equal(t, err, membersErr, "%s %q", method, params)
			require.Equal(t, cmd, fromMembers, "%s %q", method, params)
		}
		if err != nil {
			require.Nil(t, cmd)
			var rej *RejectedError
			require.ErrorAs(t, err, &rej)
			return
		}
		require.Equal(t, method, cmd.Kind())
		// Deciding it against an empty state must not panic either.
		_, _ = Decide(fxNew(nil).s, cmd, fxEnv())
	})
}

func isJobMethod(m string) bool {
	family, _, _ := strings.Cut(m, ".")
	return family == "job" || family == "lease" || family == "manifest" || family == "proxy"
}

// ParseMembers takes members a scan of a valid frame split out; a member that
// is not a JSON value (empty, a lone quote) is refused like a mistyped one,
// never read past its end.
func TestParseMembersRefusesMembersThatAreNotJSON(t *testing.T) {
	for _, v := range []string{``, `"`, `-`, `[`} {
		for _, key := range []string{"prompt", "budgetTokens", "timeoutSec"} {
			members := map[string]json.RawMessage{"prompt": json.RawMessage(`"p"`), key: json.RawMessage(v)}
			var cmd Command
			var err error
			require.NotPanics(t, func() { cmd, err = ParseMembers("delegate.request", members, fxWorker) },
				"%s=%q", key, v)
			require.Nil(t, cmd, "%s=%q", key, v)
			var rej *RejectedError
			require.ErrorAs(t, err, &rej, "%s=%q", key, v)
			require.Equal(t, CodeBadParams, rej.Code)
		}
	}
}

// A number reads as JavaScript reads it (pi-crew's JSON.parse), so that params one client spells 1, 1.0 or 1e0, -0
// or 0, and 2^53+1 or 2^53 are one request with one fingerprint, accepted or refused alike: a retry that spells its
// number otherwise is answered the recorded outcome, not "commandId already used for a different request".
func TestParseReadsANumberAsJavaScriptDoes(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		caller       Caller
		spellings    []string
	}{
		{"an integer beyond 2^53", "run.create", fxAdmin, []string{
			`{"team":"t","goal":"g","cwd":"/w","budgetTotal":9007199254740992}`,
			`{"team":"t","goal":"g","cwd":"/w","budgetTotal":9007199254740993}`,
			`{"team":"t","goal":"g","cwd":"/w","budgetTotal":9007199254740993.0}`,
			`{"team":"t","goal":"g","cwd":"/w","budgetTotal":9.007199254740993e15}`,
		}},
		{"an int64 at its limit", "task.create", fxOrch, []string{
			`{"taskId":"a","role":"r","agent":"e","title":"t","cwd":"/w","depth":9223372036854775807}`,
			`{"taskId":"a","role":"r","agent":"e","title":"t","cwd":"/w","depth":9223372036854775807.0}`,
			`{"taskId":"a","role":"r","agent":"e","title":"t","cwd":"/w","depth":9223372036854775808}`,
		}},
		{"negative zero timeout", "delegate.request", fxWorker, []string{
			`{"prompt":"p","timeoutSec":0}`, `{"prompt":"p","timeoutSec":-0}`, `{"prompt":"p","timeoutSec":-0.0e5}`,
			`{"prompt":"p","timeoutSec":-1e-400}`,
		}},
		{"negative zero warning", "run.create", fxAdmin, []string{
			`{"team":"t","goal":"g","cwd":"/w","budgetWarning":0}`,
			`{"team":"t","goal":"g","cwd":"/w","budgetWarning":-0}`,
		}},
		{"negative zero cost", "task.usage", fxOrch, []string{
			`{"taskId":"a","input":1,"output":2,"cacheRead":3,"cacheWrite":4,"cost":0}`,
			`{"taskId":"a","input":1,"output":2,"cacheRead":3,"cacheWrite":4,"cost":-0}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first []byte
			var firstErr error
			for i, params := range tc.spellings {
				cmd, err := ParseCommand(tc.method, json.RawMessage(params), tc.caller)
				if i == 0 {
					firstErr = err
				}
				require.Equal(t, firstErr == nil, err == nil, "%s: %v, where %s gave %v", params, err,
					tc.spellings[0], firstErr)
				if err != nil {
					require.Equal(t, firstErr.Error(), err.Error(), params)
					continue
				}
				fp, err := fingerprint(cmd)
				require.NoError(t, err)
				if i == 0 {
					first = fp
				}
				require.Equal(t, first, fp, "%s is %s spelt otherwise", params, tc.spellings[0])
			}
		})
	}
}
