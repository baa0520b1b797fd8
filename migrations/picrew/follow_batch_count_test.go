package picrew

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// countCappedSink is a memSink that refuses, whole, a call carrying more writes than crewd's import.append takes
// (broker.MaxImportWrites), as crewd answers it (bad-params, the call failing), and keeps the most writes a call
// carried.
type countCappedSink struct {
	*memSink
	most int
}

func (c *countCappedSink) Import(ctx context.Context, ws []Write) ([]WriteResult, error) {
	if len(ws) > broker.MaxImportWrites {
		return nil, fmt.Errorf("import.append: writes must hold 1..%d writes", broker.MaxImportWrites)
	}
	c.mu.Lock()
	c.most = max(c.most, len(ws))
	c.mu.Unlock()
	return c.memSink.Import(ctx, ws)
}

// TestFollowSendsAtMostTheWritesACallTakes: a run whose files hold more small writes than one import.append takes
// (broker.MaxImportWrites) has them sent over several calls of at most sendBatch writes each, every write imported
// once. Sized by bytes alone, hundreds of small writes went in one call, which crewd refuses whole, so that the run's
// writes were sent again at every pass and none was ever imported.
func TestFollowSendsAtMostTheWritesACallTakes(t *testing.T) {
	root := newRoot(t)
	runSteps(t, picrewtest.Lifecycle(newRun(t, root, runA), 2*broker.MaxImportWrites))

	sink := &countCappedSink{memSink: newMemSink()}
	fl, pass, reported := stepFollower(t, root.Dir, sink)
	for range 4 {
		pass()
	}
	require.Zero(t, fl.Stats().SendErrors, "no call refused")
	require.Equal(t, sendBatch, sink.most, "the writes went in calls of sendBatch")
	requireCopy(t, root.Dir, sink.memSink, copyOf{})
	require.Empty(t, *reported)
}
