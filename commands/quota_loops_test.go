package commands

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// loopGrant is a one-tool grant for the job loops.
const loopGrant = `[{"name":"read","label":"Read","description":"read a file","parameters":{"type":"object"},` +
	`"annotations":{"readOnlyHint":true},"sourceInfo":{"path":"/t/read.ts","source":"pi","scope":"user",` +
	`"origin":"package"},"callable":"mgr:read"}]`

// loopRequest is one broker request of a loop: role (orchestrator or
// worker W), method and params.
type loopRequest struct {
	role, method, params string
}

func orch(method, params string) loopRequest {
	return loopRequest{events.RoleOrchestrator, method, params}
}

// loopWorld is run R, running, with task W running, and quotaEvents=quota.
func loopWorld(t *testing.T, quota int) *scenarioWorld {
	return runWorld(t, "quotaEvents="+strconv.Itoa(quota))
}

// runWorld is run R, running, with task W running, under the config of
// the key=value words config.
func runWorld(t *testing.T, config ...string) *scenarioWorld {
	w := newScenarioWorld(t)
	require.NoError(t, w.config(config))
	require.NoError(t, w.given(events.TypeRunCreated, "R", `{"team":"t","goal":"g","cwd":"/w"}`))
	require.NoError(t, w.given(events.TypeRunRunning, "R", `{}`))
	require.NoError(t, w.given(events.TypeTaskCreated, "R",
		`{"taskId":"W","role":"executor","agent":"executor","title":"w","cwd":"/w","dependsOn":[]}`))
	require.NoError(t, w.given(events.TypeTaskStarted, "R", `{"taskId":"W"}`))
	return w
}

// send decides r in w and returns its outcome.
func (w *scenarioWorld) send(r loopRequest) scenarioOutcome {
	task := ""
	if r.role == events.RoleWorker {
		task = "W"
	}
	o, err := w.when(r.role, "R", task, r.method, json.RawMessage(r.params))
	require.NoError(w.t, err)
	return o
}

// repeat sends loop rounds times and returns how many of its requests were
// refused quota-exceeded.
func (w *scenarioWorld) repeat(loop []loopRequest, rounds int) (refused int) {
	for range rounds {
		for _, r := range loop {
			if o := w.send(r); o.err != nil && o.err.Code == CodeQuotaExceeded {
				refused++
			}
		}
	}
	return refused
}

