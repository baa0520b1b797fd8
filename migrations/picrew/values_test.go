package picrew

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// writeFiles writes files (slash paths relative to root → contents) under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	for p, b := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(b), 0o644))
	}
}

// manifestOf is the manifest.json of run in status status, created at valuesAt.
func manifestOf(run, status string) string {
	return `{"runId":"` + run + `","team":"core","workflow":"implement","goal":"g","status":"` + status +
		`","cwd":"/srv/app","createdAt":1790928000000}`
}

// valuesAt is the time (unix ms) of these tests' lines, before their recorder's clock (valuesClock).
const valuesAt = int64(1790928000000)

// valuesClock is the recorder's clock of these tests.
func valuesClock() time.Time { return time.UnixMilli(timesClockMs) }

// eventLine is one line of events.jsonl at valuesAt: event typ of task with data (a JSON object) and seq.
func eventLine(seq int, typ, task, data string) string {
	return fmt.Sprintf(`{"time":%d,"type":"%s","taskId":"%s","message":"?","data":%s,"metadata":{"seq":%d}}`,
		valuesAt, typ, task, data, seq) + "\n"
}

// stateOf is the projection state l folds to.
func stateOf(t *testing.T, l *eventlog.Log) *projections.State {
	s := projections.New()
	require.NoError(t, projections.Replay(s, l, 0))
	return s
}

// expireAll decides and folds into s what the engine clock expires once every deadline has passed.
func expireAll(t *testing.T, s *projections.State, name string) {
	const later = int64(9e12)
	for i, c := range commands.DueExpiries(s, later) {
		d, err := commands.Decide(s, c, commands.Env{Now: later * 1e6, CommandID: fmt.Sprint("expire-", i),
			NewID: func() string { return "x" }})
		require.NoError(t, err, name)
		for _, ev := range d.Events {
			projections.Apply(s, ev)
		}
	}
}

// TestImportedUsageIsACount: a task's usage in tasks.json is what crewlog's task.usage takes, or it is not imported.
// task.usage refuses a counter below zero or above commands.MaxUsageTokens and a cost below zero; an imported one
// was kept, and a negative one lowered the run's budget use (Σ of its tasks' usage) below what the other tasks
// spent — the run's budget abort then came later than the files' spending warranted, or never. The usage is refused
// whole, as task.usage refuses the report, and reported, by the one-shot import and a follower alike.
func TestImportedUsageIsACount(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	task := func(id, usage string) string {
		return `{"id":"` + id + `","stepId":"` + id +
			`","role":"executor","status":"completed","usage":` + usage + `}`
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"completed","cwd":"/srv/app","createdAt":1790928000000,"budgetTotal":100000}`,
		"state/runs/" + run + "/tasks.json": `[` + strings.Join([]string{
			task("01_plan", `{"input":1000,"output":200,"cacheRead":50,"cost":0.25,"turns":3}`),
			task("02_exec", `{"input":-900,"output":5}`),
			task("03_check", `{"input":5,"cost":-2.5}`),
			task("04_big", `{"output":2000000000000}`),
			task("05_turns", `{"input":7,"turns":-1}`),
		}, ",") + `]`,
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 4, "%q", reports)
	for i, c := range []struct{ id, problem string }{
		{"02_exec", "input -900 is not a count of 0..1099511627776"},
		{"03_check", "cost -2.5 is below zero"},
		{"04_big", "output 2000000000000 is not a count of 0..1099511627776"},
		{"05_turns", "turns -1 is not a count of 0..1099511627776"},
	} {
		require.True(t, strings.HasSuffix(reports[i], "task "+c.id+": usage "+c.problem+
			": not imported (crewlog's task.usage refuses such a report)"), reports[i])
	}
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		r, ok := s.Run(run)
		require.True(t, ok, name)
		require.Equal(t, int64(1200), r.BudgetUsed,
			"%s: the run's budget use is the usage of its one task that reported a count", name)
		for _, id := range []string{"02_exec", "03_check", "04_big", "05_turns"} {
			tk, ok := s.Task(run, id)
			require.True(t, ok, name)
			require.Zero(t, tk.Usage, "%s: %s", name, id)
		}
		tk, _ := s.Task(run, "01_plan")
		require.Equal(t, projections.Usage{Input: 1000, Output: 200, CacheRead: 50, Cost: 0.25, Turns: 3},
			tk.Usage, name)
	}
}

// TestImportedSpendIsACount: an admission's reservedTokens and an allocation's tokensSpent in the files are spends
// crewlog's import.append records (0..events.MaxUsageTokens), or they are not imported. import.append refuses a
// budget.reserved of more: a follower sending one had its write refused at every pass, and the one-shot import
// recorded what a follower cannot, pushing the task's tokensSpent, and its run's budget use, toward saturation. The
// admission is skipped and the allocation left out, reported, by the one-shot import and a follower alike.
func TestImportedSpendIsACount(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	over := int64(events.MaxUsageTokens) + 1
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"completed","cwd":"/srv/app","createdAt":1790928000000}`,
		"state/runs/" + run + "/tasks.json": `[` + strings.Join([]string{
			fmt.Sprintf(`{"id":"01_plan","stepId":"plan","role":"planner","status":"completed","allocation":`+
				`{"tokensGranted":%d,"tokensSpent":%d}}`, 2*over, over),
			`{"id":"02_exec","stepId":"exec","role":"executor","status":"completed",` +
				`"allocation":{"tokensGranted":1000,"tokensSpent":100}}`,
		}, ",") + `]`,
		"state/runs/" + run + "/events.jsonl": eventLine(1, "task.started", "02_exec", `{}`) +
			eventLine(2, "delegate.admitted", "02_exec", fmt.Sprintf(`{"subId":"s1","reservedTokens":%d,`+
				`"timeoutSec":60}`, over)) +
			eventLine(3, "delegate.admitted", "02_exec", `{"subId":"s2","reservedTokens":40,"timeoutSec":60}`),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 2, "%q", reports)
	require.Contains(t, reports[0], fmt.Sprintf("delegate.admitted for s1 reserves %d tokens, not 0..%d: skipped",
		over, over-1))
	require.Contains(t, reports[1], fmt.Sprintf("task 01_plan: allocation of %d tokens granted, %d spent: ",
		2*over, over))
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		a, _ := s.Allocation(run, "01_plan")
		require.Zero(t, a.TokensSpent, "%s: the allocation is left out", name)
		a, _ = s.Allocation(run, "02_exec")
		require.Equal(t, int64(100), a.TokensSpent, "%s: s2's reservation, topped up to what tasks.json shows", name)
		_, admitted := s.Delegation(run, "s1")
		require.False(t, admitted, name)
	}
}

