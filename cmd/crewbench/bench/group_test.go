package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heldSink is a sink whose writes, once held, each wait for the test: it
// reports every write's record count on writing, then returns when released
// (or at once, when the test has stopped it).
type heldSink struct {
	held    bool
	writing chan int
	release chan struct{}
	stop    chan struct{}
}

func (s *heldSink) Write(recs []sinkRecord, _ []byte) error {
	if !s.held {
		return nil
	}
	select {
	case s.writing <- len(recs):
	case <-s.stop:
		return nil
	}
	select {
	case <-s.release:
	case <-s.stop:
	}
	return nil
}

func (s *heldSink) ReadAll(func(decodedRecord) error) error { return nil }
func (s *heldSink) Close() error                            { return nil }

// TestGroupCommitterDecidesWhileASyncRuns: the alternatives' committer is the
// one crewlog's engine runs (commands/pipeline.go): while a group's write and
// sync run, the next group stays open and each request that arrives is
// decided into it, and the group is handed to the sink once that write has
// returned. A committer that decided nothing until the write returned would
// give the alternatives a slower writer than crewlog's. Every answer still
// waits for its own group's write.
func TestGroupCommitterDecidesWhileASyncRuns(t *testing.T) {
	ctx := context.Background()
	s := &heldSink{writing: make(chan int), release: make(chan struct{}), stop: make(chan struct{})}
	g := newGroupStore(s)
	decided := make(chan struct{}, 4)
	g.afterDecide = func() { decided <- struct{}{} }
	require.NoError(t, g.Setup(ctx, []string{"run"}, Spec{Budget: 1 << 40, Slots: 4}))
	s.held = true
	t.Cleanup(func() {
		close(s.stop)
		require.NoError(t, g.Close())
	})

	admit := func() chan Admission {
		out := make(chan Admission, 1)
		go func() {
			a, err := g.Admit(ctx, "run", 10)
			if err != nil {
				a.Reason = err.Error()
			}
			out <- a
		}()
		return out
	}
	answered := func(ch chan Admission) bool {
		select {
		case a := <-ch:
			ch <- a
			return true
		default:
			return false
		}
	}

	first := admit()
	<-decided
	require.Equal(t, 3, <-s.writing, "the first admission's group is written")
	second := admit()
	select {
	case <-decided:
	case <-time.After(5 * time.Second):
		t.Fatal("the second admission was not decided while the first group's write ran")
	}
	require.False(t, answered(first), "an admission answered before its group's write returned")
	require.False(t, answered(second), "an admission answered before its group was written")

	s.release <- struct{}{}
	require.True(t, (<-first).Admitted())
	require.Equal(t, 3, <-s.writing, "the second admission's group is written once the first's returned")
	require.False(t, answered(second), "an admission answered before its group's write returned")
	s.release <- struct{}{}
	require.True(t, (<-second).Admitted())
}
