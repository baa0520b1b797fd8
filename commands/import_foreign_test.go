package commands

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestImportedForeignSeqIsTheSources: a foreign.imported keeps its event's seq in the source's log (pi-crew's
// metadata.seq, which counts from 1), and events.since gives it back as metadata.imported.seq, where a pi-crew client
// reads its own event back. import.append took any seq: the admin's write of a seq of 0 or below recorded one no
// source event has, which the importers never record (they skip a line without a seq, or with one past the largest
// int64). It is refused, by value or by pointer.
func TestImportedForeignSeqIsTheSources(t *testing.T) {
	decide := func(p any) error { return decideAfterTask(t, p) }
	for _, seq := range []int64{0, -1, math.MinInt64} {
		foreign := events.ForeignImported{Source: events.ForeignSourcePicrew, Type: "task.progress", Seq: seq}
		for how, p := range map[string]any{"by value": foreign, "by pointer": &foreign} {
			require.ErrorContains(t, decide(p), fmt.Sprintf("import.append: event 2: foreign.imported: seq "+
				"%d is not 1..%d (the source's metadata.seq)", seq, int64(math.MaxInt64)), "%d, %s", seq, how)
		}
	}
	for _, seq := range []int64{1, math.MaxInt64} {
		require.NoError(t, decide(&events.ForeignImported{Source: events.ForeignSourcePicrew,
			Type: "task.progress", Seq: seq}))
	}
}