// TestImportedGrantIsOneABudgetSeeds: an allocation's tokensGranted in tasks.json is a grant crewlog's engine seeds
// (0..events.MaxBudgetTotal, the bound of the budgetTotal it is seeded from), or the allocation is not imported.
// crewd's import.append refuses a grant above it: a follower sending one had its write refused at every pass, and the
// one-shot import recorded a grant a JavaScript reader reads as another number. The allocation is left out and
// reported, by the one-shot import and a follower alike.
func TestImportedGrantIsOneABudgetSeeds(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	over := int64(events.MaxBudgetTotal) + 1
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[` + strings.Join([]string{
			fmt.Sprintf(`{"id":"01_plan","stepId":"plan","role":"planner","status":"completed","allocation":`+
				`{"tokensGranted":%d,"tokensSpent":10}}`, over),
			fmt.Sprintf(`{"id":"02_exec","stepId":"exec","role":"executor","status":"completed","allocation":`+
				`{"tokensGranted":%d,"tokensSpent":10}}`, over-1),
		}, ",") + `]`,
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 1, "%q", reports)
	require.Contains(t, reports[0], fmt.Sprintf("task 01_plan: allocation of %d tokens granted, 10 spent: ", over))
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		_, ok := s.Allocation(run, "01_plan")
		require.False(t, ok, "%s: the allocation is left out", name)
		a, _ := s.Allocation(run, "02_exec")
		require.Equal(t, projections.Allocation{TokensGranted: over - 1, TokensSpent: 10}, a, name)
	}
}

// parkedRunFiles is a run of status status whose tasks tasks.json shows waiting, each differently short of the
// question the engine parks a task on: a waiting record whose question the events never asked (01_plan), none at all
// (02_exec), a task.waiting whose ask.requested is missing (03_check), a question answered whose task.resumed is
// missing (04_review), and a question id no wait.resolve takes (05_long, 129 chars).
func parkedRunFiles(run, status string, at int64) map[string]string {
	long := strings.Repeat("q", commands.MaxQuestionIDChars+1)
	waiting := func(id, q string) string {
		return fmt.Sprintf(`{"id":"%s","stepId":"%s","role":"analyst","status":"waiting","startedAt":%d,`+
			`"waiting":{"questionId":"%s","askedAt":%d,"deadline":%d,"options":["yes","no"]}}`, id, id, at, q,
			at, at+600_000)
	}
	return map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"` + status + `","cwd":"/srv/app","createdAt":1790928000000}`,
		"state/runs/" + run + "/tasks.json": `[` + strings.Join([]string{
			waiting("01_plan", "q1"),
			fmt.Sprintf(`{"id":"02_exec","stepId":"exec","role":"executor","status":"waiting","startedAt":%d}`, at),
			waiting("03_check", "q3"),
			waiting("04_review", "q4"),
			waiting("05_long", long),
		}, ",") + `]`,
		"state/runs/" + run + "/events.jsonl": eventLine(1, "task.started", "03_check", `{}`) +
			eventLine(2, "task.waiting", "03_check", `{"questionId":"q3","deadline":`+fmt.Sprint(at+600_000)+`}`) +
			eventLine(3, "task.started", "04_review", `{}`) +
			eventLine(4, "task.waiting", "04_review", `{"questionId":"q4","deadline":`+fmt.Sprint(at+600_000)+`}`) +
			eventLine(5, "ask.requested", "04_review", `{"questionId":"q4","deadline":`+fmt.Sprint(at+600_000)+`}`) +
			eventLine(6, "ask.answered", "04_review", `{"questionId":"q4"}`),
	}
}

// requireParkedOnOpenQuestions holds the tasks of run in s to what the engine records: a task waits only on a
// question that is pending, under an id wait.resolve takes; and once the engine clock passes every deadline (its
// AskExpire, decided and folded), no task of the run waits.
func requireParkedOnOpenQuestions(t *testing.T, s *projections.State, run, name string) {
	for _, tk := range s.Tasks(run) {
		if tk.Status != projections.TaskWaiting {
			continue
		}
		require.NotNil(t, tk.Waiting, "%s: %s waits on nothing", name, tk.TaskID)
		q := tk.Waiting.QuestionID
		require.True(t, q != "" && len(q) <= commands.MaxQuestionIDChars,
			"%s: %s waits on question %q, which wait.resolve refuses", name, tk.TaskID, q)
		a, ok := s.Ask(run, q)
		require.True(t, ok, "%s: %s waits on question %s, never asked", name, tk.TaskID, q)
		require.Equal(t, projections.AskPending, a.Status, "%s: %s waits on question %s", name, tk.TaskID, q)
	}
	expireAll(t, s, name)
	for _, tk := range s.Tasks(run) {
		require.NotEqual(t, projections.TaskWaiting, tk.Status, "%s: %s waits after every deadline passed",
			name, tk.TaskID)
	}
}

