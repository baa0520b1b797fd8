package picrew

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// nullSink takes every write and keeps nothing of it, so that what a test measures is the follower's own.
type nullSink struct{}

func (nullSink) Import(_ context.Context, ws []Write) ([]WriteResult, error) {
	out := make([]WriteResult, len(ws))
	for i, w := range ws {
		out[i] = WriteResult{Appended: len(w.Items)}
	}
	return out, nil
}

func (nullSink) Checkpoints(context.Context) ([]events.ImportCheckpoint, error) { return nil, nil }

// TestFollowerDoesNotHoldMessageBodies: a follower keeps, for each live run, what the rest of the run's files may
// name (a message's mailbox for its delivery state, its id for a steer), not the messages themselves. It kept each
// message whole, body included, for as long as the run was live: a run's workers sending large messages (msg.send
// takes up to 256 Ki chars) grew the follower, and crewd it runs in, by every body the run ever sent, read or not.
func TestFollowerDoesNotHoldMessageBodies(t *testing.T) {
	const messages, body = 64, 256 << 10
	root := newRoot(t)
	run := newRun(t, root, runA)
	require.NoError(t, run.AddTask("01_plan", "planner"))
	require.NoError(t, run.SetStatus("running"))
	for i := range messages {
		_, err := run.Message("01_plan", fmt.Sprintf("%03d", i)+strings.Repeat("b", body))
		require.NoError(t, err)
	}
	runsDir := filepath.Join(root.Dir, "state", "runs")
	// NB: what the follower holds is what its going frees: measured just before and just after, not as the heap's
	// growth over the passes, which counts whatever else the test binary holds meanwhile (a goroutine of an earlier
	// test still reading) and sees a slow or loaded machine's noise.
	var withIt, without runtime.MemStats
	stats := func() FollowStats {
		fl := NewFollower(root.Dir, nullSink{}, &FollowOptions{SettleAfter: time.Hour,
			CheckpointEvery: time.Nanosecond, MaxBatchBytes: 4 << 20})
		fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
		// a pass reads at most maxTailRead bytes of a file
		for range 10 {
			fl.pass(t.Context(), runsDir, true, nil)
		}
		runtime.GC()
		runtime.ReadMemStats(&withIt)
		return fl.Stats()
	}()
	runtime.GC()
	runtime.ReadMemStats(&without)
	require.Equal(t, uint64(messages), stats.Lines, "every message was read")
	require.Zero(t, stats.Pending)
	held := int64(withIt.HeapAlloc) - int64(without.HeapAlloc)
	require.Less(t, held, int64(messages*body/4), "the follower holds %d bytes after reading %d messages of %d bytes",
		held, messages, body)
	t.Logf("held %d bytes", held)
}

// TestFollowHoldsAtMostMaxPendingBytes: a run's writes waiting for the daemon are bounded in bytes too: past
// maxPendingBytes of lines read, its files are not read further until the daemon takes them. Bounded in number only
// (maxPending), a daemon away let a run of long lines (up to maxTailRead each, a foreign event's data kept whole)
// hold gigabytes of writes in the follower, and in crewd it runs in. Once the daemon answers, every line is imported,
// once.
func TestFollowHoldsAtMostMaxPendingBytes(t *testing.T) {
	const lineLen = 256 << 10
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.SetStatus("running"))
	total := 2*maxPendingBytes/lineLen + 1
	for seq := 1; seq <= total; seq++ {
		line := fmt.Sprintf(`{"type":"task.progress","taskId":"01_plan","metadata":{"seq":%d},"data":{"pad":"`, seq)
		line += strings.Repeat("p", lineLen-len(line)-3) + `"}}` + "\n"
		require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), []byte(line)))
	}
	sink := newMemSink()
	sink.failBefore = 1 << 30
	fl := NewFollower(root.Dir, sink, &FollowOptions{SettleAfter: time.Hour, CheckpointEvery: time.Nanosecond,
		MaxBatchBytes: 2 << 20})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	runsDir := filepath.Join(root.Dir, "state", "runs")
	for range 2 * total * lineLen / maxTailRead {
		fl.pass(t.Context(), runsDir, true, nil)
	}
	read := int(fl.Stats().Lines)
	require.LessOrEqual(t, read*lineLen, maxPendingBytes+lineLen, "lines read for a daemon that is away")
	require.GreaterOrEqual(t, read*lineLen, maxPendingBytes, "the run read on up to the bound")

	sink.mu.Lock()
	sink.failBefore = 0
	sink.mu.Unlock()
	for i := 0; fl.Stats().Lines < uint64(total); i++ {
		require.Less(t, i, 4*total*lineLen/maxTailRead, "the lines were not all read: %+v", fl.Stats())
		fl.pass(t.Context(), runsDir, true, nil)
	}
	fl.pass(t.Context(), runsDir, true, nil)
	require.Zero(t, fl.Stats().Pending)
	requireCopy(t, root.Dir, sink, copyOf{live: true})
}
