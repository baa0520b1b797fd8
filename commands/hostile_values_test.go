package commands

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestHostileValuesStayInTheirRun sends every method every hostile value of
// every params key it reads (DescribeMethod), from each of run A's
// principals, against a crew with two runs A and B that hold every kind of
// object (tasks, delegations, a parked question, messages, a job with a lease
// and a proxied call), B's with the same job and request ids as A's. Whatever
// is sent, the decision never panics, what it records survives the log codec
// and keeps the fold invariants (slots, ledger), and run B reads exactly as
// before: a principal of A reaches nothing of B's, whatever id it names. A
// refusal's message, recorded with its outcome for good, stays short however
// long the value it quotes.
func TestHostileValuesStayInTheirRun(t *testing.T) {
	base, ids := hostileCrew(t)
	callers := []Caller{
		{Role: events.RoleWorker, RunID: "A", TaskID: "a1"},
		{Role: events.RoleWorker, RunID: "A", TaskID: "a3"}, // parked on a question
		{Role: events.RoleWorker, RunID: "A", TaskID: ids["subA"]},
		{Role: events.RoleOrchestrator, RunID: "A"},
	}
	bView := hostileView(t, base, "B")
	for _, method := range Methods() {
		info, _ := DescribeMethod(method)
		for _, key := range info.Params {
			for _, v := range hostileValues(key.Type, ids) {
				for _, c := range callers {
					params := maps.Clone(hostileBase(method, ids))
					params[key.Name] = v
					raw, err := json.Marshal(params)
					require.NoError(t, err)
					name := fmt.Sprintf("%s %s %s=%.80s", c.Role, c.TaskID, key.Name, v)
					w := hostileFork(t, base)
					out, err := w.when(c.Role, c.RunID, c.TaskID, method, raw)
					require.NoError(t, err, name)
					require.NoError(t, w.checkInvariants(), name)
					if out.err != nil {
						require.LessOrEqual(t, len(out.err.Message), MaxRejectionMessageBytes, "%s %s", method, name)
					}
					if out.err == nil || len(out.events) > 0 {
						require.Equal(t, bView, hostileView(t, w, "B"), "%s %s changed run B", method, name)
						if c.Role == events.RoleWorker {
							require.Equal(t, hostileOthers(t, base, base, c.TaskID),
								hostileOthers(t, w, base, c.TaskID), "%s %s changed what another task of A holds",
								method, name)
						}
					}
				}
			}
		}
	}
}

