package picrew

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

const textsRun = "run_texts"

// writeLongTexts writes a run whose files hold a text longer than crewlog's own command records in several places
// the import records one from.
func writeLongTexts(t *testing.T, dir string) {
	t.Helper()
	long := func(n int) string { return strings.Repeat("é", n) }
	run := "state/runs/" + textsRun
	q := func(s string) string { return `"` + s + `"` }
	files := map[string]string{
		run + "/manifest.json": `{"runId":"` + textsRun + `","team":` + q(long(commands.MaxIDChars+1)) +
			`,"workflow":"implement","goal":` + q(strings.Repeat("g", commands.MaxBodyChars+1)) +
			`,"status":"completed","createdAt":1790928000000,"updatedAt":1790928060000,"cwd":` +
			q(long(commands.MaxCwdChars+1)) + `}`, run + "/tasks.json": `[{"id":"01_build","stepId":"build",` +
			`"role":"executor","agent":"executor","title":` +
			q(long(commands.MaxTitleChars+1)) + `,"status":"failed","error":` +
			q(strings.Repeat("e", commands.MaxStatusTextChars+1)) +
			`,"startedAt":1790928001000,"finishedAt":1790928050000}]`,
		run + "/events.jsonl": strings.Join([]string{
			`{"time":1790928001000,"type":"task.started","taskId":"01_build","metadata":{"seq":1}}`,
			`{"time":1790928002000,"type":"ask.requested","taskId":"01_build","message":` +
				q(long(commands.MaxQuestionChars+1)) +
				`,"data":{"questionId":"q1"},"metadata":{"seq":2}}`,
			`{"time":1790928003000,"type":"delegate.rejected","taskId":"01_build",` +
				`"data":{"reason":"depth-exceeded","message":` +
				q(long(120+1)) + `},"metadata":{"seq":3}}`,
			`{"time":1790928060000,"type":"run.failed","message":` + q(long(commands.MaxStatusTextChars/4)) +
				`,"metadata":{"seq":4}}`,
		}, "\n") + "\n",
		run + "/mailbox/tasks/01_build/inbox.jsonl": `{"id":"m1","direction":"inbox","from":"orchestrator",` +
			`"taskId":"01_build","body":` +
			q(strings.Repeat("b", commands.MaxBodyChars+1)) + `,"createdAt":1790928004000,"status":"queued"}` + "\n",
		"artifacts/" + textsRun + "/steering/01_build.jsonl": `{"type":"steer","id":"s1","message":` +
			q(long(commands.MaxSteerChars+1)) +
			`,"ts":1790928005000}` + "\n",
	}
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(b), 0o644))
	}
}

// TestLongTextsAreCutToWhatCommandsRecord: a text of pi-crew's files longer than crewlog's own command that
// records it takes (a question over wait.request's 8192 chars, a task's title, error, a message's body, a steer, a
// run's goal, team and cwd, a rejection's message) is recorded cut to that bound, its beginning kept and a mark
// saying how long it was, and reported, the same by the one-shot import and by a follower through crewd's engine,
// which refuses none of the follower's writes: the record (a question, a task, a message) stays, and no record
// holds what no command could write.
func TestLongTextsAreCutToWhatCommandsRecord(t *testing.T) {
	root := t.TempDir()
	writeLongTexts(t, root)
	one, followed, reports := importedTwice(t, root, func() time.Time { return time.UnixMilli(timesClockMs) })
	require.Equal(t, recorded(t, one), recorded(t, followed), "both ways record the same events")
	cut := map[string]int{}
	forEachEvent(t, one, func(ev *eventlog.Event) {
		if ev.Stream != textsRun {
			return
		}
		p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
		require.NoError(t, err)
		for _, tx := range events.ImportedTexts(p) {
			n := utf8.RuneCountInString(*tx.Text)
			require.LessOrEqual(t, n, tx.Max, "%s %s", ev.Type, tx.Name)
			if strings.Contains(*tx.Text, "… [clipped: ") {
				what := ev.Type + " " + tx.Name
				if m, ok := p.(*events.MailboxAppended); ok {
					what += " " + m.ID
				}
				cut[what] = n
			}
			if q, ok := p.(*events.AskRequested); ok {
				require.True(t, strings.HasPrefix(q.Question, "éé") && strings.HasSuffix(q.Question,
					"é… [clipped: 8193 chars in pi-crew's files]"), "%.32q", q.Question)
			}
		}
	})
	require.Equal(t, map[string]int{
		"run.created team": commands.MaxIDChars, "run.created goal": commands.MaxBodyChars,
		"run.created cwd": commands.MaxCwdChars, "task.created title": commands.MaxTitleChars,
		"ask.requested question": commands.MaxQuestionChars, "delegate.rejected message": 120,
		"mailbox.appended body m1": commands.MaxBodyChars,
		"mailbox.appended body s1": commands.MaxSteerChars,
		"task.failed error":        commands.MaxStatusTextChars,
	}, cut, "each long text is cut to its bound, whole")
	require.Len(t, reports, 9, "one report a cut text:\n%s", strings.Join(reports, "\n"))
}
