package picrew

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportReadsOneRunAtATime: the one-shot import reads a run's files when it imports the run, so what it holds is
// one run's files, not the crew root's. It read every run of the root (each event, message and steer) before it
// imported the first, and a root of thousands of runs, each with the archives of its compacted event log, took memory
// in proportion to all of it.
func TestImportReadsOneRunAtATime(t *testing.T) {
	const first, second = "team_20261201120000_00000000000000a1", "team_20261201120000_00000000000000a2"
	root := t.TempDir()
	for _, id := range []string{first, second} {
		writeFiles(t, root, map[string]string{
			"state/runs/" + id + "/manifest.json": manifestOf(id, "completed"),
			"state/runs/" + id + "/events.jsonl":  eventLine(1, "task.progress", "", `{}`),
		})
	}
	var mu sync.Mutex
	var opened []string
	open := openOS
	openOS = func(c *crewRoot, p string, flag int) (*os.File, error) {
		mu.Lock()
		opened = append(opened, p)
		mu.Unlock()
		return open(c, p, flag)
	}
	t.Cleanup(func() { openOS = open })

	l := openFuzzStore(t)
	defer l.Close()
	var beforeSecond []string
	sum, err := Import(l, root, &Options{Clock: valuesClock, Progress: func(done, _ uint64) {
		if done == 1 {
			mu.Lock()
			beforeSecond = append([]string(nil), opened...)
			mu.Unlock()
		}
	}})
	require.NoError(t, err)
	require.Len(t, sum.Runs, 2)
	require.Contains(t, beforeSecond, filepath.Join(root, "state", "runs", first, "events.jsonl"))
	for _, p := range beforeSecond {
		require.False(t, strings.Contains(p, second), "%s read before the first run was imported", p)
	}
	require.Contains(t, opened, filepath.Join(root, "state", "runs", second, "events.jsonl"))
}
