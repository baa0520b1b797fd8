package picrew

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestFlexTime: a pi-crew time is unix ms or RFC 3339; absent is 0 without
// a word, and anything crewlog's events cannot carry is damage: 0, with
// what was written kept for the report.
func TestFlexTime(t *testing.T) {
	for _, tc := range []struct {
		in  string
		ms  int64
		bad bool
	}{
		{in: `null`},
		{in: `""`},
		{in: `0`},
		{in: `1790928000000`, ms: 1790928000000},
		{in: `1790928000000.9`, ms: 1790928000000},
		{in: `"2026-10-02T08:00:00.000Z"`, ms: 1790928000000},
		{in: `"2026-10-02T10:00:00+02:00"`, ms: 1790928000000},
		{in: `1`, ms: 1},
		{in: `9e12`, ms: 9e12},
		{in: `9000000000001`, bad: true},
		{in: `1e300`, bad: true},
		{in: `-1`, bad: true},
		{in: `0.5`, bad: true},
		{in: `"1970-01-01T00:00:00Z"`, bad: true},
		{in: `"0001-01-01T00:00:00Z"`, bad: true},
		{in: `"9999-12-31T23:59:59.999Z"`, bad: true},
		{in: `"2026-13-40T99:00:00Z"`, bad: true},
		{in: `"1790928000000"`, bad: true},
		{in: `true`, bad: true},
		{in: `{"ms":1}`, bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var rec struct {
				At flexTime `json:"at"`
			}
			require.NoError(t, json.Unmarshal([]byte(`{"at":`+tc.in+`}`), &rec),
				"a damaged time is not a damaged record")
			require.Equal(t, tc.ms, rec.At.ms)
			if tc.bad {
				require.Equal(t, []string{"at " + tc.in}, damagedTimes(&rec))
			} else {
				require.Empty(t, damagedTimes(&rec))
			}
		})
	}
}

// TestTimeRangeIsWhatTheDaemonTakes pins maxTimeMs to the daemon's bound:
// a follower's write with a time the import keeps is one the daemon takes.
func TestTimeRangeIsWhatTheDaemonTakes(t *testing.T) {
	decide := func(ms int64) error {
		_, err := commands.Decide(projections.New(), &commands.Import{Source: events.ForeignSourcePicrew, RunID: "r1",
			Events: []commands.ImportedEvent{{Type: events.TypeRunCreated, TimeMs: ms,
				Payload: &events.RunCreated{}}}},
			commands.Env{Now: 1, CommandID: "c1", NewID: func() string { return "x" }})
		return err
	}
	for _, ms := range []int64{1, maxTimeMs} {
		require.NoError(t, decide(ms), "%d", ms)
	}
	for _, ms := range []int64{-1, maxTimeMs + 1} {
		require.ErrorContains(t, decide(ms), "time must be", "%d", ms)
	}
}

// Runs of the damaged-times root: one whose manifest's createdAt is
// damaged too (an event without a time then takes the recorder's clock),
// and one whose createdAt stands in for its events' damaged times.
const (
	timesRunNoCreated = "team_20261201120000_000000000000dead"
	timesRunCreated   = "team_20261201120000_000000000000beef"
)

// timesClockMs is the recorder's clock of these tests: after every time their files name (1790928000000), as a
// recorder's clock is after what it imports; a time after the clock counts no deadline from itself
// (TestFutureTimesDoNotStretchDeadlines).
const timesClockMs = 1791000000000