// TestImportedWaitingTaskIsParkedOnAnOpenQuestion: the engine parks a task (task.waiting) only together with the
// question it asks (ask.requested), under an id of 1..128 chars, and only the question's answer (wait.resolve), its
// deadline (the engine clock) or the task's own end moves it on. An import recorded tasks.json's waiting, or a
// task.waiting line, as it was: with no question behind it (pi-crew's compaction keeps the last events, and a run's
// waiting task outlives its ask.requested), or one already answered, or one no wait.resolve can name, the task
// waited for good, as nothing answers or times out a question that is not pending. The import now records a waiting
// task's question when the history lacks it (ask.requested from the waiting record, without its text, which only
// that event carries), and a task waiting on a question it cannot leave open (answered or timed out already, or an
// id wait.resolve refuses) as resumed, reported; the one-shot import and a follower alike.
func TestImportedWaitingTaskIsParkedOnAnOpenQuestion(t *testing.T) {
	t.Run("running", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, parkedRunFiles(timesRunCreated, "running", valuesAt))
		l := openFuzzStore(t)
		defer l.Close()
		sum, err := Import(l, root, &Options{Clock: valuesClock})
		require.NoError(t, err)
		var reports []string
		for _, s := range sum.Skipped {
			reports = append(reports, s.String())
		}
		requireParkedReports(t, reports)
		s := stateOf(t, l)
		// 01_plan's question from its waiting record, 03_check's from its task.waiting line, which names no options.
		for id, q := range map[string]string{"01_plan": "q1", "03_check": "q3"} {
			tk, _ := s.Task(timesRunCreated, id)
			require.Equal(t, projections.TaskWaiting, tk.Status, id)
			a, ok := s.Ask(timesRunCreated, q)
			require.True(t, ok, id)
			want := projections.Ask{RunID: timesRunCreated, TaskID: id, QuestionID: q, AskedAt: valuesAt,
				Deadline: valuesAt + 600_000, TimeoutSec: 600, Status: projections.AskPending}
			if id == "01_plan" {
				want.Options = []string{"yes", "no"}
			}
			require.Equal(t, want, a, id)
		}
		requireParkedOnOpenQuestions(t, s, timesRunCreated, "import")
	})
	t.Run("finished", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, parkedRunFiles(timesRunCreated, "failed", valuesAt))
		one, followed, reports := importedTwice(t, root, valuesClock)
		requireParkedReports(t, reports)
		require.Equal(t, recorded(t, one), recorded(t, followed), "the same events")
		for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
			requireParkedOnOpenQuestions(t, stateOf(t, l), timesRunCreated, name)
		}
	})
}

// requireParkedReports holds the reports of parkedRunFiles' import: one for each task whose question the import
// could not leave open.
func requireParkedReports(t *testing.T, reports []string) {
	require.Len(t, reports, 3, "%q", reports)
	all := strings.Join(reports, "\n")
	for _, want := range []string{
		`task 02_exec: waiting on question "", which wait.resolve cannot name: imported as running`,
		`task 04_review: waiting on question "q4", which is answered or timed out already: imported as resumed`,
		`task 05_long: waiting on question "qqqq`,
	} {
		require.Contains(t, all, want)
	}
}

// TestImportedAskOptionsArePicrewsBounds: a question's options are 1..16 strings of 1..256 chars (R5), as crewlog's
// wait.request takes them; an import kept any list the files held, of any length, of strings of any length, into
// the question and its task's park marker, which every read of either copies. An empty list is no list (the log
// records none); a list out of those bounds is left out, the question kept without it, and reported.
func TestImportedAskOptionsArePicrewsBounds(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	many := `["` + strings.Repeat(`o","`, commands.MaxAskOptions) + `o"]`
	options := map[string]string{
		"q1": `["yes","no"]`, "q2": `[]`, "q3": many,
		"q4": `["` + strings.Repeat("é", commands.MaxAskOptionChars+1) + `"]`, "q5": `["yes",""]`,
		"q6": `["` + strings.Repeat("é", commands.MaxAskOptionChars) + `"]`,
	}
	var lines, tasks []string
	seq := 0
	for i, q := range []string{"q1", "q2", "q3", "q4", "q5", "q6"} {
		id := fmt.Sprintf("0%d_t", i+1)
		tasks = append(tasks, `{"id":"`+id+`","stepId":"t","role":"analyst","status":"waiting"}`)
		for _, typ := range []string{"task.started", "task.waiting", "ask.requested"} {
			seq++
			lines = append(lines, fmt.Sprintf(`{"time":%d,"type":"%s","taskId":"%s","message":"which?",`+
				`"data":{"questionId":"%s","deadline":%d,"options":%s},"metadata":{"seq":%d}}`, valuesAt, typ, id, q,
				valuesAt+600_000, options[q], seq))
		}
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"failed","cwd":"/srv/app","createdAt":1790928000000}`,
		"state/runs/" + run + "/tasks.json":   `[` + strings.Join(tasks, ",") + `]`,
		"state/runs/" + run + "/events.jsonl": strings.Join(lines, "\n") + "\n",
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 6, "%q", reports) // q3, q4 and q5, on task.waiting and ask.requested each
	for _, r := range reports {
		require.Contains(t, r, "options are not 1..16 strings of 1..256 chars: the question is imported without them")
	}
	want := map[string][]string{"q1": {"yes", "no"}, "q6": {strings.Repeat("é", commands.MaxAskOptionChars)}}
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		for i, q := range []string{"q1", "q2", "q3", "q4", "q5", "q6"} {
			a, ok := s.Ask(run, q)
			require.True(t, ok, "%s: %s", name, q)
			require.Equal(t, want[q], a.Options, "%s: %s", name, q)
			tk, _ := s.Task(run, fmt.Sprintf("0%d_t", i+1))
			require.NotNil(t, tk.Waiting, "%s: %s", name, q)
			require.Equal(t, want[q], tk.Waiting.Options, "%s: %s", name, q)
		}
	}
}

// TestImportedDelegationIsNotAWorkflowTask: crewlog mints a delegation's subId, which names its shadow task, so no
// delegation of the engine's shares its id with a task of its run; an imported delegate.admitted carries the subId
// its line names. One naming a workflow task of the run took that task for its shadow: the delegation's settlement,
// or the engine clock's expiry at its deadline, ended the workflow task — a line of the files changed what another
// record says (tasks.json has it running). One whose subId is no id crewlog takes (not 1..255 chars of
// [A-Za-z0-9_-], as tasks.json's ids are held to) became a task id no command names. Both are skipped and reported,
// with their settlement, by the one-shot import and a follower alike.
func TestImportedDelegationIsNotAWorkflowTask(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"running","cwd":"/srv/app","createdAt":1790928000000,"budgetTotal":1000}`,
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner","agent":"planner",` +
			`"status":"running"},{"id":"02_exec","stepId":"exec","role":"executor","agent":"executor",` +
			`"status":"running"}]`, "state/runs/" + run + "/events.jsonl": eventLine(1, "task.started",
			"01_plan", `{}`) +
			eventLine(2, "task.started", "02_exec", `{}`) +
			eventLine(3, "delegate.admitted", "01_plan", `{"subId":"02_exec","reservedTokens":10,"timeoutSec":60}`) +
			eventLine(4, "delegate.completed", "01_plan", `{"subId":"02_exec","ok":false}`) +
			eventLine(5, "delegate.admitted", "01_plan",
				`{"subId":"gc 1/../x","reservedTokens":10,"timeoutSec":60}`) +
			eventLine(6, "delegate.admitted", "01_plan", `{"subId":"gc-1","reservedTokens":10,"timeoutSec":60}`),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 3, "%q", reports)
	require.Contains(t, reports[0],
		`(seq 3): delegate.admitted for "02_exec": a workflow task of the run has that id: skipped`)
	require.Contains(t, reports[1], `(seq 4): delegate.completed for 02_exec, which was never admitted in the events`)
	require.Contains(t, reports[2], `(seq 5): delegate.admitted for "gc 1/../x": not an id crewlog takes (1..255 `+
		`chars of [A-Za-z0-9_-]): skipped`)
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		tk, _ := s.Task(run, "02_exec")
		require.Equal(t, projections.TaskRunning, tk.Status, "%s: the files have 02_exec running", name)
		var subs []string
		for _, d := range s.Delegations(run) {
			subs = append(subs, d.SubID)
		}
		require.Equal(t, []string{"gc-1"}, subs, name)
		expireAll(t, s, name)
		tk, _ = s.Task(run, "02_exec")
		require.Equal(t, projections.TaskRunning, tk.Status,
			"%s: the engine clock's expiries end no workflow task", name)
	}
}

