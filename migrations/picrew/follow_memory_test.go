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
	fl := NewFollower(root.Dir, nullSink{}, &FollowOptions{SettleAfter: time.Hour, CheckpointEvery: time.Nanosecond,
		MaxBatchBytes: 4 << 20})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	runsDir := filepath.Join(root.Dir, "state", "runs")
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range 10 { // a pass reads at most maxTailRead bytes of a file
		fl.pass(t.Context(), runsDir, true, nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	require.Equal(t, uint64(messages), fl.Stats().Lines, "every message was read")
	require.Zero(t, fl.Stats().Pending)
	held := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	require.Less(t, held, int64(messages*body/4), "the follower holds %d bytes after reading %d messages of %d bytes",
		held, messages, body)
	t.Logf("held %d bytes", held)
	runtime.KeepAlive(fl)
}