// writeDamagedTimes writes a finished run with a damaged time in every
// place pi-crew writes one, and the reports each must give.
func writeDamagedTimes(t *testing.T, dir, run, createdAt string) (want []string) {
	files := map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"completed","createdAt":` + createdAt + `,"updatedAt":"9999-12-31T23:59:59.999Z",` +
			`"cwd":"/srv/app"}`, "state/runs/" + run + "/tasks.json": `[` +
			`{"id":"01_plan","stepId":"plan","role":"planner","agent":"planner","status":"completed",` +
			`"startedAt":-5,"finishedAt":"0001-01-01T00:00:00Z","usage":{"input":3}},{"id":"02_ask","stepId":"ask",` +
			`"role":"explorer","status":"waiting","waiting":{"questionId":"q1","askedAt":1e300,` +
			`"deadline":"2300-01-01T00:00:00Z"}}]`,
		"state/runs/" + run + "/events.jsonl": strings.Join([]string{
			`{"time":1e300,"type":"run.running","metadata":{"seq":1}}`,
			`{"time":"2300-01-01T00:00:00Z","type":"task.started","taskId":"01_plan","metadata":{"seq":2}}`,
			`{"time":1790928000000,"type":"ask.requested","taskId":"02_ask","message":"which?",` +
				`"data":{"questionId":"q1","deadline":1e19},"metadata":{"seq":3}}`,
			`{"time":true,"type":"task.progress","taskId":"01_plan","data":{"n":1},"metadata":{"seq":4}}`,
			`{"time":1790928000000,"type":"delegate.admitted","taskId":"01_plan","data":{"subId":"gc-` +
				run + `","reservedTokens":10,"timeoutSec":1e308},"metadata":{"seq":5}}`,
			`{"time":-1,"type":"task.completed","taskId":"01_plan","metadata":{"seq":6}}`, `{"t` +
				`ime":1790928000000,"type":"task.waiting","taskId":"02_ask",` +
				`"data":{"questionId":"q1","deadline":"2026-13-40T99:00:00Z"},` +
				`"metadata":{"seq":7}}`,
			`{"time":"not a time","type":"run.completed","metadata":{"seq":8}}`,
		}, "\n") + "\n",
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl": `{"id":"m1","direction":"inbox",` +
			`"from":"orchestrator","taskId":"01_plan","body":"hi","createdAt":"yesterday","status":"queued"}` + "\n",
		"state/runs/" + run + "/mailbox/delivery.json": `{"messages":{"m1":"acknowledged"}}`,
		"artifacts/" + run + "/steering/01_plan.jsonl": `{"type":"steer","message":"go",` +
			`"ts":1e20}` + "\n",
	}
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(b), 0o644))
	}
	runDir := "state/runs/" + run
	events := runDir + "/events.jsonl"
	want = []string{
		runDir + "/manifest.json: updatedAt \"9999-12-31T23:59:59.999Z\"",
		runDir + "/tasks.json: task 01_plan: startedAt -5",
		runDir + "/tasks.json: task 01_plan: finishedAt \"0001-01-01T00:00:00Z\"",
		runDir + "/tasks.json: task 02_ask: waiting.askedAt 1e300",
		runDir + "/tasks.json: task 02_ask: waiting.deadline \"2300-01-01T00:00:00Z\"",
		events + ":1 (seq 1): time 1e300",
		events + ":2 (seq 2): time \"2300-01-01T00:00:00Z\"",
		events + ":3 (seq 3): data.deadline 1e19",
		events + ":4 (seq 4): time true",
		events + ":5 (seq 5): delegate.admitted for gc-" + run + ": timeoutSec 1e+308",
		events + ":6 (seq 6): time -1",
		events + ":7 (seq 7): data.deadline \"2026-13-40T99:00:00Z\"",
		events + ":8 (seq 8): time \"not a time\"",
		runDir + "/mailbox/tasks/01_plan/inbox.jsonl:1: message m1: createdAt \"yesterday\"",
		"artifacts/" + run + "/steering/01_plan.jsonl:1: ts 1e20",
	}
	if createdAt != "" && !strings.HasPrefix(createdAt, "17") {
		want = append(want, runDir+"/manifest.json: createdAt "+createdAt)
	}
	return want
}

// engineSink is the daemon's import.append without its socket: each write
// a commands.Import under the engine principal, submitted to an engine in
// order, as the broker submits them.
type engineSink struct{ eng *commands.Engine }

