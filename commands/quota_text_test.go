package commands

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// textWorld is run R, running, with task W running, a bytes quota of
// quota, no events quota, and nesting on.
func textWorld(t *testing.T, quota int) *scenarioWorld {
	return runWorld(t, "quotaEvents=0", "quotaBytes="+strconv.Itoa(quota), "nestingEnabled=true", "maxSlots=4")
}

// jsonText is s as a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A status change's free text may be 576 Ki chars, and a run's wind-down
// (a task's failure, a run's completion) is never refused for what it is:
// without its text counted, a loop of a measured step and a wind-down
// carrying text grew the run by that text every round, however small its
// bytes quota. Each such loop stops at the bytes quota: the measured step
// is refused once the run is past it, and a wind-down past it adds at most
// WindDownBytes.
func TestLoopsAreBoundedByTheBytesQuota(t *testing.T) {
	const quota, rounds = 64 << 10, 60
	text := jsonText(strings.Repeat("x", 8<<10))
	cases := []struct {
		name string
		loop []loopRequest
	}{
		{name: "task retried after a failure", loop: []loopRequest{
			orch("task.transition", `{"taskId":"W","to":"failed","error":`+text+`}`),
			orch("task.transition", `{"taskId":"W","to":"queued"}`),
			orch("task.transition", `{"taskId":"W","to":"running"}`)}},
		{name: "task needs attention", loop: []loopRequest{
			orch("task.transition", `{"taskId":"W","to":"needs_attention","error":`+text+`}`),
			orch("task.transition", `{"taskId":"W","to":"queued","reason":`+text+`}`),
			orch("task.transition", `{"taskId":"W","to":"running"}`)}},
		{name: "run reopened", loop: []loopRequest{
			orch("run.transition", `{"to":"completed","summary":`+text+`}`),
			orch("run.transition", `{"to":"running"}`)}},
		{name: "run blocked and back", loop: []loopRequest{
			orch("run.transition", `{"to":"blocked","reason":`+text+`}`),
			orch("run.transition", `{"to":"running","summary":`+text+`}`)}},
		{name: "tasks created and cancelled", loop: []loopRequest{
			orch("task.create", `{"role":"executor","agent":"a","title":"t","cwd":"/w"}`),
			orch("task.transition", `{"taskId":"W","to":"cancelled","reason":`+text+`}`),
			orch("task.transition", `{"taskId":"W","to":"queued"}`),
			orch("task.transition", `{"taskId":"W","to":"running"}`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := textWorld(t, quota)
			refused := w.repeat(tc.loop, rounds)
			run, _ := w.s.Run("R")
			// Past the quota: the step that took the run past it (one
			// text), then at most WindDownBytes a step and the refusals'
			// records.
			require.LessOrEqual(t, run.Usage.Bytes(), int64(quota+len(text)+(len(tc.loop)+1)*WindDownBytes),
				"the loop grew the run past its bytes quota")
			require.Positive(t, refused)
		})
	}
}

// A run past its bytes quota can still finish: every wind-down is taken
// with text of at most WindDownBytes, and refused quota-exceeded, with
// nothing recorded but the refusal, when it carries more; a measured
// command is refused even when it adds no text.
func TestARunPastItsBytesQuotaCanFinish(t *testing.T) {
	const quota = 16 << 10
	w := textWorld(t, 2*quota)
	setup := []loopRequest{
		orch("task.create", `{"taskId":"Q","role":"executor","agent":"a","title":"q","cwd":"/q"}`),
		{events.RoleWorker, "delegate.request", `{"prompt":"one"}`},
		{events.RoleWorker, "delegate.request", `{"prompt":"two"}`},
		orch("run.transition", `{"to":"blocked","reason":`+jsonText(strings.Repeat("b", quota))+`}`),
	}
	for _, r := range setup {
		require.Nil(t, w.send(r).err, "setup %s", r.method)
	}
	// The quota lowered below what the run holds.
	require.NoError(t, w.config([]string{"quotaEvents=0", "quotaBytes=" + strconv.Itoa(quota), "nestingEnabled=true", "maxSlots=4"}))
	run, _ := w.s.Run("R")
	require.Greater(t, run.Usage.Bytes(), int64(quota), "the blocked run's reason holds more than the quota")

	o := w.send(orch("task.usage", `{"taskId":"W","input":1,"output":1,"cacheRead":0,"cacheWrite":0}`))
	require.NotNil(t, o.err, "a measured command past the quota, adding no text")
	require.Equal(t, CodeQuotaExceeded, o.err.Code)
	require.Contains(t, o.err.Message, "bytes of the run's text")

	subs := []string{}
	for _, d := range w.s.Delegations("R") {
		subs = append(subs, d.SubID)
	}
	require.Len(t, subs, 2)
	long := jsonText(strings.Repeat("l", 2*WindDownBytes))
	refusedLong := []loopRequest{
		orch("run.transition", `{"to":"running","summary":`+long+`}`),
		orch("delegate.settle", `{"subId":"`+subs[0]+`","outcome":"ok","text":`+long+`,"usageTokens":5}`),
		orch("delegate.cancel", `{"subId":"`+subs[1]+`","reason":`+long+`}`),
		orch("task.transition", `{"taskId":"W","to":"failed","error":`+long+`}`),
		orch("task.transition", `{"taskId":"Q","to":"skipped","reason":`+long+`}`),
	}
	for _, r := range refusedLong {
		before := len(w.log)
		o := w.send(r)
		require.NotNil(t, o.err, "%s with %d bytes of text past the quota", r.method, len(long))
		require.Equal(t, CodeQuotaExceeded, o.err.Code, "%s: %s", r.method, o.err.Message)
		for _, ev := range w.log[before:] {
			require.Equal(t, events.TypeRunQuotaExceeded, ev.Type, "%s past the quota recorded more than its refusal", r.method)
		}
	}
	finish := []loopRequest{
		orch("run.transition", `{"to":"running","summary":"unblocked"}`),
		orch("delegate.spawned", `{"subId":"`+subs[0]+`","pid":7}`),
		orch("delegate.settle", `{"subId":"`+subs[0]+`","outcome":"ok","text":"done, in short","usageTokens":5}`),
		orch("delegate.cancel", `{"subId":"`+subs[1]+`","reason":"enough"}`),
		orch("delegate.settle", `{"subId":"`+subs[1]+`","outcome":"cancelled","text":""}`),
		orch("task.transition", `{"taskId":"W","to":"failed","error":"exit 1: the last line of its stderr"}`),
		orch("task.transition", `{"taskId":"Q","to":"skipped","reason":"not needed"}`),
		orch("run.transition", `{"to":"completed","summary":"done"}`),
	}
	for _, r := range finish {
		if r.method == "run.transition" && strings.Contains(r.params, "completed") {
			o := w.send(orch("run.transition", `{"to":"completed","summary":`+long+`}`))
			require.NotNil(t, o.err, "a completion with a long summary past the quota")
			require.Equal(t, CodeQuotaExceeded, o.err.Code)
		}
		o := w.send(r)
		require.Nil(t, o.err, "%s %s past the quota", r.method, r.params)
	}
	w.requireFinished("R")
}
