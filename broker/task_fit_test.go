package broker

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// TestTasksPastADependsOnTooLargeForAFrame: a task's dependsOn lists up to 1,024 task ids of up to 256 chars, and the
// task.create that names them fits in a frame where the task read back, with its runId, status, usage and times,
// does not. query.tasks answered oversize-frame at such a task for good — its texts omitted or not — no cursor
// passing it, so the orchestrator read no later task. It is sent without its dependsOn (null, dependsOnOmitted) when
// leaving its texts out is not enough, and the list is read page by page with query.tasks {taskId}, every id once and
// in order, each answer within the frame (TestADependsOnLargerThanAFrameIsReadPageByPage). A task that fits keeps
// its dependsOn, and at the default frame the task is whole.
func TestTasksPastADependsOnTooLargeForAFrame(t *testing.T) {
	for _, frame := range []int{wire.MaxFrameFloor, 4096, 0} {
		t.Run(fmt.Sprint(frame), func(t *testing.T) {
			o, _ := orchestratorAndP(t, frame)
			// As many dependencies as a task.create of the frame carries (its request, ids of 48 chars), and at the
			// default frame those of 4 KiB.
			size := frame
			if size == 0 {
				size = 4096
			}
			n := (size - 160) / 51
			var deps []any
			want := []string{}
			for i := range n {
				id := fmt.Sprintf("D%02d-%s", i, strings.Repeat("d", 44))
				o.ok("task.create", map[string]any{"taskId": id, "role": "r", "agent": "a", "title": "t", "cwd": "/w"})
				deps = append(deps, id)
				want = append(want, id)
			}
			o.ok("task.create", map[string]any{"taskId": "W", "role": "r", "agent": "a", "title": "t", "cwd": "/w", "dependsOn": deps})
			o.ok("task.create", map[string]any{"taskId": "X", "role": "r", "agent": "a", "title": "t", "cwd": "/w", "dependsOn": deps[:1]})

			tasks := everyItem(t, o, "query.tasks", nil, "tasks")
			require.Len(t, tasks, 2+n+2, "every task is listed, those after W too")
			w, x := tasks[len(tasks)-2], tasks[len(tasks)-1]
			require.Equal(t, "W", w["id"])
			require.Equal(t, "X", x["id"])
			require.Equal(t, []any{want[0]}, x["dependsOn"], "a task that fits keeps its dependsOn")
			require.NotContains(t, x, "dependsOnOmitted")
			if frame == 0 {
				require.Len(t, w["dependsOn"], n, "at the default frame the task is whole")
				require.NotContains(t, w, "dependsOnOmitted")
				require.NotContains(t, w, "textsOmitted")
				return
			}
			require.Equal(t, true, w["dependsOnOmitted"], "the dependsOn is left out, and it says so")
			require.Nil(t, w["dependsOn"])
			require.Equal(t, "queued", w["status"])
			// NB: the dependsOn is left out before the names: a task that fits without it keeps them.
			require.NotContains(t, w, "namesOmitted", "names go only where leaving out dependsOn is not enough")
			require.Equal(t, "r", w["role"])
			require.Equal(t, runR, w["runId"])
			if frame > wire.MaxFrameFloor {
				pages := pager{t: t, frame: frame}
				require.Len(t, pages.all(o, "query.tasks", nil, "tasks", "id"), 2+n+2)
			}

			require.Equal(t, want, dependsOnPages(t, o, "W", frame))

			for _, tc := range []struct {
				params map[string]any
				code   wire.Code
			}{
				{params: map[string]any{"taskId": "nope"}, code: wire.CodeNoTask},
				{params: map[string]any{"taskId": "W", "cursor": "zzzz"}, code: wire.CodeBadParams},
			} {
				r := o.call("query.tasks", tc.params)
				require.NotNil(t, r.Error, "%v", tc.params)
				require.Equal(t, tc.code, r.Error.Code, "%v", tc.params)
			}
		})
	}
}

// TestATasksDependsOnIsReadByItsRunsReadersOnly: query.tasks {taskId} answers the task's whole dependsOn in one page
// when it fits, and is query.tasks': a worker may not read it.
func TestATasksDependsOnIsReadByItsRunsReadersOnly(t *testing.T) {
	o, p := orchestratorAndP(t, 0)
	o.ok("task.create", map[string]any{"taskId": "W", "role": "r", "agent": "a", "title": "t", "cwd": "/w",
		"dependsOn": []any{taskP}})
	require.Equal(t, map[string]any{"taskId": "W", "dependsOn": []any{taskP}, "hasMore": false, "total": float64(1)},
		o.ok("query.tasks", map[string]any{"taskId": "W"}))
	r := p.call("query.tasks", map[string]any{"taskId": "W"})
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeForbidden, r.Error.Code)
}