func (s engineSink) Import(ctx context.Context, ws []Write) ([]WriteResult, error) {
	reqs := make([]commands.Request, len(ws))
	for i, w := range ws {
		cmd := &commands.Import{Source: events.ForeignSourcePicrew, RunID: w.RunID}
		for _, it := range w.Items {
			cmd.Events = append(cmd.Events, commands.ImportedEvent{Type: it.Type, TimeMs: it.TimeMs,
				Payload: it.Payload})
		}
		reqs[i] = commands.Request{Principal: events.EnginePrincipal(), CommandID: w.ID,
			Actor: events.Actor{Role: events.RoleAdmin}, Command: cmd}
	}
	replies, err := s.eng.SubmitAll(ctx, reqs)
	if err != nil {
		return nil, err
	}
	out := make([]WriteResult, len(replies))
	for i, r := range replies {
		out[i] = WriteResult{Appended: len(ws[i].Items), Replayed: r.Replayed}
		if r.Rejected != nil {
			out[i] = WriteResult{Code: r.Rejected.Code, Message: r.Rejected.Message}
		}
	}
	return out, nil
}

func (engineSink) Checkpoints(context.Context) ([]events.ImportCheckpoint, error) { return nil, nil }

// recorded is every event of the runs' streams in l, by command id, as
// text: what a reader of the log sees of each write.
func recorded(t *testing.T, l *eventlog.Log) map[string][]string {
	out := map[string][]string{}
	forEachEvent(t, l, func(ev *eventlog.Event) {
		if ev.Stream != events.ImportStream && ev.Stream != events.EngineStream {
			out[ev.CommandID] = append(out[ev.CommandID], fmt.Sprintf("%s %s v%d at %d by %s/%s (%s) %x",
				ev.Stream, ev.Type, ev.SchemaVersion, ev.Time, ev.ActorRole, ev.ActorTask, ev.CorrelationID,
				ev.Payload))
		}
	})
	return out
}

// forEachEvent calls fn with every event of l, its time first held to
// requireTimeInRange.
func forEachEvent(t testing.TB, l *eventlog.Log, fn func(*eventlog.Event)) {
	it := l.Read(1)
	defer it.Close()
	for it.Next() {
		requireTimeInRange(t, it.Event())
		fn(it.Event())
	}
	require.NoError(t, it.Err())
}

// importedTwice imports root with the one-shot import and with a follower through the daemon's engine, both on
// clock, requires that the daemon refused none of the follower's writes and that both reported the same lines, and
// returns the two stores and those lines, sorted.
func importedTwice(t *testing.T, root string, clock func() time.Time) (one, followed *eventlog.Log,
	reports []string) {
	t.Helper()
	one = openFuzzStore(t)
	t.Cleanup(func() { one.Close() })
	sum, err := Import(one, root, &Options{Clock: clock})
	require.NoError(t, err)
	var oneReports []string
	for _, s := range sum.Skipped {
		oneReports = append(oneReports, s.String())
	}

	followed = openFuzzStore(t)
	t.Cleanup(func() { followed.Close() })
	eng, err := commands.Open(followed, commands.Options{Clock: clock, ExpiryInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer eng.Close()
	var followReports []string
	// NB: a crewd whose frame cap takes the longest text a command records (a task's error), as the engine takes
	// the follower's writes without its socket.
	fl := NewFollower(root, engineSink{eng}, &FollowOptions{SettleAfter: time.Nanosecond,
		CheckpointEvery: time.Nanosecond, MaxBatchBytes: 2 << 20, Report: func(s Skipped) {
			followReports = append(followReports, s.String())
		}})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	runsDir := filepath.Join(root, "state", "runs")
	for range 3 {
		fl.pass(t.Context(), runsDir, true, nil)
	}
	st := fl.Stats()
	require.Zero(t, st.Refused, "the daemon refuses none of the follower's writes: %v", followReports)
	require.Zero(t, st.Pending)

	sort.Strings(oneReports)
	sort.Strings(followReports)
	require.Equal(t, oneReports, followReports, "the same report")
	return one, followed, oneReports
}

// TestDamagedTimesImportAndFollowAgree: the one-shot import and a follower
// through the daemon's engine, given a pi-crew time out of range in every
// place one is written, record the same events (a damaged time taken as
// absent: the run's createdAt, or the recorder's clock when that is
// damaged too) and report the same lines, one for each damaged time.
func TestDamagedTimesImportAndFollowAgree(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "state", "runs"), 0o755))
	want := writeDamagedTimes(t, root, timesRunNoCreated, "1e300")
	want = append(want, writeDamagedTimes(t, root, timesRunCreated, "1790928000000")...)
	clock := func() time.Time { return time.UnixMilli(timesClockMs) }
	one, followed, oneReports := importedTwice(t, root, clock)
	for _, w := range want {
		var found bool
		for _, r := range oneReports {
			found = found || (strings.HasPrefix(r, w) && strings.HasSuffix(r, ": taken as absent"))
		}
		require.True(t, found, "no report %q in\n%s", w, strings.Join(oneReports, "\n"))
	}
	require.Len(t, oneReports, len(want), "one line for each damaged time, and nothing else")

	got, exp := recorded(t, followed), recorded(t, one)
	require.Equal(t, exp, got, "the same events")
	require.Len(t, exp["import:"+timesRunNoCreated+":run"], 1)
	require.Contains(t, exp["import:"+timesRunNoCreated+":run"][0], fmt.Sprintf(" at %d ", clock().UnixNano()),
		"a damaged createdAt is the recorder's clock")
	require.Contains(t, exp["import:"+timesRunCreated+":seq:1"][0], fmt.Sprintf(" at %d ", int64(1790928000000*1e6)),
		"a damaged event time is the run's createdAt")
}

