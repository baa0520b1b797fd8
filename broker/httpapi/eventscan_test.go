package httpapi

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
)

// TestAnEventsPageLooksAtBoundedEvents: a page of events whose type filter keeps none of a long run's events looks at
// maxEventScan of them and ends there, empty, with hasMore and the cursor of the last one it looked at, in either
// order, rather than reading the whole run for one request; the next page goes on from there.
func TestAnEventsPageLooksAtBoundedEvents(t *testing.T) {
	f := newFixture(t, Options{})
	reqs := make([]commands.Request, maxEventScan+1)
	for i := range reqs {
		reqs[i] = commands.Request{Actor: audittest.Orchestrator,
			Command: &commands.MessageSend{RunID: liveRun, To: []string{"01_lead"}, Body: "m" + strconv.Itoa(i)}}
	}
	positions := make([]uint64, len(reqs))
	for i, r := range f.admitAll(reqs) {
		positions[i] = r.Position
	}
	for _, tc := range []struct {
		order  string
		cursor string // where the page starts, if not at its order's end
		last   uint64 // the position of the last event the page looked at
	}{
		// Start just before the messages, so that the page looks at them alone.
		{"asc", "&cursor=" + strconv.FormatUint(positions[0]-1, 10), positions[maxEventScan-1]},
		{"desc", "", positions[1]},
	} {
		t.Run(tc.order, func(t *testing.T) {
			page := f.ok(livePath + "/events?type=no.such&order=" + tc.order + tc.cursor)
			require.Empty(t, page["events"])
			require.Equal(t, true, page["hasMore"], "a page looks at no more than %d events", maxEventScan)
			require.Equal(t, strconv.FormatUint(tc.last, 10), page["nextCursor"])
		})
	}
}