// TestADependsOnLargerThanAFrameIsReadPageByPage: a task recorded under a larger --max-frame (or imported) may list
// more dependencies than a frame holds: query.tasks {taskId} pages them, every id once and in order, each page within
// the frame whatever the length of the task's id, and query.tasks lists the task without them.
func TestADependsOnLargerThanAFrameIsReadPageByPage(t *testing.T) {
	for _, frame := range []int{wire.MaxFrameFloor, 4096} {
		t.Run(fmt.Sprint(frame), func(t *testing.T) {
			fs := vfs.NewMem()
			f := newFixture(t, fixtureOpts{fs: fs})
			s := f.seed()
			o := f.dial()
			o.hello(runR, events.OrchestratorKey, s.orch)
			var deps []any
			want := []string{}
			for i := range 3 * frame / 51 {
				id := fmt.Sprintf("D%03d-%s", i, strings.Repeat("d", 43))
				o.ok("task.create", map[string]any{"taskId": id, "role": "r", "agent": "a", "title": "t", "cwd": "/w"})
				deps = append(deps, id)
				want = append(want, id)
			}
			// NB: and a task of the longest id, which each page of its dependsOn holds beside the ids.
			long := strings.Repeat("W", commands.MaxIDChars)
			for _, id := range []string{"W", long} {
				o.ok("task.create", map[string]any{"taskId": id, "role": "r", "agent": "a", "title": "t", "cwd": "/w",
					"dependsOn": deps})
			}
			f.close()

			g := newFixture(t, fixtureOpts{fs: fs, opts: Options{MaxFrame: frame}})
			o = g.dial()
			o.hello(runR, events.OrchestratorKey, s.orch)
			tasks := everyItem(t, o, "query.tasks", nil, "tasks")
			w := tasks[len(tasks)-2]
			require.Equal(t, "W", w["id"])
			require.Equal(t, true, w["dependsOnOmitted"])
			require.Equal(t, want, dependsOnPages(t, o, "W", frame))
			require.Equal(t, want, dependsOnPages(t, o, long, frame))
		})
	}
}

// dependsOnPages reads task taskID's dependsOn with query.tasks {taskId}, following nextCursor with the largest limit
// each page allows, each answer within frame and holding at least one id.
func dependsOnPages(t *testing.T, c *client, taskID string, frame int) []string {
	t.Helper()
	var got []string
	seen := cursorsSeen{}
	for cursor, pages := "", 0; ; pages++ {
		req := map[string]any{"taskId": taskID, "limit": 1000}
		if cursor != "" {
			req["cursor"] = cursor
		}
		r := c.call("query.tasks", req)
		require.Nil(t, r.Error, "page %d", pages+1)
		require.LessOrEqual(t, c.rd.FrameBytes(), frame)
		var res struct {
			TaskID     string   `json:"taskId"`
			DependsOn  []string `json:"dependsOn"`
			NextCursor string   `json:"nextCursor"`
			HasMore    bool     `json:"hasMore"`
			Total      int      `json:"total"`
		}
		require.NoError(t, json.Unmarshal(r.Result, &res))
		require.Equal(t, taskID, res.TaskID)
		require.NotEmpty(t, res.DependsOn, "page %d", pages+1)
		require.Equal(t, res.NextCursor != "", res.HasMore)
		got = append(got, res.DependsOn...)
		if !res.HasMore {
			require.Equal(t, len(got), res.Total)
			return got
		}
		seen.follow(t, res.NextCursor, "query.tasks")
		cursor = res.NextCursor
	}
}

