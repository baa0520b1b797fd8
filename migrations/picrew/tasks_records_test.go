package picrew

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// addTestdataSeeds adds to f each file at path (its elements) under a run of the test root, testdata/root.
func addTestdataSeeds(f *testing.F, path ...string) {
	files, err := filepath.Glob(filepath.Join(append([]string{"testdata", "root", "state", "runs", "*"}, path...)...))
	require.NoError(f, err)
	require.NotEmpty(f, files)
	for _, p := range files {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b)
	}
}

// taskRecordsReference is what taskRecords replaced: every record of tasks.json b, in either form, decoded at once
// as raw bytes, each then decoded alone.
func taskRecordsReference(b []byte) ([]json.RawMessage, error) {
	var records []json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		var env struct {
			Tasks []json.RawMessage `json:"tasks"`
		}
		err := json.Unmarshal(b, &env)
		return env.Tasks, err
	}
	err := json.Unmarshal(b, &records)
	return records, err
}

// FuzzTaskRecordsAgreeWithReference: taskRecords decodes the records of tasks.json one at a time, from the file's
// bytes, where they were decoded at once as raw bytes and each then alone (taskRecordsReference). For any bytes, a
// file the reference refuses is refused with its error, and each record decodes to the same task, or fails with the
// same error, as the reference's record alone: a record a type error leaves does not move the next one.
func FuzzTaskRecordsAgreeWithReference(f *testing.F) {
	for _, s := range []string{`[]`, `null`, ` [ ] `, `5`, `"x"`, `{}`, `{"tasks":null}`, `{"tasks":5}`,
		`{"tasks":{"a":[1]}}`, `{"tasks":[]}x`, `[]x`, `[{"id":"a"}`, `[1,{"id":"a"},"b",[{"id":"c"}],null]`,
		`[{"id":"a","depth":1.5,"role":"r"},{"id":"b","startedAt":"x","dependsOn":[1,"a"]},{"id":"c"}]`,
		`{"schemaVersion":1,"tasks":[{"id":"a","runId":"r","usage":{"input":"1"}},{"id":"b"}],"tasks":[{"id":"z"}]}`,
	} {
		f.Add([]byte(s))
	}
	addTestdataSeeds(f, "tasks.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantErr := taskRecordsReference(b)
		records, err := taskRecords(b)
		if wantErr != nil {
			require.EqualError(t, err, wantErr.Error())
			return
		}
		require.NoError(t, err)
		n := 0
		for ; records.More(); n++ {
			require.Less(t, n, len(want), "more records than the reference's")
			var got, alone task
			gotErr, aloneErr := records.Decode(&got), json.Unmarshal(want[n], &alone)
			require.Equal(t, fmt.Sprint(aloneErr), fmt.Sprint(gotErr), "record %d", n)
			if aloneErr == nil {
				require.Equal(t, alone, got, "record %d", n)
			}
		}
		require.Len(t, want, n)
	})
}