// TestUntimedAdmissionDeadlineImportAndFollowAgree: a delegate.admitted with no time (as pi-crew's files may hold)
// is recorded at its run's createdAt, or at the recorder's clock when the run has none, and its deadline counts
// from that time, as a timed admission's counts from its own: the same for the one-shot import and a follower
// through the daemon. Counted from no time at all, the deadline was in 1970, and the engine expired the delegation
// as soon as it was imported.
func TestUntimedAdmissionDeadlineImportAndFollowAgree(t *testing.T) {
	const created = int64(1790928000000)
	clock := func() time.Time { return time.UnixMilli(timesClockMs) }
	runs := map[string]int64{timesRunNoCreated: clock().UnixMilli(), timesRunCreated: created} // run → recorded at
	root := t.TempDir()
	for run := range runs {
		createdAt := ""
		if run == timesRunCreated {
			createdAt = fmt.Sprintf(`,"createdAt":%d`, created)
		}
		files := map[string]string{
			"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
				`"goal":"g","status":"running","cwd":"/srv/app"` + createdAt + `}`,
			"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
				`"agent":"planner","status":"running"}]`,
			"state/runs/" + run + "/events.jsonl": `{"type":"task.started","taskId":"01_plan",` +
				`"metadata":{"seq":1}}` + "\n" +
				`{"type":"delegate.admitted","taskId":"01_plan","data":{"subId":"gc-` + run +
				`","reservedTokens":10,"timeoutSec":60},"metadata":{"seq":2}}` + "\n",
		}
		for p, b := range files {
			full := filepath.Join(root, filepath.FromSlash(p))
			require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
			require.NoError(t, os.WriteFile(full, []byte(b), 0o644))
		}
	}
	one, followed, reports := importedTwice(t, root, clock)
	require.Empty(t, reports)
	exp := recorded(t, one)
	for id := range exp {
		if strings.Contains(id, ":reconcile:") {
			delete(exp, id) // the follower reconciles a run with its files once it has finished
		}
	}
	require.Equal(t, exp, recorded(t, followed), "the same events")
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		admitted := map[string]bool{}
		forEachEvent(t, l, func(ev *eventlog.Event) {
			if ev.Type != events.TypeDelegateAdmitted {
				return
			}
			p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
			require.NoError(t, err)
			at := runs[ev.Stream]
			require.Equal(t, at*1e6, ev.Time, "%s: %s: recorded at", name, ev.Stream)
			require.Equal(t, at+60_000, p.(*events.DelegateAdmitted).Deadline,
				"%s: %s: the deadline counts from it", name, ev.Stream)
			admitted[ev.Stream] = true
		})
		require.Len(t, admitted, len(runs), name)
	}
}