// TestTasksPastNamesTooLargeForAFrame: a task's role, agent and stepId are up to 256 chars each, of any char: chars
// JSON writes in six bytes ('<', sent in one) make a task read back larger than a frame of 4 KiB, or of 1 KiB, that
// its task.create fit in, its texts and dependsOn left out or not. query.tasks answered oversize-frame at it for
// good, no cursor passing it. Such a task is sent without them too (empty, namesOmitted), every other field as it is.
func TestTasksPastNamesTooLargeForAFrame(t *testing.T) {
	for _, tc := range []struct {
		frame, chars int
	}{{frame: wire.MaxFrameFloor, chars: 100}, {frame: 4096, chars: commands.MaxIDChars}} {
		t.Run(fmt.Sprint(tc.frame), func(t *testing.T) {
			o, _ := orchestratorAndP(t, tc.frame)
			long := strings.Repeat("<", tc.chars)
			o.okUnescaped("task.create", map[string]any{"taskId": "W", "role": long, "agent": long, "stepId": long,
				"title": "t", "cwd": "/w"})
			o.ok("task.create", map[string]any{"taskId": "X", "role": "r", "agent": "a", "title": "t", "cwd": "/w"})

			tasks := everyItem(t, o, "query.tasks", nil, "tasks")
			require.Len(t, tasks, 4, "every task is listed, those after W too")
			w, x := tasks[2], tasks[3]
			require.Equal(t, "W", w["id"])
			require.Equal(t, true, w["namesOmitted"], "the names are left out, and it says so")
			require.Equal(t, "", w["role"])
			require.Equal(t, "", w["agent"])
			require.Nil(t, w["stepId"])
			require.Equal(t, "queued", w["status"])
			require.Equal(t, "X", x["id"])
			require.Equal(t, "r", x["role"])
			require.NotContains(t, x, "namesOmitted")
		})
	}
}

// TestTasksPastIDsTooLargeForAFrame: a task carries its run's id (up to 255 chars) beside its own (up to 256), its
// usage (four counters of up to 2^40, its cost and turns) and times, all of which the run.create, task.create and
// task.usage fit in a frame of 1 KiB, which a daemon allows: reported, it read back larger than the frame without
// its texts, dependsOn and names too, and query.tasks answered oversize-frame at it for good, no cursor passing it,
// so the orchestrator read no later task. Such a task is sent without its runId too (empty: the run the query names),
// namesOmitted true, every other field as it is; one that fits is sent whole.
func TestTasksPastIDsTooLargeForAFrame(t *testing.T) {
	_, o, runID := longestRunID(t, nil)
	long := strings.Repeat("t", commands.MaxIDChars)
	const most = int64(commands.MaxUsageTokens)
	for _, id := range []string{long, "S"} {
		o.ok("task.create", map[string]any{"taskId": id, "role": "r", "agent": "a", "title": "t", "cwd": "/w"})
		o.ok("task.transition", map[string]any{"taskId": id, "to": "running"})
		for range 3 {
			o.ok("task.usage", map[string]any{"taskId": id, "input": most, "output": most, "cacheRead": most,
				"cacheWrite": most, "cost": math.MaxFloat64, "turns": most})
		}
		o.ok("task.transition", map[string]any{"taskId": id, "to": "completed"})
	}

	large, small := largeThenSmall(t, o, "query.tasks", "tasks")
	require.Equal(t, long, large["id"])
	require.Equal(t, true, large["namesOmitted"], "the names and runId are left out, and it says so")
	require.Equal(t, true, large["textsOmitted"])
	require.Equal(t, "", large["runId"])
	require.Equal(t, "", large["role"])
	require.Equal(t, "completed", large["status"])
	require.Equal(t, map[string]any{"input": float64(most), "output": float64(most), "cacheRead": float64(most),
		"cacheWrite": float64(most), "cost": math.MaxFloat64, "turns": float64(most)}, large["usage"])
	require.Equal(t, "S", small["id"])
	require.Equal(t, runID, small["runId"], "a task that fits is sent whole")
	require.Equal(t, "r", small["role"])
	require.NotContains(t, small, "namesOmitted")
	require.NotContains(t, small, "textsOmitted")
}