// TestImportedBudgetIsWhatRunCreateTakes: a manifest's budgetTotal is 0..2^53 (commands.MaxBudgetTotal: every
// integer up to it reads back in JavaScript as itself, so the dashboard and a TypeScript runtime show the budget the
// log holds) and its budgetWarning and budgetAbort are fractions in [0,1], as crewlog's own run.create takes them. An
// import recorded any value: a budgetTotal above 2^53 that a JavaScript reader reads as another, or below zero,
// seeded the run's tasks' tokensGranted with it (SPEC §4.2); a threshold above 1 or below 0 is one no report
// reaches, or one every report does. Each is taken as absent (the run's budget unset, a threshold its default) and
// reported, by the one-shot import and a follower alike.
func TestImportedBudgetIsWhatRunCreateTakes(t *testing.T) {
	runs := map[string]string{ // run → the manifest's budget fields
		timesRunCreated:   `"budgetTotal":9007199254740994,"budgetWarning":1.5,"budgetAbort":-0.5`,
		timesRunNoCreated: `"budgetTotal":-5,"budgetWarning":0.5,"budgetAbort":1`,
	}
	root := t.TempDir()
	for run, budget := range runs {
		writeFiles(t, root, map[string]string{
			"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
				`"goal":"g","status":"running","cwd":"/srv/app","createdAt":1790928000000,` + budget + `}`,
			"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
				`"agent":"planner","status":"running"}]`,
			"state/runs/" + run + "/events.jsonl": fmt.Sprintf(`{"time":%d,"type":"task.started",`+
				`"taskId":"01_plan","metadata":{"seq":1}}`, valuesAt) + "\n" +
				fmt.Sprintf(`{"time":%d,"type":"delegate.admitted","taskId":"01_plan","data":{"subId":"gc-%s",`+
					`"reservedTokens":10,"timeoutSec":60},"metadata":{"seq":2}}`, valuesAt, run) + "\n",
		})
	}
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 4, "%q", reports)
	all := strings.Join(reports, "\n")
	for _, want := range []string{
		timesRunNoCreated + "/manifest.json: budgetTotal -5 is not 0..9007199254740992 (crewlog's run.create): " +
			"taken as absent", timesRunCreated + "/manifest.json: budgetAbort -0.5 is not a fraction in [0,1] " +
			"(crewlog's run.create): taken as absent", timesRunCreated + "/manifest.json: budgetTotal " +
			"9007199254740994 is not 0..9007199254740992 (crewlog's run.create): taken as absent",
		timesRunCreated + "/manifest.json: budgetWarning 1.5 is not a fraction in [0,1] (crewlog's " +
			"run.create): taken as absent",
	} {
		require.Contains(t, all, want)
	}
	half, whole := 0.5, 1.0
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		for run, want := range map[string][2]*float64{timesRunCreated: {nil, nil},
			timesRunNoCreated: {&half, &whole}} {
			r, ok := s.Run(run)
			require.True(t, ok, name)
			require.Nil(t, r.BudgetTotal, "%s: %s", name, run)
			require.Equal(t, want[0], r.BudgetWarning, "%s: %s", name, run)
			require.Equal(t, want[1], r.BudgetAbort, "%s: %s", name, run)
			a, ok := s.Account(run, "01_plan")
			require.True(t, ok, "%s: %s", name, run)
			require.Zero(t, a.TokensGranted, "%s: %s: the grant is seeded from no budget", name, run)
		}
	}
}