// TestAdmissionTimeoutIsADelegationsBound: an imported delegate.admitted holds a slot of the daemon-wide nested pool
// until its deadline, which the engine's expiry ends. pi-crew refuses a timeoutSec above 86,400 (timeout-invalid), as
// crewlog's own delegate.request does (events.MaxTimeoutSec), so a larger one in the files is damage, taken as
// absent (pi-crew's default) and reported, by the one-shot import and a follower alike. It was kept as long as its
// deadline fell before 2255: a line of a run's events.jsonl held a slot every runtime shares for 31 years.
func TestAdmissionTimeoutIsADelegationsBound(t *testing.T) {
	const at = int64(1790928000000)
	clock := func() time.Time { return time.UnixMilli(timesClockMs) }
	root := t.TempDir()
	run := timesRunCreated
	files := map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"running","cwd":"/srv/app","createdAt":1790928000000}`,
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner","agent":"planner",` +
			`"status":"running"}]`, "state/runs/" + run + "/events.jsonl": fmt.Sprintf(`{"time":%d,`+
			`"type":"task.started","taskId":"01_plan","metadata":{"seq":1}}`, at) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"delegate.admitted","taskId":"01_plan","data":{"subId":"s1",`+
				`"timeoutSec":1e9},"metadata":{"seq":2}}`, at) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"delegate.admitted","taskId":"01_plan","data":{"subId":"s2",`+
				`"timeoutSec":86400},"metadata":{"seq":3}}`, at) + "\n",
	}
	for p, b := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(b), 0o644))
	}
	one, followed, reports := importedTwice(t, root, clock)
	require.Len(t, reports, 1)
	require.Contains(t, reports[0], "delegate.admitted for s1: timeoutSec 1e+09")
	require.True(t, strings.HasSuffix(reports[0], ": taken as absent"), reports[0])
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		deadlines := map[string]int64{}
		forEachEvent(t, l, func(ev *eventlog.Event) {
			if ev.Type == events.TypeDelegateAdmitted {
				p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
				require.NoError(t, err)
				deadlines[p.(*events.DelegateAdmitted).SubID] = p.(*events.DelegateAdmitted).Deadline
			}
		})
		require.Equal(t, map[string]int64{"s1": at + defaultTimeoutSec*1000, "s2": at + events.MaxTimeoutSec*1000},
			deadlines, name)
	}
}

