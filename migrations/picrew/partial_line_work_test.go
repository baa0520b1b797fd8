package picrew

import (
	"fmt"
	"os"
	"strings"
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
// change of the file's size now, and reported once, as before; completed, the line is imported. So too when what
// is left to read of the file is exactly one read (maxTailRead): that read reached the file's end.
func TestAPartialLastLineThatStaysIsReadOnce(t *testing.T) {
	const partial = `{"type":"task.progress","runId":"` + runA + `","taskId":"01_plan",`
	for _, tc := range []struct {
		name string
		pad  bool // a complete line before the partial one, making the file maxTailRead bytes
	}{
		{"a short file", false},
		{"a file of exactly one read", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(t)
			a := newRun(t, root, runA)
			require.NoError(t, a.AddTask("01_plan", "planner"))
			require.NoError(t, a.SetStatus("running"))
			_, err := a.Event("task.progress", "01_plan", map[string]any{"n": 1})
			require.NoError(t, err)
			st, err := os.Stat(a.EventsPath())
			require.NoError(t, err)
			at, seq := st.Size(), 2
			if tc.pad {
				head := `{"type":"task.progress","runId":"` + runA + `","taskId":"01_plan","metadata":{"seq":2},` +
					`"data":{"pad":"`
				tail := `"}}` + "\n"
				fill := maxTailRead - int(at) - len(partial) - len(head) - len(tail)
				appendPartial(t, a.EventsPath(), head+strings.Repeat("p", fill)+tail)
				at, seq = maxTailRead-int64(len(partial)), 3
			}
			appendPartial(t, a.EventsPath(), partial)
			sink := newMemSink()
			_, pass, reported := stepFollower(t, root.Dir, sink)
			pass()
			opens := countOpens(t, a.EventsPath())
			for range 5 {
				pass()
			}
			require.Zero(t, opens.Load(), "opens of a file whose partial last line stayed")
			require.Equal(t, []string{fmt.Sprintf("partial last line (no newline yet) at byte %d, unchanged for 1ns: "+
				"read when it is complete", at)}, reasonsFor(*reported, "state/runs/"+runA+"/events.jsonl"),
				"reported once")

			id := fmt.Sprintf("import:%s:seq:%d", runA, seq)
			require.NotContains(t, mustImported(sink), id)
			appendPartial(t, a.EventsPath(), fmt.Sprintf(`"ts":"2026-12-01T12:00:05Z","metadata":{"seq":%d}}`+"\n", seq))
			pass()
			require.Contains(t, mustImported(sink), id)
		})
	}
}
