package picrew

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// peakHeapDuring is the most heap f had in use above what was in use before it, sampled every millisecond while it
// ran (f runs in the test's goroutine). NB: the collector runs at a tenth of the heap in use, not its double, so that
// what f left to it counts for little, whatever the heap the tests before it left.
func peakHeapDuring(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	var peak uint64
	var wg sync.WaitGroup
	done := make(chan struct{})
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapAlloc > base {
			peak = max(peak, m.HeapAlloc-base)
		}
	}
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	sample()
	return peak
}

// TestATasksFileOfManyRecordsIsReadInLittleMemory: a run's workers write tasks.json, up to maxWholeFile bytes, and
// the one-shot import and the follower (at every rewrite) decode it. A file of millions of records that are not tasks
// (`[1,1,…]`, `[{},{},…]`) had a task's room (272 bytes) made for each before any was looked at, and held every
// record's bytes apart while each was decoded: 4 MiB of `1,` took 1.2 GB of heap at once. The records are decoded one
// at a time now, and only the tasks kept take room; what each reports is as before.
func TestATasksFileOfManyRecordsIsReadInLittleMemory(t *testing.T) {
	const size = 4 << 20
	for name, record := range map[string]string{"numbers": "1", "empty objects": "{}", "tasks": `{"id":"t"}`} {
		t.Run(name, func(t *testing.T) {
			for _, form := range []struct{ open, close string }{{"[", "]"}, {`{"tasks":[`, "]}"}} {
				b := []byte(form.open + strings.Repeat(record+",", size/(len(record)+1)) + record + form.close)
				s := &source{root: t.TempDir()}
				var tasks []task
				var err error
				peak := peakHeapDuring(func() { tasks, err = s.parseTasks(runA, "tasks.json", b) })
				t.Logf("%s%s…: %d bytes of heap at most", form.open, record, peak)
				require.NoError(t, err)
				require.Less(t, peak, uint64(4*size), "%s%s…: the heap held %d bytes", form.open, record, peak)
				if record == `{"id":"t"}` {
					require.Len(t, tasks, 1, "the first t is kept")
					require.Len(t, s.skipped, maxReportsPerFile+1)
					require.Equal(t, "task t appears twice: the first is kept", s.skipped[0].Reason)
					continue
				}
				require.Empty(t, tasks)
				require.Len(t, s.skipped, maxReportsPerFile+1, "reports bounded")
				require.True(t, bytes.HasPrefix([]byte(s.skipped[0].Reason), []byte("task 0 ")), s.skipped[0].Reason)
			}
		})
	}
}