// TestAskDeadlineIsPicrewsClamp: pi-crew's broker clamps a question's deadline to at most 3600 s after it is asked
// (R5), and only the engine clock ends a question nobody answers: a later deadline in the files is damage, recorded
// at the clamp and reported, by the one-shot import and a follower alike, on the question's ask.requested and on its
// task's task.waiting. It was kept up to 2255: a line of a run's events.jsonl kept the question pending, its run hot
// and parked and its task waiting, for 229 years.
func TestAskDeadlineIsPicrewsClamp(t *testing.T) {
	const at = int64(1790928000000)
	clock := func() time.Time { return time.UnixMilli(timesClockMs) }
	root := t.TempDir()
	run := timesRunCreated
	far, near := int64(9e12), at+600_000
	files := map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g","status":"running","cwd":"/srv/app","createdAt":1790928000000}`,
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner","agent":"planner",` +
			`"status":"waiting"},{"id":"02_exec","stepId":"exec","role":"executor","agent":"executor",` +
			`"status":"waiting"}]`, "state/runs/" + run +
			"/events.jsonl": fmt.Sprintf(`{"time":%d,"type":"task.started","taskId":"01_plan",`+
			`"metadata":{"seq":1}}`, at) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"task.waiting","taskId":"01_plan","data":{"questionId":"q1",`+
				`"deadline":%d},"metadata":{"seq":2}}`, at, far) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"ask.requested","taskId":"01_plan","message":"?",`+
				`"data":{"questionId":"q1","deadline":%d},"metadata":{"seq":3}}`, at, far) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"task.started","taskId":"02_exec","metadata":{"seq":4}}`, at) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"task.waiting","taskId":"02_exec","data":{"questionId":"q2",`+
				`"deadline":%d},"metadata":{"seq":5}}`, at, near) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"ask.requested","taskId":"02_exec","message":"?",`+
				`"data":{"questionId":"q2","deadline":%d},"metadata":{"seq":6}}`, at, near) + "\n",
	}
	for p, b := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(b), 0o644))
	}
	one, followed, reports := importedTwice(t, root, clock)
	require.Len(t, reports, 2, "%q", reports)
	for _, r := range reports {
		require.Contains(t, r, "for question q1: deadline 9000000000000 is more than 3600 s after it was asked")
	}
	latest := at + events.MaxAskTimeoutSec*1000
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		require.Equal(t, map[string]int64{
			"task.waiting q1": latest, "ask.requested q1": latest, "task.waiting q2": near, "ask.requested q2": near,
		}, recordedDeadlines(t, l), name)
	}
}

// recordedDeadlines is the deadline of every delegate.admitted, task.waiting and ask.requested l holds, by "type id"
// (the subId, or the questionId).
func recordedDeadlines(t *testing.T, l *eventlog.Log) map[string]int64 {
	deadlines := map[string]int64{}
	forEachEvent(t, l, func(ev *eventlog.Event) {
		switch ev.Type {
		case events.TypeDelegateAdmitted, events.TypeTaskWaiting, events.TypeAskRequested:
			p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
			require.NoError(t, err)
			switch p := p.(type) {
			case *events.DelegateAdmitted:
				deadlines[ev.Type+" "+p.SubID] = p.Deadline
			case *events.TaskWaiting:
				deadlines[ev.Type+" "+p.QuestionID] = p.Deadline
			case *events.AskRequested:
				deadlines[ev.Type+" "+p.QuestionID] = p.Deadline
			}
		}
	})
	return deadlines
}

// TestFutureTimesDoNotStretchDeadlines: a line's time is the files' as much as its deadline, and any time up to 2255
// is recorded. A delegation's deadline and a question's clamp counted from it, so a line dated two centuries ahead
// held a slot of the daemon-wide pool, or kept a question pending, that long (and a slot refusal so dated kept its
// run waiting for a slot, every other run held to its share). A line is recorded at the importer's clock when its
// time is later, and its deadlines count from there (crewd's import.append holds a follower's writes to the same,
// from its own clock); so a timeout is not taken as absent for a deadline past 2255 it would not have.
func TestFutureTimesDoNotStretchDeadlines(t *testing.T) {
	const created, ahead = int64(1790000000000), int64(8e12)
	clock := func() time.Time { return time.UnixMilli(created) }
	root := t.TempDir()
	run := timesRunCreated
	files := map[string]string{
		"state/runs/" + run + "/manifest.json": `{"runId":"` + run + `","team":"core","workflow":"implement",` +
			`"goal":"g",` +
			fmt.Sprintf(`"status":"running","cwd":"/srv/app","createdAt":%d}`, created),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner","agent":"planner",` +
			`"status":"running"}]`, "state/runs/" + run + "/events.jsonl": fmt.Sprintf(`{"time":%d,`+
			`"type":"task.started","taskId":"01_plan","metadata":{"seq":1}}`, created) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"delegate.admitted","taskId":"01_plan","data":{"subId":"s1",`+
				`"timeoutSec":60},"metadata":{"seq":2}}`, ahead) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"ask.requested","taskId":"01_plan","message":"?",`+
				`"data":{"questionId":"q1","deadline":%d},"metadata":{"seq":3}}`, ahead, ahead+600_000) + "\n" +
			fmt.Sprintf(`{"time":%d,"type":"delegate.admitted","taskId":"01_plan","data":{"subId":"s2",`+
				`"timeoutSec":60},"metadata":{"seq":4}}`, int64(maxTimeMs)-1_000) + "\n",
	}
	for p, b := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(b), 0o644))
	}
	l := openFuzzStore(t)
	defer l.Close()
	_, err := Import(l, root, &Options{Clock: clock})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{
		"delegate.admitted s1": created + 60_000, "ask.requested q1": created + events.MaxAskTimeoutSec*1000,
		"delegate.admitted s2": created + 60_000,
	}, recordedDeadlines(t, l))
	forEachEvent(t, l, func(ev *eventlog.Event) {
		require.LessOrEqual(t, ev.Time, created*1e6, "%s is recorded at the clock at the latest", ev.Type)
	})
}
