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
// is refused once the run is past it, so past it each wind-down of the
// loop happens at most once more.
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
			// Past the quota: each step of the loop at most once more (a
			// text and its ids), and the refusals' records.
			require.LessOrEqual(t, run.Usage.Bytes(), int64(quota+(len(tc.loop)+1)*(len(text)+1024)),
				"the loop grew the run past its bytes quota")
			require.Positive(t, refused)
		})
	}
}

// A run past its bytes quota can still finish: every wind-down is taken,
// its text with it, while a measured command is refused even when it adds
// no text.
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

	for _, r := range []loopRequest{
		orch("task.usage", `{"taskId":"W","input":1,"output":1,"cacheRead":0,"cacheWrite":0}`),
		orch("task.create", `{"taskId":"Z","role":"executor","agent":"a","title":"t","cwd":"/w"}`),
	} {
		o := w.send(r)
		require.NotNil(t, o.err, "%s past the quota", r.method)
		require.Equal(t, CodeQuotaExceeded, o.err.Code)
		require.Contains(t, o.err.Message, "bytes of the run's text")
	}

	subs := []string{}
	for _, d := range w.s.Delegations("R") {
		subs = append(subs, d.SubID)
	}
	require.Len(t, subs, 2)
	long := jsonText(strings.Repeat("l", 4<<10))
	finish := []loopRequest{
		orch("run.transition", `{"to":"running","summary":`+long+`}`),
		orch("delegate.spawned", `{"subId":"`+subs[0]+`","pid":7}`),
		orch("delegate.settle", `{"subId":"`+subs[0]+`","outcome":"ok","text":`+long+`,"usageTokens":5}`),
		orch("delegate.cancel", `{"subId":"`+subs[1]+`","reason":`+long+`}`),
		orch("delegate.settle", `{"subId":"`+subs[1]+`","outcome":"cancelled","text":""}`),
		orch("task.transition", `{"taskId":"W","to":"failed","error":`+long+`}`),
		orch("task.transition", `{"taskId":"Q","to":"skipped","reason":`+long+`}`),
		orch("run.transition", `{"to":"completed","summary":`+long+`}`),
	}
	for _, r := range finish {
		o := w.send(r)
		require.Nil(t, o.err, "%s past the quota", r.method)
	}
	w.requireFinished("R")
}
