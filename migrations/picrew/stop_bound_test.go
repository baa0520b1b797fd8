package picrew

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// stopDeadlineSink is a memSink that fails every call made without a deadline (the follower's calls while it runs,
// as a daemon that does not answer) and takes those made with one (the follower's last ones, as it stops), keeping
// their deadlines. tried is closed at the first call that failed: the follower holds writes it read.
type stopDeadlineSink struct {
	*memSink
	once      sync.Once
	tried     chan struct{}
	deadlines []time.Time
}

func (s *stopDeadlineSink) Import(ctx context.Context, ws []Write) ([]WriteResult, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		s.once.Do(func() { close(s.tried) })
		return nil, errSinkDown
	}
	s.mu.Lock()
	s.deadlines = append(s.deadlines, dl)
	s.mu.Unlock()
	return s.memSink.Import(ctx, ws)
}

// TestAStoppedFollowerSendsWhatItReadWithinFiveSeconds: a follower stopped sends the writes it read and its last
// checkpoints, as docs/picrew.md says crewd waits for on SIGINT or SIGTERM, within 5 s at most: its last calls carry a
// deadline 5 s after the stop, so a daemon that does not answer holds crewd's stop no longer, and the writes a daemon
// takes by then are imported, with the checkpoints that cover them.
func TestAStoppedFollowerSendsWhatItReadWithinFiveSeconds(t *testing.T) {
	root := newRoot(t)
	runSteps(t, picrewtest.Lifecycle(newRun(t, root, runA), 3))
	sink := &stopDeadlineSink{memSink: newMemSink(), tried: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewFollower(root.Dir, sink, fastFollow()).Run(ctx) }()
	<-sink.tried

	stopped := time.Now()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	returned := time.Now()

	require.NotEmpty(t, sink.deadlines, "the writes read are sent as the follower stops")
	for _, dl := range sink.deadlines {
		require.False(t, dl.Before(stopped.Add(5*time.Second)), "deadline %v, stopped at %v", dl, stopped)
		require.False(t, dl.After(returned.Add(5*time.Second)), "deadline %v, returned at %v", dl, returned)
	}
	requireCopy(t, root.Dir, sink.memSink, copyOf{live: true})
	cks, err := sink.Checkpoints(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, cks, "the last checkpoints")
}
