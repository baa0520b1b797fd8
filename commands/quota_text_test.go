package commands

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
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
	require.NoError(t, w.config([]string{"quotaEvents=0", "quotaBytes=" + strconv.Itoa(quota),
		"nestingEnabled=true", "maxSlots=4"}))
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

// clippedMarker is the mark clipTexts leaves after what it keeps of a text
// of chars chars.
func clippedMarker(chars int) string {
	return "… [clipped: " + strconv.Itoa(chars) + " chars sent; the run's bytes quota is spent]"
}

// A run holds as many tasks as its quotas let it create, a dozen bytes
// each, and every one of them can still end past the quota, since a
// wind-down is never refused. Starting and ending each with the longest
// texts took the run thousands of times past its bytes quota; past it,
// each text keeps a line (ClipStatusBytes) and says it was clipped.
func TestWindDownsPastTheBytesQuotaKeepALineOfText(t *testing.T) {
	const tasks, chars = 40, 4 << 10
	w := textWorld(t, 1<<20)
	for i := range tasks {
		r := orch("task.create", `{"taskId":"T`+strconv.Itoa(i)+`","role":"executor","agent":"a","title":"t",`+
			`"cwd":"/w"}`)
		require.Nil(t, w.send(r).err)
	}
	require.NoError(t, w.config([]string{"quotaEvents=0", "quotaBytes=512", "nestingEnabled=true", "maxSlots=4"}))
	run, _ := w.s.Run("R")
	before := run.Usage.Bytes()
	require.Greater(t, before, int64(512), "the run holds more than its lowered quota")

	long := strings.Repeat("\U0001D11E", chars) // four bytes a char
	kept := strings.Repeat("\U0001D11E", ClipStatusBytes/4) + clippedMarker(chars)
	for i := range tasks {
		id := "T" + strconv.Itoa(i)
		for _, r := range []loopRequest{
			orch("task.transition", `{"taskId":"`+id+`","to":"running","cwd":`+jsonText(long)+`}`),
			orch("task.transition", `{"taskId":"`+id+`","to":"failed","error":`+jsonText(long)+`,"reason":`+
				jsonText(long)+`}`),
			orch("task.transition", `{"taskId":"`+id+`","to":"cancelled","reason":`+jsonText(long)+`}`),
		} {
			o := w.send(r)
			require.Nil(t, o.err, "a wind-down past the quota is taken")
		}
		task, _ := w.s.Task("R", id)
		require.Equal(t, projections.TaskCancelled, task.Status)
		require.Equal(t, kept, task.Error)
		require.Equal(t, kept, task.StatusReason)
		require.Equal(t, kept, task.Cwd)
	}
	run, _ = w.s.Run("R")
	t.Logf("%d tasks ended past the quota added %d bytes, %d a task", tasks, run.Usage.Bytes()-before,
		(run.Usage.Bytes()-before)/tasks)
	// A task's three texts (its cwd, error and cancel reason), each a line
	// and the mark, and the events' ids.
	perTask := int64(3*len(kept) + 256)
	require.LessOrEqual(t, run.Usage.Bytes()-before, tasks*perTask,
		"the wind-downs grew the run past its quota by their texts")
}

// Every status text of a wind-down is clipped once the decision would take
// its run past the bytes quota, and only then; the command is taken either
// way, and a clipped text never reaches the run's state whole.
func TestStatusTextsAreClippedOnlyPastTheBytesQuota(t *testing.T) {
	const chars = 2 << 10
	long := strings.Repeat("z", chars)
	text := jsonText(long)
	cases := []struct {
		name   string
		setup  []loopRequest
		send   loopRequest
		fields int // texts in the command
	}{
		{name: "run completed", send: orch("run.transition",
			`{"to":"completed","summary":`+text+`,"reason":`+text+`}`), fields: 2},
		{name: "run cancelled", send: orch("run.transition", `{"to":"cancelled","reason":`+text+`}`), fields: 1},
		{name: "task failed", send: orch("task.transition",
			`{"taskId":"W","to":"failed","error":`+text+`}`), fields: 1},
		{name: "task cancelled", send: orch("task.transition",
			`{"taskId":"W","to":"cancelled","reason":`+text+`}`), fields: 1},
		{
			name: "task started",
			setup: []loopRequest{orch("task.create",
				`{"taskId":"Q","role":"executor","agent":"a","title":"q","cwd":"/q"}`)},
			send:   orch("task.transition", `{"taskId":"Q","to":"running","cwd":`+text+`}`),
			fields: 1,
		},
		{
			name:   "delegation cancelled",
			setup:  []loopRequest{{events.RoleWorker, "delegate.request", `{"prompt":"one"}`}},
			send:   orch("delegate.cancel", `{"subId":"SUB","reason":`+text+`}`),
			fields: 1,
		},
	}
	for _, tc := range cases {
		for _, past := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: " under the quota", true: " past the quota"}[past],
				func(t *testing.T) {
					const quota = 32 << 10
					w := textWorld(t, quota)
					for _, r := range tc.setup {
						require.Nil(t, w.send(r).err, "setup %s", r.method)
					}
					send := tc.send
					if subs := w.s.Delegations("R"); len(subs) > 0 {
						send.params = strings.Replace(send.params, "SUB", subs[0].SubID, 1)
					}
					run, _ := w.s.Run("R")
					if past {
						// The run a little short of its quota, so that the text would cross it.
						filler := quota - int(run.Usage.Bytes()) - chars/2
						require.Nil(t, w.send(orch("msg.send",
							`{"to":"W","body":`+jsonText(strings.Repeat("f", filler))+`}`)).err)
						run, _ = w.s.Run("R")
						require.LessOrEqual(t, run.Usage.Bytes(), int64(quota))
					}
					o := w.send(send)
					require.Nil(t, o.err, "a wind-down is taken")
					payloads, err := json.Marshal(o.events)
					require.NoError(t, err)
					marker := clippedMarker(chars)
					if past {
						require.NotContains(t, string(payloads), long)
						require.Equal(t, tc.fields, strings.Count(string(payloads),
							strings.Repeat("z", ClipStatusBytes)+marker))
					} else {
						require.Equal(t, tc.fields, strings.Count(string(payloads), long))
						require.NotContains(t, string(payloads), marker)
					}
				})
		}
	}
}

