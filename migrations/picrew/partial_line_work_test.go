package picrew

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// appendPartial appends text, a line without its newline, to the file at p.
func appendPartial(t *testing.T, p, text string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestAPartialLastLineThatStaysIsReadOnce: a file ending in a line without its newline that stays so (a writer
// killed mid-line) had that line read at every pass, with the line before it read back to check for a rewrite: up to
// 8 MiB a file, every second, for as long as the file stayed so, though nothing in it changed. It is read once per
// change of the file's size now, and reported once, as before; completed, the line is imported.
func TestAPartialLastLineThatStaysIsReadOnce(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_plan", "planner"))
	require.NoError(t, a.SetStatus("running"))
	_, err := a.Event("task.progress", "01_plan", map[string]any{"n": 1})
	require.NoError(t, err)
	st, err := os.Stat(a.EventsPath())
	require.NoError(t, err)
	appendPartial(t, a.EventsPath(), `{"type":"task.progress","runId":"`+runA+`","taskId":"01_plan",`)
	sink := newMemSink()
	_, pass, reported := stepFollower(t, root.Dir, sink)
	pass()
	opens := countOpens(t, a.EventsPath())
	for range 5 {
		pass()
	}
	require.Zero(t, opens.Load(), "opens of a file whose partial last line stayed")
	require.Equal(t, []string{fmt.Sprintf("partial last line (no newline yet) at byte %d, unchanged for 1ns: read "+
		"when it is complete", st.Size())}, reasonsFor(*reported, "state/runs/"+runA+"/events.jsonl"), "reported once")

	require.NotContains(t, mustImported(sink), "import:"+runA+":seq:2")
	appendPartial(t, a.EventsPath(), `"ts":"2026-12-01T12:00:05Z","metadata":{"seq":2}}`+"\n")
	pass()
	require.Contains(t, mustImported(sink), "import:"+runA+":seq:2")
}