// TestOneTaskRecordDoesNotTakeTheOthers: tasks.json holds every task of a run, each record written from what its
// worker reported (its usage, its status). One value a record cannot hold — a fraction of a token, a depth past any
// integer — made the whole file undecodable, and the import took every task of the run from the events alone (for a
// run whose events were compacted, none); a worker's report changed what the import kept of every other task. Each
// record decodes on its own, and a value of another type costs its field only (here the usage, taken as absent and
// reported): the task and the others are imported, by the one-shot import and a follower alike.
func TestOneTaskRecordDoesNotTakeTheOthers(t *testing.T) {
	for name, tasks := range map[string]string{
		"array":    `[%s,%s]`,
		"envelope": `{"schemaVersion":1,"tasks":[%s,%s]}`,
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			run := timesRunCreated
			writeFiles(t, root, map[string]string{
				"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core",` +
					`"workflow":"implement","goal":"g","status":"completed","cwd":"/srv/app",` +
					`"createdAt":1790928000000}`, "state/runs/" + run + "/tasks.json": fmt.Sprintf(tasks,
					`{"id":"01_plan","stepId":"plan","role":"planner","status":"completed","usage":{"input":12.5}}`,
					`{"id":"02_exec","stepId":"exec","role":"executor","status":"completed","usage":{"input":30}}`),
			})
			one, followed, reports := importedTwice(t, root, valuesClock)
			require.Len(t, reports, 1, "%q", reports)
			require.Contains(t, reports[0],
				`tasks.json: task 01_plan: usage {"input":12.5} is not a record of counts: taken as absent`)
			for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
				s := stateOf(t, l)
				tk, ok := s.Task(run, "02_exec")
				require.True(t, ok, name)
				require.Equal(t, projections.TaskCompleted, tk.Status, name)
				require.Equal(t, int64(30), tk.Usage.Input, name)
				tk, ok = s.Task(run, "01_plan")
				require.True(t, ok, name)
				require.Equal(t, projections.TaskCompleted, tk.Status, name)
				require.Zero(t, tk.Usage.Input, name)
			}
		})
	}
}

// TestLiveRunTaskWaitsOnlyOnANameableQuestion: a follower reconciles a run with its files only once the run has
// finished, so what it records of a live run's task.waiting stands as long as the run goes on. One whose question
// id no wait.resolve takes (none, or more than 128 chars) parked the task for good on a question nobody could answer
// and nothing would time out. It is skipped and reported, the task left as it was (running), by a follower and the
// one-shot import alike; so is an ask.requested of such an id, which crewd's import.append refuses.
func TestLiveRunTaskWaitsOnlyOnANameableQuestion(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	long := strings.Repeat("q", commands.MaxQuestionIDChars+1)
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"running","cwd":"/srv/app","createdAt":1790928000000}`,
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"running"},{"id":"02_exec","stepId":"exec","role":"executor","status":"running"}]`,
		"state/runs/" + run + "/events.jsonl": eventLine(1, "task.started", "01_plan", `{}`) +
			eventLine(2, "task.waiting", "01_plan", `{"deadline":`+fmt.Sprint(valuesAt+600_000)+`}`) +
			eventLine(3, "task.started", "02_exec", `{}`) +
			eventLine(4, "task.waiting", "02_exec",
				`{"questionId":"`+long+`","deadline":`+fmt.Sprint(valuesAt+600_000)+`}`) +
			eventLine(5, "ask.requested", "01_plan", `{"deadline":`+fmt.Sprint(valuesAt+600_000)+`}`) +
			eventLine(6, "ask.requested", "02_exec",
				`{"questionId":"`+long+`","deadline":`+fmt.Sprint(valuesAt+600_000)+`}`),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 4, "%q", reports)
	require.Contains(t, reports[0], `(seq 2): task.waiting for task 01_plan: question "" is not one wait.resolve `+
		`takes (1..128 chars, of at most 256 bytes in JSON): skipped`)
	require.Contains(t, reports[1], `(seq 4): task.waiting for task 02_exec: question "qqqq`)
	require.Contains(t, reports[2], `(seq 5): ask.requested for task 01_plan: question "" is not one wait.resolve `+
		`takes (1..128 chars, of at most 256 bytes in JSON): skipped`)
	require.Contains(t, reports[3], `(seq 6): ask.requested for task 02_exec: question "qqqq`)
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		for _, id := range []string{"01_plan", "02_exec"} {
			tk, _ := s.Task(run, id)
			require.Equal(t, projections.TaskRunning, tk.Status, "%s: %s", name, id)
		}
	}
}

// TestImportedDepthIsOneTheEngineRecords: a task's depth is 0..10 (crewlog's task.create, and an admission's
// childDepth is at most maxDepth, configured 1..10): it decides whether a shadow task may be given a credential
// (credential.issue refuses one at the depth limit) and how deep its own delegations are. An import recorded any
// depth tasks.json or a delegate.admitted line named: a shadow at depth -5 was one the depth limit never reached. A
// depth outside 0..10 is taken as absent (pi-crew's fallback) and reported, by the one-shot import and a follower
// alike.
func TestImportedDepthIsOneTheEngineRecords(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"completed","cwd":"/srv/app","createdAt":1790928000000}`,
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner","status":"running",` +
			`"depth":-3},{"id":"gc-lost","role":"explorer","status":"running","depth":99}]`,
		"state/runs/" + run + "/events.jsonl": eventLine(1, "task.started", "01_plan", `{}`) +
			eventLine(2, "delegate.admitted", "01_plan",
				`{"subId":"gc-a","childDepth":-5,"unmetered":true,"timeoutSec":60}`) +
			eventLine(3, "delegate.admitted", "01_plan",
				`{"subId":"gc-b","childDepth":11,"unmetered":true,"timeoutSec":60}`) +
			eventLine(4, "delegate.admitted", "01_plan",
				`{"subId":"gc-c","childDepth":3,"unmetered":true,"timeoutSec":60}`),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 5, "%q", reports) // and gc-lost's lost admission
	all := strings.Join(reports, "\n")
	for _, want := range []string{
		"(seq 2): delegate.admitted for gc-a: childDepth -5 is not 0..10: taken as absent",
		"(seq 3): delegate.admitted for gc-b: childDepth 11 is not 0..10: taken as absent",
		"tasks.json: task 01_plan: depth -3 is not 0..10 (crewlog's task.create): taken as absent",
		"tasks.json: task gc-lost: depth 99 is not 0..10 (crewlog's task.create): taken as absent",
	} {
		require.Contains(t, all, want)
	}
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		depths := map[string]int{}
		for _, tk := range s.Tasks(run) {
			depths[tk.TaskID] = tk.Depth
		}
		require.Equal(t, map[string]int{"01_plan": 0, "gc-lost": 0, "gc-a": 2, "gc-b": 2, "gc-c": 3}, depths, name)
		for _, d := range s.Delegations(run) {
			require.True(t, d.Depth >= 0 && d.Depth <= commands.MaxMaxDepth, "%s: %s at depth %d", name,
				d.SubID, d.Depth)
		}
	}
}