// TestTasksPastAnImportedQuestionTooLargeForAFrame: an import records a question id of up to 128 chars that JSON
// writes in up to 256 bytes (events.ImportedQuestionIDOK), where crewlog's own wait.request mints one of a few dozen.
// A task of an id of 256 chars parked on such a question, its usage at 2^40 per counter, whose every import.append
// fits in a frame of 1 KiB, read back larger than the frame without its texts, dependsOn, names and runId too, and
// query.tasks answered oversize-frame at it for good, the admin reading no later task. Such a task is sent without
// its waiting question's id too (empty: query.run's waitState names the question the run is parked on), namesOmitted
// true, every other field as it is.
func TestTasksPastAnImportedQuestionTooLargeForAFrame(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}})
	a := f.dial()
	a.helloAdmin()
	run := "team_" + strings.Repeat("r", commands.MaxRunIDChars-len("team_"))
	long := strings.Repeat("t", commands.MaxIDChars)
	question := strings.Repeat("<", events.MaxIDChars/6) // 42 chars, 252 bytes in JSON
	const at, most = int64(1790928000000), int64(commands.MaxUsageTokens)
	importEach(t, a, run, at, []importedEvent{
		{events.TypeRunCreated, map[string]any{"team": "t", "goal": "g", "cwd": "/w"}},
		{events.TypeRunRunning, map[string]any{}},
		{events.TypeTaskCreated, map[string]any{"taskId": long, "role": "r", "agent": "a", "title": "t", "cwd": "/w",
			"kind": events.TaskKindWorkflow}},
		{events.TypeTaskCreated, map[string]any{"taskId": "S", "role": "r", "agent": "a", "title": "t", "cwd": "/w",
			"kind": events.TaskKindWorkflow}},
		{events.TypeTaskStarted, map[string]any{"taskId": long}},
		{events.TypeTaskUsage, map[string]any{"taskId": long, "input": most, "output": most, "cacheRead": most,
			"cacheWrite": most, "turns": most, "cost": math.MaxFloat64}},
		{events.TypeTaskWaiting, map[string]any{"taskId": long, "questionId": question, "askedAt": at,
			"deadline": at + 1000}},
		{events.TypeAskRequested, map[string]any{"taskId": long, "questionId": question, "question": "?",
			"askedAt": at, "deadline": at + 1000, "timeoutSec": 1}},
	})

	tasks := everyItem(t, a, "query.tasks", map[string]any{"runId": run}, "tasks")
	require.LessOrEqual(t, a.rd.FrameBytes(), wire.MaxFrameFloor)
	require.Len(t, tasks, 2, "every task is listed, the one after the large one too")
	large, small := tasks[0], tasks[1]
	require.Equal(t, long, large["id"])
	require.Equal(t, true, large["namesOmitted"], "the question's id is left out with the names, and it says so")
	require.Equal(t, "waiting", large["status"])
	require.Equal(t, map[string]any{"questionId": "", "askedAt": float64(at), "deadline": float64(at + 1000)},
		large["waiting"])
	require.Equal(t, "S", small["id"])
	require.NotContains(t, small, "namesOmitted")

	r := a.call("query.run", map[string]any{"runId": run})
	require.Nil(t, r.Error)
	var parked map[string]any
	require.NoError(t, json.Unmarshal(r.Result, &parked))
	require.Equal(t, question, parked["waitState"].(map[string]any)["questionId"], "query.run names the question")
}

// TestTasksPastIDsKeepTheirQuestionWhenItFits: a task of an id of 256 chars in a run of an id of 255, parked on a
// question crewlog minted (a few dozen chars), outgrows a frame of 1 KiB with its runId, and was sent without its
// waiting question's id too, with the names: the run's waitState names only the question the run was parked on last,
// and events.since sends the ask.requested of such a task without its data, so the orchestrator learnt no other
// parked task's question from any read, and could not answer it (pi-crew's ask tool takes a response carrying
// exactly that id). The question's id is left out only when the task would not fit without its names either.
func TestTasksPastIDsKeepTheirQuestionWhenItFits(t *testing.T) {
	f, o, runID := longestRunID(t, nil)
	asked := map[string]string{}
	for _, c := range []string{"t", "u"} {
		long := strings.Repeat(c, commands.MaxIDChars)
		o.ok("task.create", map[string]any{"taskId": long, "role": "r", "agent": "a", "title": "t", "cwd": "/w"})
		o.ok("task.transition", map[string]any{"taskId": long, "to": "running"})
		p := f.dial()
		p.hello(runID, long, o.ok("credential.issue", map[string]any{"taskId": long})["token"].(string))
		asked[long] = p.ok("wait.request", map[string]any{"question": "?"})["questionId"].(string)
	}

	tasks := everyItem(t, o, "query.tasks", nil, "tasks")
	require.LessOrEqual(t, o.rd.FrameBytes(), wire.MaxFrameFloor)
	require.Len(t, tasks, 2)
	for _, task := range tasks {
		require.Equal(t, true, task["namesOmitted"], "the names and runId are left out")
		require.Equal(t, "", task["runId"])
		require.Equal(t, asked[task["id"].(string)], task["waiting"].(map[string]any)["questionId"],
			"the question the task waits on")
	}
}