// Every command a client can repeat without winding its run down — a
// non-terminal transition, a same-status transition, a reopened run, a retry,
// a usage report, a credential issue, a lease cycle, a fenced completion — is
// measured against the run's events quota, so repeating it cannot grow the
// run's stream without bound: past the quota it is refused quota-exceeded and
// the run grows by one run.quota_exceeded a minute at most.
func TestLoopsAreBoundedByTheEventsQuota(t *testing.T) {
	const quota, rounds = 40, 60
	cases := []struct {
		name  string
		setup []loopRequest
		loop  []loopRequest
	}{
		{name: "run same status", loop: []loopRequest{orch("run.transition", `{"to":"running"}`)}},
		{name: "run blocked and back", loop: []loopRequest{
			orch("run.transition", `{"to":"blocked"}`), orch("run.transition", `{"to":"running"}`)}},
		{name: "run reopened", loop: []loopRequest{
			orch("run.transition", `{"to":"completed"}`), orch("run.transition", `{"to":"running"}`)}},
		{name: "run terminal same status",
			setup: []loopRequest{orch("run.transition", `{"to":"failed"}`)},
			loop:  []loopRequest{orch("run.transition", `{"to":"failed"}`)}},
		{name: "task requeued", loop: []loopRequest{
			orch("task.transition", `{"taskId":"W","to":"queued"}`), orch("task.transition",
				`{"taskId":"W","to":"running"}`)}},
		{name: "task retried", loop: []loopRequest{
			orch("task.transition", `{"taskId":"W","to":"failed","error":"e"}`),
			orch("task.transition", `{"taskId":"W","to":"queued"}`),
			orch("task.transition", `{"taskId":"W","to":"running"}`)}},
		{name: "task needs attention", loop: []loopRequest{
			orch("task.transition", `{"taskId":"W","to":"needs_attention","error":"e"}`),
			orch("task.transition", `{"taskId":"W","to":"queued"}`),
			orch("task.transition", `{"taskId":"W","to":"running"}`)}},
		{name: "usage reports", loop: []loopRequest{
			orch("task.usage", `{"taskId":"W","input":1,"output":1,"cacheRead":0,"cacheWrite":0}`)}},
		{name: "credential issues", loop: []loopRequest{orch("credential.issue", `{"taskId":"W"}`)}},
		{name: "credential issue and revoke", loop: []loopRequest{
			orch("credential.issue", `{"taskId":"W"}`), orch("credential.revoke", `{"taskId":"W"}`)}},
		{name: "lease pause and continue",
			setup: []loopRequest{
				orch("job.create", `{"jobId":"J","taskId":"W","tools":`+loopGrant+`}`),
				orch("lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"root"}`)},
			loop: []loopRequest{
				orch("job.transition", `{"jobId":"J","to":"paused"}`),
				orch("lease.open", `{"jobId":"J","mode":"continue","rootToolCallId":"root","tools":`+loopGrant+`}`)}},
		{name: "lease clear and reopen",
			setup: []loopRequest{
				orch("job.create", `{"jobId":"J","taskId":"W","tools":`+loopGrant+`}`),
				orch("lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"root"}`)},
			loop: []loopRequest{
				orch("lease.clear", `{"jobId":"J"}`),
				orch("job.transition", `{"jobId":"J","to":"paused"}`),
				orch("lease.open", `{"jobId":"J","mode":"continue","rootToolCallId":"root","tools":`+loopGrant+`}`),
				orch("job.roots_reset", `{}`)}},
		{name: "fenced completions",
			setup: []loopRequest{
				orch("job.create", `{"jobId":"J","taskId":"W","tools":`+loopGrant+`}`),
				orch("lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"root"}`),
				{events.RoleWorker, "proxy.request",
					`{"jobId":"J","requestId":"r1","nonce":"secret-1","tool":"read"}`},
				orch("job.transition", `{"jobId":"J","to":"cancelled"}`)},
			loop: []loopRequest{orch("proxy.complete",
				`{"jobId":"J","requestId":"r1","nonce":"secret-1","result":{"content":[]}}`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := loopWorld(t, quota)
			for _, r := range tc.setup {
				require.Nil(t, w.send(r).err, "setup %s %s", r.method, r.params)
			}
			refused := w.repeat(tc.loop, rounds)
			run, _ := w.s.Run("R")
			// Past the quota: the steps of the loop that wind down, once
			// each (the measured step that would bring them round again is
			// refused), and one run.quota_exceeded.
			require.LessOrEqual(t, run.Usage.Events, int64(quota+len(tc.loop)+1),
				"the loop grew the run past its events quota")
			require.Positive(t, refused)
		})
	}
}

// A run at its events quota can still finish: every task reaches a terminal
// status — a queued one through running to completed, a waiting one, a
// blocked run through running —, its delegations settle or are cancelled,
// its job stops, its credentials are revoked, and the run itself completes.
func TestARunAtItsEventsQuotaCanFinish(t *testing.T) {
	w := newScenarioWorld(t)
	require.NoError(t, w.config([]string{"nestingEnabled=true", "maxSlots=4", "waitMethodsEnabled=true"}))
	require.NoError(t, w.given(events.TypeRunCreated, "R", `{"team":"t","goal":"g","cwd":"/w"}`))
	require.NoError(t, w.given(events.TypeRunRunning, "R", `{}`))
	setup := []loopRequest{
		orch("task.create", `{"taskId":"W","role":"executor","agent":"a","title":"w","cwd":"/w"}`),
		orch("task.create", `{"taskId":"Q","role":"executor","agent":"a","title":"q","cwd":"/q"}`),
		orch("task.create", `{"taskId":"A","role":"executor","agent":"a","title":"a","cwd":"/a"}`),
		orch("task.create", `{"taskId":"F","role":"executor","agent":"a","title":"f","cwd":"/f"}`),
		orch("task.create", `{"taskId":"S","role":"executor","agent":"a","title":"s","cwd":"/s"}`),
		orch("task.transition", `{"taskId":"W","to":"running"}`),
		orch("task.transition", `{"taskId":"A","to":"running"}`),
		orch("task.transition", `{"taskId":"F","to":"running"}`),
		orch("credential.issue", `{"taskId":"W"}`),
		{events.RoleWorker, "delegate.request", `{"prompt":"one"}`},
		{events.RoleWorker, "delegate.request", `{"prompt":"two"}`},
		{events.RoleWorker, "wait.request", `{"question":"go on?"}`},
		orch("job.create", `{"jobId":"J","taskId":"A","tools":`+loopGrant+`}`),
		orch("lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"root"}`),
		orch("task.transition", `{"taskId":"A","to":"needs_attention","error":"look"}`),
		orch("run.transition", `{"to":"blocked"}`),
	}
	for _, r := range setup {
		require.Nil(t, w.send(r).err, "setup %s %s", r.method, r.params)
	}
	// The run is exactly at its quota from here on.
	run, _ := w.s.Run("R")
	require.NoError(t, w.config([]string{"nestingEnabled=true", "maxSlots=4", "waitMethodsEnabled=true",
		"quotaEvents=" + strconv.Itoa(int(run.Usage.Events))}))
	o := w.send(orch("task.usage", `{"taskId":"W","input":1,"output":1,"cacheRead":0,"cacheWrite":0}`))
	require.NotNil(t, o.err, "the run is at its quota")
	require.Equal(t, CodeQuotaExceeded, o.err.Code)

	subs := []string{}
	for _, d := range w.s.Delegations("R") {
		subs = append(subs, d.SubID)
	}
	require.Len(t, subs, 2)
	finish := []loopRequest{
		orch("run.transition", `{"to":"running"}`),
		orch("delegate.spawned", `{"subId":"`+subs[0]+`","pid":7}`),
		orch("delegate.settle", `{"subId":"`+subs[0]+`","outcome":"ok","text":"done","usageTokens":5}`),
		orch("delegate.cancel", `{"subId":"`+subs[1]+`","reason":"enough"}`),
		orch("delegate.settle", `{"subId":"`+subs[1]+`","outcome":"cancelled","text":""}`),
		orch("job.transition", `{"jobId":"J","to":"cancelled"}`),
		orch("task.transition", `{"taskId":"W","to":"completed"}`),
		orch("task.transition", `{"taskId":"Q","to":"running","cwd":"/q"}`),
		orch("task.transition", `{"taskId":"Q","to":"completed"}`),
		orch("task.transition", `{"taskId":"F","to":"failed","error":"boom"}`),
		orch("task.transition", `{"taskId":"F","to":"cancelled","reason":"given up"}`),
		orch("task.transition", `{"taskId":"S","to":"skipped","reason":"not needed"}`),
		orch("credential.revoke", `{"taskId":"W","reason":"done"}`),
		orch("run.transition", `{"to":"completed","summary":"all done"}`),
	}
	for i, r := range finish {
		o := w.send(r)
		require.Nil(t, o.err, "%s %s at the quota", r.method, r.params)
		if i == 2 { // the first result is in W's mailbox
			o = w.send(orch("mailbox.ack", `{"taskId":"W","messageIds":["`+w.inboxOf("W")+`"]}`))
			require.Nil(t, o.err, "mailbox.ack at the quota")
		}
	}
	w.requireFinished("R")
	// Reopening the ended run is not winding it down: refused at the quota.
	o = w.send(orch("run.transition", `{"to":"running"}`))
	require.NotNil(t, o.err)
	require.Equal(t, CodeQuotaExceeded, o.err.Code)
}

// requireFinished fails unless run is completed, with every task in a
// terminal status and every delegation settled.
func (w *scenarioWorld) requireFinished(run string) {
	r, _ := w.s.Run(run)
	require.Equal(w.t, "completed", string(r.Status))
	for _, task := range w.s.Tasks(run) {
		require.True(w.t, task.Status.Terminal(), "task %s is %s", task.TaskID, task.Status)
	}
	for _, d := range w.s.Delegations(run) {
		require.True(w.t, d.Status.Terminal(), "delegation %s is %s", d.SubID, d.Status)
	}
}

// inboxOf is the id of the first message in task's mailbox.
func (w *scenarioWorld) inboxOf(task string) string {
	for _, ev := range w.log {
		if p := events.PayloadAs[events.MailboxAppended](ev); p != nil && ev.Type == events.TypeMailboxAppended &&
			p.To == task {
			return p.ID
		}
	}
	w.t.Fatalf("no message to %s", task)
	return ""
}