// hostileCrew is runs A and B, alike: budgets of 1000, running tasks x1 (a
// metered delegation, spawned) and x3 (parked on a question), a queued x2,
// messages both ways, and a running job J with a lease and a proxied call r1.
// ids names what the hostile values point at.
func hostileCrew(t *testing.T) (*scenarioWorld, map[string]string) {
	w := newScenarioWorld(t)
	require.NoError(t, w.config([]string{"nestingEnabled=true", "maxDepth=4", "maxSlots=8",
		"waitMethodsEnabled=true"}))
	ids := map[string]string{}
	must := func(role, run, task, method, params string) scenarioOutcome {
		t.Helper()
		out, err := w.when(role, run, task, method, json.RawMessage(params))
		require.NoError(t, err)
		require.Nil(t, out.err, "%s %s", method, params)
		return out
	}
	tools := `[{"name":"read","label":"Read","description":"read","parameters":{"type":"object"},` +
		`"annotations":{"readOnlyHint":true},"sourceInfo":{"path":"/t/read.ts","source":"pi","scope":"user",` +
		`"origin":"package"},"callable":"mgr:read"}]`
	for _, run := range []string{"B", "A"} { // A last: its job's nonce is the last secret
		x := strings.ToLower(run)
		require.NoError(t, w.given(events.TypeRunCreated, run,
			`{"team":"t","goal":"g","cwd":"/`+x+`","budgetTotal":1000}`))
		require.NoError(t, w.given(events.TypeRunRunning, run, `{}`))
		for _, task := range []string{x + "1", x + "2", x + "3"} {
			must(events.RoleOrchestrator, run, "", "task.create",
				`{"taskId":"`+task+`","role":"executor","agent":"executor","title":"t","cwd":"/`+task+`"}`)
		}
		must(events.RoleOrchestrator, run, "", "task.transition", `{"taskId":"`+x+`1","to":"running"}`)
		must(events.RoleOrchestrator, run, "", "task.transition", `{"taskId":"`+x+`3","to":"running"}`)
		sub := must(events.RoleWorker, run, x+"1", "delegate.request",
			`{"prompt":"p","budgetTokens":10}`).result.(*DelegateResult).GrandchildTaskRef
		must(events.RoleOrchestrator, run, "", "delegate.spawned", `{"subId":"`+sub+`","pid":7}`)
		q := must(events.RoleWorker, run, x+"3", "wait.request", `{"question":"?"}`).result.(WaitResult).QuestionID
		m := must(events.RoleOrchestrator, run, "", "msg.send",
			`{"to":"`+x+`1","body":"hi"}`).result.(SendResult).MessageID
		p := must(events.RoleWorker, run, x+"1", "msg.send",
			`{"to":"parent","body":"up"}`).result.(SendResult).MessageID
		must(events.RoleOrchestrator, run, "", "job.create", `{"jobId":"J","taskId":"`+x+`1","tools":`+tools+`}`)
		must(events.RoleOrchestrator, run, "", "lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"root-1"}`)
		ids["nonce"] = fmt.Sprintf("secret-%d", w.secrets)
		must(events.RoleWorker, run, x+"1", "proxy.request",
			`{"jobId":"J","requestId":"r1","nonce":"`+ids["nonce"]+`","tool":"read"}`)
		ids["sub"+run], ids["q"+run], ids["msg"+run], ids["inbox"+run] = sub, q, m+"_"+x+"1", p+"_parent"
	}
	require.NoError(t, w.checkInvariants())
	return w, ids
}

// hostileFork is a world that starts from w's state, for one request.
func hostileFork(t *testing.T, w *scenarioWorld) *scenarioWorld {
	f := newScenarioWorld(t)
	f.s, f.now, f.ids, f.commands, f.secrets = w.s.Clone(), w.now, w.ids, w.commands, w.secrets
	f.log, f.versions = append([]events.Event(nil), w.log...), maps.Clone(w.versions)
	f.granted, f.spent = maps.Clone(w.granted), maps.Clone(w.spent)
	return f
}

// hostileView is everything run runID's queries answer.
func hostileView(t *testing.T, w *scenarioWorld, runID string) string {
	var b strings.Builder
	x := strings.ToLower(runID)
	for _, q := range [][]string{
		{"run", runID}, {"tasks", runID}, {"delegations", runID}, {"ledger", runID}, {"asks", runID},
		{"credentials", runID}, {"job", runID, "J"}, {"roots", runID},
		{"mailbox", runID, "-"}, {"mailbox", runID, x + "1"}, {"mailbox", runID, x + "2"},
		{"mailbox", runID, x + "3"},
	} {
		s, err := w.query(q)
		require.NoError(t, err)
		b.WriteString(s)
	}
	return b.String()
}

// hostileOthers is what run A's tasks (those of base) other than task hold that only they or
// the orchestrator may change: their status, account, questions, jobs and
// delegations, and the status of the messages of every other mailbox.
// Messages appended to their mailboxes are not in it: any task of the run
// may send them one.
func hostileOthers(t *testing.T, w, base *scenarioWorld, task string) string {
	var b strings.Builder
	add := func(v any) {
		s, err := scenarioIndent(v)
		require.NoError(t, err)
		b.WriteString(s)
	}
	for _, other := range base.s.Tasks("A") {
		if other.TaskID == task {
			continue
		}
		other, _ = w.s.Task("A", other.TaskID)
		page, err := w.s.Mailbox("A", other.TaskID, projections.MailboxFilter{})
		require.NoError(t, err)
		for _, m := range page.Messages {
			if m.From != task {
				add(m)
			}
		}
		add(found(w.s.Account("A", other.TaskID)))
		add(other.Status)
	}
	inbox, err := w.s.Mailbox("A", events.RunInbox, projections.MailboxFilter{})
	require.NoError(t, err)
	for _, m := range inbox.Messages {
		if m.From != task {
			add(m)
		}
	}
	for _, a := range w.s.Asks("A") {
		if a.TaskID != task {
			add(a)
		}
	}
	for _, j := range w.s.Jobs("A") {
		if j.TaskID != task {
			add(j)
		}
	}
	for _, d := range base.s.Delegations("A") {
		if d.ParentTaskID != task && d.SubID != task {
			add(found(w.s.Delegation("A", d.SubID)))
		}
	}
	return b.String()
}

// hostileBase is a valid params object of method for run A's principals, so
// that one hostile value at a time reaches the decision.
func hostileBase(method string, ids map[string]string) map[string]any {
	tools := []any{map[string]any{"name": "read", "label": "Read", "description": "read",
		"parameters": map[string]any{"type": "object"}, "annotations": map[string]any{"readOnlyHint": true},
		"sourceInfo": map[string]any{"path": "/t/read.ts", "source": "pi", "scope": "user", "origin": "package"},
		"callable":   "mgr:read"}}
	switch method {
	case "delegate.request":
		return map[string]any{"prompt": "p", "budgetTokens": 1}
	case "msg.send":
		return map[string]any{"to": "parent", "body": "b"}
	case "steer.push":
		return map[string]any{"taskId": "a1", "body": "b"}
	case "escalate":
		return map[string]any{"to": "parent", "body": "b"}
	case "wait.request":
		return map[string]any{"question": "q"}
	case "wait.resolve":
		return map[string]any{"questionId": ids["qA"]}
	case "run.create":
		return map[string]any{"team": "t", "goal": "g", "cwd": "/c"}
	case "run.transition":
		return map[string]any{"to": "running"}
	case "task.create":
		return map[string]any{"taskId": "n1", "role": "executor", "agent": "a", "title": "t", "cwd": "/n"}
	case "task.transition":
		return map[string]any{"taskId": "a2", "to": "running"}
	case "task.usage":
		return map[string]any{"taskId": "a1", "input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0}
	case "credential.issue", "credential.revoke":
		return map[string]any{"taskId": "a2"}
	case "delegate.spawned":
		return map[string]any{"subId": ids["subA"], "pid": 8}
	case "delegate.settle":
		return map[string]any{"subId": ids["subA"], "outcome": "ok", "text": "t", "usageTokens": 20}
	case "delegate.cancel":
		return map[string]any{"subId": ids["subA"]}
	case "mailbox.deliver", "mailbox.ack":
		return map[string]any{"messageIds": []string{ids["msgA"]}}
	case "job.create":
		return map[string]any{"jobId": "J2", "taskId": "a2", "tools": tools}
	case "job.transition":
		return map[string]any{"jobId": "J", "to": "paused"}
	case "job.disconnect", "lease.clear":
		return map[string]any{"jobId": "J"}
	case "lease.open":
		return map[string]any{"jobId": "J", "mode": "continue", "rootToolCallId": "root-2", "tools": tools}
	case "manifest.revalidate":
		return map[string]any{"jobId": "J", "requestId": "r1", "tools": tools}
	case "proxy.complete":
		return map[string]any{"jobId": "J", "requestId": "r1", "nonce": ids["nonce"],
			"result": map[string]any{"ok": true}}
	case "proxy.request":
		return map[string]any{"jobId": "J", "requestId": "r2", "nonce": ids["nonce"], "tool": "read"}
	case "proxy.cancel":
		return map[string]any{"jobId": "J", "requestId": "r1", "nonce": ids["nonce"]}
	}
	return map[string]any{}
}

// hostileValues are the values a client may send for a key of JSON type typ:
// empty, huge, out of range, of another run, of the engine's namespace.
func hostileValues(typ string, ids map[string]string) []json.RawMessage {
	str := func(ss ...string) []json.RawMessage {
		var out []json.RawMessage
		for _, s := range ss {
			b, _ := json.Marshal(s)
			out = append(out, b)
		}
		return out
	}
	strs := []string{
		"", " ", "\u0000", "../../x", strings.Repeat("a", MaxIDChars+1), strings.Repeat("é", MaxBodyChars/2+1),
		"B", "b1", "b2", "b3", "J", "r1", "parent", "all", "group", events.OrchestratorKey,
		ids["subB"], ids["qB"], ids["msgB"], ids["inboxB"], "expire:B:" + ids["subB"],
		"a1", "a2", "a3", ids["subA"], ids["qA"], ids["msgA"], ids["inboxA"],
	}
	ints := []json.RawMessage{
		json.RawMessage("-1"), json.RawMessage("0"), json.RawMessage("1"), json.RawMessage("9223372036854775807"),
		json.RawMessage("-9223372036854775808"), json.RawMessage("1e18"), json.RawMessage("4294967296"),
	}
	nums := append(ints[:len(ints):len(ints)], json.RawMessage("0.5"), json.RawMessage("1e308"),
		json.RawMessage("-1e308"), json.RawMessage("5e-324"), json.RawMessage("86401"), json.RawMessage("1e15"))
	lists := func() []json.RawMessage {
		many := make([]string, MaxMessageIDs+1)
		for i := range many {
			many[i] = ids["msgA"]
		}
		var out []json.RawMessage
		for _, l := range [][]string{{}, {""}, many, {ids["msgB"]}, {ids["inboxB"]}, {ids["inboxA"]},
			{ids["msgA"], ids["msgA"]}, {"b1", "all"}} {
			b, _ := json.Marshal(l)
			out = append(out, b)
		}
		return out
	}
	switch typ {
	case ParamString:
		return str(strs...)
	case ParamInteger:
		return ints
	case ParamNumber:
		return nums
	case ParamBoolean:
		return []json.RawMessage{json.RawMessage("true"), json.RawMessage("false")}
	case ParamStrings:
		return lists()
	case ParamStringOrStrings:
		return append(str(strs...), lists()...)
	}
	return append(str("x", strings.Repeat("a", 70000)), json.RawMessage("{}"), json.RawMessage("[]"),
		json.RawMessage("1"), json.RawMessage(strings.Repeat("[", 200)+strings.Repeat("]", 200)))
}