// TestImportedDependsOnIsOneTaskCreateTakes: a task's dependsOn is at most events.MaxDependsOn task ids of
// 1..events.MaxIDChars chars (crewlog's task.create, and crewd's import.append refuses more). An import recorded the
// list tasks.json held, of any length and ids of any length, which every read of the task, snapshot of its run and
// page of the dashboard copies. An id outside the bound (no task has one) is left out, and the ids past the first
// events.MaxDependsOn are cut, each reported, by the one-shot import and a follower alike.
func TestImportedDependsOnIsOneTaskCreateTakes(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	long := strings.Repeat("d", events.MaxIDChars+1)
	deps := []string{"01_plan", long, ""}
	for i := range events.MaxDependsOn + 10 {
		deps = append(deps, fmt.Sprintf("t%d", i))
	}
	list, err := json.Marshal(deps)
	require.NoError(t, err)
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner","status":"queued",` +
			`"dependsOn":[]},{"id":"02_exec","stepId":"exec","role":"executor","status":"queued","dependsOn":` +
			string(list) + `}]`,
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 2, "%q", reports)
	all := strings.Join(reports, "\n")
	for _, want := range []string{
		"tasks.json: task 02_exec: dependsOn holds 2 ids that are not 1..256 chars (no task has one): left out",
		fmt.Sprintf("tasks.json: task 02_exec: dependsOn lists %d tasks, more than %d (crewlog's task.create): "+
			"the first %d are kept", events.MaxDependsOn+11, events.MaxDependsOn, events.MaxDependsOn),
	} {
		require.Contains(t, all, want)
	}
	want := append([]string{"01_plan"}, deps[3:3+events.MaxDependsOn-1]...)
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		tk, ok := stateOf(t, l).Task(run, "02_exec")
		require.True(t, ok, name)
		require.Equal(t, want, tk.DependsOn, name)
	}
}

// TestImportedMessageIsInItsFilesMailbox: pi-crew keeps a message in the mailbox file its taskId and direction select
// (D§2.6: mailbox/tasks/<taskId>/{inbox,outbox}.jsonl, the run-level files when it has none), and a task's inbox is
// what its file holds. The import took the recipient from the line: a line in one task's inbox file naming another
// task went to that other task's mailbox — what a line of one file says changed another task's — and one naming
// the direction outbox went to the run's inbox. A message is recorded in its file's mailbox (a task's inbox file: the
// task; a task's outbox file and the run-level files: the run's inbox), and a line naming another is reported, by
// the one-shot import and a follower alike.
func TestImportedMessageIsInItsFilesMailbox(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	msg := func(id, extra string) string {
		return `{"id":"` + id + `","from":"orchestrator","body":"hi","createdAt":1790928000000` + extra + `}` + "\n"
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"completed","cwd":"/srv/app","createdAt":1790928000000}`,
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"completed"},{"id":"02_exec","stepId":"exec","role":"executor","status":"completed"}]`,
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl": msg("m1",
			`,"taskId":"02_exec","direction":"inbox"`) +
			msg("m2", `,"taskId":"01_plan","direction":"outbox"`) + msg("m3",
			`,"taskId":"01_plan","direction":"inbox"`) + msg("m4", ``),
		"state/runs/" + run + "/mailbox/tasks/01_plan/outbox.jsonl": msg("m5",
			`,"taskId":"01_plan","direction":"outbox"`),
		"state/runs/" + run + "/mailbox/inbox.jsonl": msg("m6", `,"taskId":"02_exec"`) + msg("m7",
			`,"direction":"inbox"`),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 3, "%q", reports)
	all := strings.Join(reports, "\n")
	for _, want := range []string{
		`mailbox/tasks/01_plan/inbox.jsonl:1: message m1: its line names mailbox "02_exec" (direction inbox): ` +
			`recorded in its file's, 01_plan`, `mailbox/tasks/01_plan/inbox.jsonl:2: message m2: its line names ` +
			`mailbox "" (direction outbox): recorded in its file's, 01_plan`, `mailbox/inbox.jsonl:1: message ` +
			`m6: its line names mailbox "02_exec" (direction inbox): recorded in its file's, the run's inbox`,
	} {
		require.Contains(t, all, want)
	}
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		to := map[string]string{}
		for _, id := range []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7"} {
			m, ok := s.Message(run, id)
			require.True(t, ok, "%s: %s", name, id)
			to[id] = m.To
		}
		require.Equal(t, map[string]string{"m1": "01_plan", "m2": "01_plan", "m3": "01_plan",
			"m4": "01_plan", "m5": "", "m6": "", "m7": ""}, to, name)
	}
}