// A status change that does not wind its run down is measured (quota.go), so past the bytes quota it is refused, not
// clipped as a wind-down is: clipping it would let it come round again with a line of text every time.
func TestAMeasuredStatusChangeIsRefusedPastTheBytesQuota(t *testing.T) {
	const quota, chars = 32 << 10, 2 << 10
	text := jsonText(strings.Repeat("z", chars))
	for _, tc := range []struct {
		name  string
		setup []loopRequest
		send  loopRequest
	}{
		{name: "run blocked", send: orch("run.transition", `{"to":"blocked","reason":`+text+`}`)},
		{
			name:  "task retried",
			setup: []loopRequest{orch("task.transition", `{"taskId":"W","to":"failed"}`)},
			send:  orch("task.transition", `{"taskId":"W","to":"queued","reason":`+text+`}`),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := textWorld(t, quota)
			for _, r := range tc.setup {
				require.Nil(t, w.send(r).err, "setup %s", r.method)
			}
			// The run a little short of its quota, so that the text would cross it and a clipped one would not.
			run, _ := w.s.Run("R")
			filler := quota - int(run.Usage.Bytes()) - chars/2
			require.Nil(t, w.send(orch("msg.send", `{"to":"W","body":`+jsonText(strings.Repeat("f", filler))+`}`)).err)
			o := w.send(tc.send)
			require.NotNil(t, o.err, "a measured status change past the quota is refused")
			require.Equal(t, "quota-"+events.QuotaBytes, o.err.Reason)
		})
	}
}

func TestClipTextsKeepsALineAndMarksIt(t *testing.T) {
	long, longer := strings.Repeat("é", 300), strings.Repeat("日", 1000)
	short, empty := strings.Repeat("é", 10), ""
	require.True(t, clipTexts(256, &short, &long, &empty, &longer))
	require.Equal(t, strings.Repeat("é", 10), short, "a text within n is kept")
	require.Empty(t, empty)
	require.Equal(t, strings.Repeat("é", 128)+clippedMarker(300), long)
	// 85 three-byte chars are 255 bytes: the 86th would pass 256.
	require.Equal(t, strings.Repeat("日", 85)+clippedMarker(1000), longer)

	// A text the mark would lengthen is left whole.
	barely := strings.Repeat("a", 260)
	require.False(t, clipTexts(256, &barely))
	require.Len(t, barely, 260)
}

// A message's strings besides its body and subject — its replyTo, copied
// to every recipient, its ids — and every event's command id count against
// the bytes quota: a loop of one-byte messages to many recipients, each
// with the longest replyTo and command id, stops at the quota.
func TestAMessagesOtherStringsCountAgainstTheBytesQuota(t *testing.T) {
	const quota = 64 << 10
	w := textWorld(t, quota)
	to := []string{}
	for i := range 16 {
		id := "T" + strconv.Itoa(i)
		require.Nil(t, w.send(orch("task.create", `{"taskId":"`+id+`","role":"executor","agent":"a","title":"t",`+
			`"cwd":"/w"}`)).err)
		to = append(to, id)
	}
	toJSON, _ := json.Marshal(to)
	replyTo := jsonText(strings.Repeat("\U0001D11E", MaxIDChars)) // 1 KiB
	refused := w.repeat([]loopRequest{
		orch("msg.send", `{"to":`+string(toJSON)+`,"body":"x","replyTo":`+replyTo+`}`),
	}, 200)
	require.Positive(t, refused, "the loop met the quota")
	run, _ := w.s.Run("R")
	require.LessOrEqual(t, run.Usage.Bytes(), int64(quota), "the run passed its bytes quota")
	require.Less(t, run.Usage.Events, int64(16*200/4), "the loop stopped early")
}
