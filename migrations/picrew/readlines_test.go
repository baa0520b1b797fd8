package picrew

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestImportSkipsALongLineToItsEnd: a JSONL line longer than the one-shot import reads (maxLine) is reported and
// skipped to its newline, and the lines after it are imported, as a follower skips a line longer than one of its
// reads and goes on. The import stopped reading the file at such a line: one line a worker appended hid every later
// event of its run (or message of its mailbox, or steer) from the import, which a follower of the same files
// imported.
func TestImportSkipsALongLineToItsEnd(t *testing.T) {
	root := newRoot(t)
	a := runOfOneEvent(t, root, "running")
	for _, long := range [][]byte{
		append(bytes.Repeat([]byte("x"), maxLine+1), '\n'),
		append(bytes.Repeat([]byte(" "), maxLine+1), `{"type":"task.progress","metadata":{"seq":2}}`+"\n"...),
	} {
		require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), long))
	}
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(),
		[]byte(`{"type":"task.progress","metadata":{"seq":3}}`+"\n")))

	ids, skipped := importPlan(t, root.Dir)
	require.Contains(t, ids, "import:"+runA+":seq:3", "the line after the long ones is imported")
	require.NotContains(t, ids, "import:"+runA+":seq:2")
	long := fmt.Sprintf("line longer than %d bytes: skipped", maxLine)
	require.Equal(t, []string{long, long,
		"seq 2..2 missing (compacted or a failed append): the files supply the end state"},
		reasonsFor(skipped, "state/runs/"+runA+"/events.jsonl"))
	var lines []int
	for _, s := range skipped {
		if s.Reason == long {
			lines = append(lines, s.Line)
		}
	}
	require.Equal(t, []int{2, 3}, lines)
}

// TestReadLinesNumbersEachLine: readLines hands on each non-empty line, trimmed, with its 1-based number, the last
// one without its newline too (a one-shot import reads files pi-crew no longer writes), and a line of maxLine bytes
// whole.
func TestReadLinesNumbersEachLine(t *testing.T) {
	atLimit := strings.Repeat("y", maxLine)
	for _, c := range []struct {
		name, content string
		want          []string
	}{
		{"empty", "", nil},
		{"one line", "a\n", []string{"1:a"}},
		{"no newline at the end", "a\nb", []string{"1:a", "2:b"}},
		{"blank lines", "\n a \r\n\n\nb\n\n", []string{"2:a", "5:b"}},
		{"a line of maxLine bytes", "a\n" + atLimit + "\nb", []string{"1:a", "2:" + atLimit[:8], "3:b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "events.jsonl")
			require.NoError(t, os.WriteFile(p, []byte(c.content), 0o644))
			src := &source{root: dir}
			var got []string
			src.readLines("r", p, func(line int, b []byte) { got = append(got, fmt.Sprintf("%d:%.8s", line, b)) })
			require.Equal(t, c.want, got)
			require.Empty(t, src.skipped)
			require.False(t, src.failed)
		})
	}
}