// TestImportedIDsAreOnesCrewlogNames: an id a record of the files names a task, a delegation, a question or a message
// by is at most events.MaxIDChars chars, as every id crewlog's own commands record (crewd's import.append refuses a
// longer one). An import recorded the ids of a line as written, up to the store's payload limit: a delegate.admitted
// whose taskId was a long string put it in its delegation (parentTaskId) and opened a budget account under it, an
// ask.requested put it in its question and its run's waitState, and a mailbox line's questionId and data.subId were
// kept in the message, each read and snapshot of the run copying them. Such a line is skipped (its ids name what no
// record of crewlog's can), and a message keeps its record without the id, each reported, by the one-shot import and
// a follower alike.
func TestImportedIDsAreOnesCrewlogNames(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	long := strings.Repeat("x", events.MaxIDChars+1)
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "running"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"running"}]`, "state/runs/" + run +
			"/events.jsonl": eventLine(1, "task.started", "01_plan", `{}`) +
			eventLine(2, "delegate.requested", "01_plan", `{"subId":"`+long+`","role":"explorer"}`) +
			eventLine(3, "delegate.admitted", long, `{"subId":"gc-a","reservedTokens":10,"timeoutSec":60}`) +
			eventLine(4, "delegate.completed", long, `{"subId":"gc-a","ok":true}`) +
			eventLine(5, "ask.requested", long, `{"questionId":"q1"}`) +
			eventLine(6, "ask.requested", "01_plan", `{"questionId":"q2"}`) +
			eventLine(7, "ask.answered", "01_plan", `{"questionId":"`+long+`"}`),
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl": `{"id":"m1","from":"orchestrator","body":"hi",` +
			`"createdAt":1790928000000,"kind":"response","questionId":"` + long + `","data":{"subId":"` + long +
			`","ok":true}}` + "\n",
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	all := strings.Join(reports, "\n")
	for _, want := range []string{
		"(seq 2): delegate.requested: subId " + clip(long) + " is longer than 256 chars, or 256 bytes in JSON, as " +
			"no id crewlog records: skipped", "(seq 3): delegate.admitted: taskId " + clip(long) +
			" is longer than 256 chars, or 256 bytes in JSON, as no id crewlog records: skipped",
		"(seq 4): delegate.completed: taskId " + clip(long) + " is longer than 256 chars, or 256 bytes " +
			"in JSON, as no id crewlog records: skipped",
		"(seq 5): ask.requested: taskId " + clip(long) + " is longer than 256 chars, or 256 " +
			"bytes in JSON, as no id crewlog records: skipped",
		"(seq 7): ask.answered: questionId " + clip(long) + " is longer than 256 chars," +
			" or 256 bytes in JSON, as no id crewlog records: skipped",
		"inbox.jsonl:1: message m1: questionId " + clip(long) + " is longer " +
			"than 256 chars, or 256 bytes in JSON, as no id crewlog records: " +
			"taken as absent",
		"inbox.jsonl:1: message m1: data.subId " + clip(long) + " i" +
			"s longer than 256 chars, or 256 bytes in JSON, as no " +
			"id crewlog records: taken as absent",
	} {
		require.Contains(t, all, want)
	}
	require.Len(t, reports, 7, "%q", reports)
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		_, ok := s.Allocation(run, long)
		require.False(t, ok, "%s: no account under the long id", name)
		requireIDsLeftOut(t, s, run, name)
	}
}

// requireIDsLeftOut requires of run in s, the state of an import (name), what the files of the tests of imported ids
// leave once their ids are bounded: no delegation, no question q1, question q2 pending, and message m1 without its
// questionId and data.subId.
func requireIDsLeftOut(t *testing.T, s *projections.State, run, name string) {
	t.Helper()
	require.Empty(t, s.Delegations(run), name)
	_, ok := s.Ask(run, "q1")
	require.False(t, ok, name)
	q2, ok := s.Ask(run, "q2")
	require.True(t, ok, name)
	require.Equal(t, projections.AskPending, q2.Status, name)
	m, ok := s.Message(run, "m1")
	require.True(t, ok, name)
	require.Empty(t, m.QuestionID, name)
	require.NotNil(t, m.Data, name)
	require.Empty(t, m.Data.SubID, name)
}

// TestImportedSeqIsOneCrewlogRecords: a seq in events.jsonl is a count a foreign.imported records (an int64) and
// hands back to a pi-crew client as the source wrote it, or the event is not imported. One past the largest int64 was
// recorded wrapped to a negative seq, and a pi-crew client reading its own event back read another seq. The line is
// skipped and reported, as one with no seq is, by the one-shot import and a follower alike.
func TestImportedSeqIsOneCrewlogRecords(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"01_plan","role":"executor",` +
			`"status":"completed"}]`, "state/runs/" + run + "/events.jsonl": eventLine(1, "task.progress",
			"01_plan", `{"n":1}`) +
			strings.Replace(eventLine(0, "task.progress", "01_plan", `{"n":2}`), `"seq":0`,
				`"seq":9223372036854775808`, 1) +
			eventLine(2, "task.progress", "01_plan", `{"n":3}`),
	})
	foreignSeqs := func(name string, l *eventlog.Log) []int64 {
		var seqs []int64
		it := l.Read(1)
		for it.Next() {
			if it.Event().Type == events.TypeForeignImported {
				ev, err := projections.FromLog(it.Event())
				require.NoError(t, err, name)
				seqs = append(seqs, ev.Payload.(*events.ForeignImported).Seq)
			}
		}
		require.NoError(t, it.Close(), name)
		return seqs
	}
	l := openFuzzStore(t)
	defer l.Close()
	_, err := Import(l, root, &Options{Clock: valuesClock})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, foreignSeqs("import", l), "no seq recorded wrapped")

	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 1, "%q", reports)
	require.Contains(t, reports[0],
		"events.jsonl:2 (seq 9223372036854775808): event task.progress: seq is past what crewlog records (at most "+
			"9223372036854775807): skipped")
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		require.Equal(t, []int64{1, 2}, foreignSeqs(name, l), name)
	}
}

// TestImportedIDsFitAFrame: an id a record of the files names a task, a delegation, a question or a message by takes
// at most events.MaxIDChars bytes in JSON, as every id crewlog's own commands record (crewd's import.append refuses
// more). Of 256 chars at most, one of '<' was imported: 1,536 bytes in JSON, larger alone than a frame of 1 KiB, so
// that each read of the socket that met it answered oversize-frame for good. Such a line is skipped, and a message
// keeps its record without the id, each reported, by the one-shot import and a follower alike, and crewd refuses none
// of the follower's writes.
func TestImportedIDsFitAFrame(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	wide := strings.Repeat("<", events.MaxIDChars/6+1)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "running"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"running"}]`, "state/runs/" + run +
			"/events.jsonl": eventLine(1, "task.started", "01_plan", `{}`) +
			eventLine(2, "delegate.requested", "01_plan", `{"subId":`+q(wide)+`,"role":"explorer"}`) +
			eventLine(3, "ask.requested", wide, `{"questionId":"q1"}`) +
			eventLine(4, "ask.requested", "01_plan", `{"questionId":`+q(wide)+`}`) +
			eventLine(5, "task.waiting", "01_plan", `{"questionId":`+q(wide)+`}`) +
			eventLine(6, "ask.requested", "01_plan", `{"questionId":"q2"}`) +
			eventLine(7, "ask.answered", "01_plan", `{"questionId":`+q(wide)+`}`),
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl": `{"id":"m1","from":"orchestrator","body":"hi",` +
			`"createdAt":1790928000000,"kind":"response","questionId":` + q(wide) + `,"data":{"subId":` + q(wide) +
			`,"ok":true}}` + "\n" + `{"id":` + q(wide) + `,"from":"orchestrator","body":"hi",` +
			`"createdAt":1790928000000}` + "\n",
		"state/runs/" + run + "/mailbox/tasks/" + wide + "/inbox.jsonl": `{"id":"m3",` +
			`"from":"orchestrator","body":"hi","createdAt":1790928000000}` + "\n",
		"state/runs/" + run + "/mailbox/inbox.jsonl": `{"id":"m4","from":"orchestrator","body":"hi","taskId":` +
			q(wide) +
			`,"createdAt":1790928000000}` + "\n",
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	all := strings.Join(reports, "\n")
	bound := "is longer than 256 chars, or 256 bytes in JSON, as no id crewlog records"
	question := "is not one wait.resolve takes (1..128 chars, of at most 256 bytes in JSON): skipped"
	for _, want := range []string{
		"(seq 2): delegate.requested: subId " + clip(wide) + " " + bound + ": skipped",
		"(seq 3): ask.requested: taskId " + clip(wide) + " " + bound + ": skipped",
		"(seq 4): ask.requested for task 01_plan: question " + fmt.Sprintf("%q", wide) + " " + question,
		"(seq 5): task.waiting for task 01_plan: question " + fmt.Sprintf("%q", wide) + " " + question +
			", the task left running",
		"(seq 7): ask.answered: questionId " + clip(wide) + " " + bound + ": skipped",
		"inbox.jsonl:1: message m1: questionId " + clip(wide) + " " + bound + ": taken as absent",
		"inbox.jsonl:1: message m1: data.subId " + clip(wide) + " " + bound + ": taken as absent",
		"inbox.jsonl:2: message " + clip(wide) + ": its id " + bound + ": skipped",
		"mailbox/tasks/" + wide + ": not a task mailbox: not imported",
	} {
		require.Contains(t, all, want)
	}
	require.Len(t, reports, 10, "%q", reports)
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		requireIDsLeftOut(t, s, run, name)
		task, ok := s.Task(run, "01_plan")
		require.True(t, ok, name)
		require.Equal(t, projections.TaskRunning, task.Status, name)
		_, ok = s.Message(run, wide)
		require.False(t, ok, name)
		_, ok = s.Ask(run, wide)
		require.False(t, ok, name)
	}
}

