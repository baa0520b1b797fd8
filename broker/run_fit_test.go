package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
)

// TestRunsPastNamesTooLargeForAFrame: a run's cwd is up to 4,096 chars, its team and workflow up to 256, of any char:
// chars JSON writes in six bytes ('<', sent in one by the run.create) make the run read back larger than a frame of
// 4 KiB, or of 1 KiB, that its run.create fit in, its goal left out or not. query.run answered oversize-frame for it
// for good, and query.runs at it, no cursor passing it, so the admin read no later run. Such a run is sent without
// them too (empty, namesOmitted), every other field as it is; a run that fits is sent whole.
func TestRunsPastNamesTooLargeForAFrame(t *testing.T) {
	for _, tc := range []struct {
		frame, chars int
	}{{frame: wire.MaxFrameFloor, chars: 60}, {frame: 4096, chars: 250}} {
		t.Run(fmt.Sprint(tc.frame), func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: tc.frame}})
			f.seed()
			a := f.dial()
			a.helloAdmin()
			long := strings.Repeat("<", tc.chars)
			a.okUnescaped("run.create", map[string]any{"runId": "R02", "team": long, "workflow": long, "cwd": long,
				"goal": "g"})
			a.ok("run.create", map[string]any{"runId": "R03", "team": "t", "goal": "g", "cwd": "/w"})

			r := a.call("query.run", map[string]any{"runId": "R02"})
			require.Nil(t, r.Error)
			require.LessOrEqual(t, a.rd.FrameBytes(), tc.frame)
			var run map[string]any
			require.NoError(t, json.Unmarshal(r.Result, &run))
			require.Equal(t, true, run["namesOmitted"], "the names are left out, and it says so")
			require.Equal(t, "", run["cwd"])
			require.Equal(t, "", run["team"])
			require.Equal(t, "R02", run["runId"])
			require.Equal(t, "queued", run["status"])

			runs := everyItem(t, a, "query.runs", nil, "runs")
			require.Len(t, runs, 3, "every run is listed, those after R02 too")
			require.Equal(t, "R02", runs[1]["runId"])
			require.Equal(t, true, runs[1]["namesOmitted"])
			require.Equal(t, "R03", runs[2]["runId"])
			require.Equal(t, "/w", runs[2]["cwd"])
			require.NotContains(t, runs[2], "namesOmitted")
		})
	}
}

// TestRunsPastAParkedTaskTooLargeForAFrame: a run parked on a question carries the asking task's id (up to 256 chars)
// in its waitState beside its own (up to 255), its budget's total, fractions and use and its times, all of which the
// run.create, task.create, wait.request and task.usage fit in a frame of 1 KiB, which a daemon allows: the run read
// back larger than the frame without its texts and names too, and query.runs answered oversize-frame at it for good,
// no cursor passing it, so the admin read no later run. Such a run is sent without its waitState's taskId too (empty:
// query.tasks lists the task waiting on the question), namesOmitted true, every other field as it is; one that fits is
// sent whole, and query.run answers the run within the frame.
func TestRunsPastAParkedTaskTooLargeForAFrame(t *testing.T) {
	f, o, runID := longestRunID(t, map[string]any{"budgetTotal": int64(commands.MaxBudgetTotal),
		"budgetWarning": 1.2345678901234567e-07, "budgetAbort": 0.9999999999999999})
	long := strings.Repeat("t", commands.MaxIDChars)
	o.ok("task.create", map[string]any{"taskId": long, "role": "r", "agent": "a", "title": "t", "cwd": "/w"})
	o.ok("task.transition", map[string]any{"taskId": long, "to": "running"})
	p := f.dial()
	p.hello(runID, long, o.ok("credential.issue", map[string]any{"taskId": long})["token"].(string))
	question := p.ok("wait.request", map[string]any{"question": "?"})["questionId"].(string)
	const most = int64(commands.MaxUsageTokens)
	o.ok("task.usage", map[string]any{"taskId": long, "input": most, "output": most, "cacheRead": most,
		"cacheWrite": most})
	a := f.dial()
	a.helloAdmin()
	a.ok("run.create", map[string]any{"runId": "S", "team": "t", "goal": "g", "cwd": "/w"})

	large, small := largeThenSmall(t, a, "query.runs", "runs")
	require.Equal(t, runID, large["runId"])
	require.Equal(t, true, large["namesOmitted"], "the waitState's taskId is left out, and it says so")
	require.Equal(t, map[string]any{"taskId": "", "questionId": question, "askedAt": float64(1796040000007)},
		large["waitState"])
	require.Equal(t, true, large["budgetWarned"])
	require.Equal(t, float64(3*most), large["budgetUsed"])
	require.Equal(t, "S", small["runId"])
	require.Equal(t, "/w", small["cwd"], "a run that fits is sent whole")
	require.NotContains(t, small, "namesOmitted")

	r := a.call("query.run", map[string]any{"runId": runID})
	require.Nil(t, r.Error)
	require.LessOrEqual(t, a.rd.FrameBytes(), wire.MaxFrameFloor)
	var run map[string]any
	require.NoError(t, json.Unmarshal(r.Result, &run))
	require.Equal(t, runID, run["runId"])
	require.NotNil(t, run["waitState"])
}
