package projections

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// gappedBox folds a run whose task P has a mailbox of n+2 messages: the first and the last still pending, the n
// between them acknowledged. Then each acknowledged message is taken out of the run's log (its entry in the box
// points past the log), so a page that reads one panics: a page of the pending messages must find the next pending
// message without a walk over the acknowledged ones, which a worker can pile up in its own box by the thousand.
func gappedBox(n int) *State {
	var h history
	fixture(&h, 0, true)
	send := func(id string) {
		h.add(runR, events.TypeMailboxAppended, &events.MailboxAppended{ID: id, To: taskP, From: "orchestrator",
			Kind: events.KindMessage, Body: id})
	}
	send("first")
	for i := range n {
		id := fmt.Sprintf("acked-%d", i)
		send(id)
		h.add(runR, events.TypeMailboxAcknowledged, &events.MailboxAcknowledged{MessageID: id, Recipient: taskP})
	}
	send("last")
	s := fold(h.evs)
	box := s.runs[runR].boxes[taskP]
	for i := 1; i <= n; i++ {
		box[i] = 1 << 40
	}
	return s
}

func TestPendingPageSkipsAcknowledgedMessages(t *testing.T) {
	for _, n := range []int{1_000, 10_000} {
		s := gappedBox(n)
		for _, tc := range []struct {
			name   string
			cursor string
			want   []string
			next   string
		}{
			{"from the start", "", []string{"first", "last"}, ""},
			{"limit 1 leaves the last for the next page", "", []string{"first"}, strconv.FormatUint(uint64(n+1), 36)},
			{"from inside the gap", strconv.FormatUint(uint64(n/2), 36), []string{"last"}, ""},
			{"past the last", strconv.FormatUint(uint64(n+2), 36), nil, ""},
		} {
			limit := 10
			if tc.next != "" {
				limit = 1
			}
			var page MailboxPage
			require.NotPanics(t, func() {
				var err error
				page, err = s.Mailbox(runR, taskP, MailboxFilter{Pending: true, Limit: limit, Cursor: tc.cursor})
				require.NoError(t, err)
			}, "n=%d %s: the page read an acknowledged message", n, tc.name)
			var got []string
			for _, m := range page.Messages {
				got = append(got, m.ID)
			}
			require.Equal(t, tc.want, got, "n=%d %s", n, tc.name)
			require.Equal(t, tc.next, page.NextCursor, "n=%d %s", n, tc.name)
			require.Equal(t, 2, page.Total, "n=%d %s", n, tc.name)
		}
	}
}