// TestImportedMessageWordsAreOnesPiCrewWrites: a message's kind, priority and deliveryMode are one of the words
// pi-crew writes (D§2.6), which crewlog's own msg.send and steer.push record; a mailbox line holding another (a
// worker can write its own line) was imported as it was, bounded by nothing but the store's payload, and every read
// of the socket that met the message, msg.inbox and query.mailbox, answered oversize-frame at it for good whatever
// the frame: a kind of 60,000 '<' takes 360,000 bytes in JSON, whatever crewd leaves out of a message too large.
// Such a word is taken as absent (the default), and reported, by the one-shot import and a follower alike; a word
// pi-crew writes is kept.
func TestImportedMessageWordsAreOnesPiCrewWrites(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	wide := strings.Repeat("<", 60_000)
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "running"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"running"}]`, "state/runs/" + run +
			"/mailbox/tasks/01_plan/inbox.jsonl": `{"id":"m1","from":"orchestrator","body":"hi",` +
			`"createdAt":1790928000000,"kind":"` + wide + `","priority":"` + wide + `","deliveryMode":"` +
			wide + `"}` +
			"\n" + `{"id":"m2","from":"orchestrator","body":"hi","createdAt":1790928000000,"kind":"follow-up",` +
			`"priority":"low","deliveryMode":"interrupt"}` + "\n",
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	all := strings.Join(reports, "\n")
	for _, field := range []string{"kind", "priority", "deliveryMode"} {
		require.Contains(t, all, "inbox.jsonl:1: message m1: "+field+" "+clip(wide)+" is not one pi-crew writes: "+
			"taken as absent")
	}
	require.Len(t, reports, 3, "%q", reports)
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		m, ok := s.Message(run, "m1")
		require.True(t, ok, name)
		require.Equal(t, []string{events.KindMessage, events.PriorityNormal, events.DeliveryNextTurn},
			[]string{m.Kind, m.Priority, m.DeliveryMode}, name)
		m, ok = s.Message(run, "m2")
		require.True(t, ok, name)
		require.Equal(t, []string{events.KindFollowUp, events.PriorityLow, events.DeliveryInterrupt},
			[]string{m.Kind, m.Priority, m.DeliveryMode}, name)
	}
}

// TestImportedSteerIDsFitAFrame: a steering line's id is the id of the message it records, which crewd's
// import.append refuses past 256 bytes in JSON, as every imported id (events.ImportedIDOK); the import took it as it
// was, and a follower's write of a line of an id of 60 '<' (360 bytes in JSON, within the chars an id had) was
// refused by crewd for good, where the one-shot import recorded it. Such a line is skipped and reported by both, and
// the next steer imported.
func TestImportedSteerIDsFitAFrame(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	wide := strings.Repeat("<", 60)
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "running"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"running"}]`, "artifacts/" + run + "/steering/01_plan.jsonl": `{"type":"steer",` +
			`"message":"first","id":"` + wide + `",` +
			`"ts":1790928000000}` + "\n" + `{"type":"steer","message":"next","id":"s2","ts":1790928000000}` + "\n",
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 1, "%q", reports)
	require.Contains(t, reports[0], "steering/01_plan.jsonl:1: steer "+clip(wide)+" of task 01_plan: its id "+
		"is longer than 256 chars, or 256 bytes in JSON, as no id crewlog records: skipped")
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		_, ok := s.Message(run, wide)
		require.False(t, ok, name)
		m, ok := s.Message(run, "s2")
		require.True(t, ok, name)
		require.Equal(t, "next", m.Body, name)
	}
}
