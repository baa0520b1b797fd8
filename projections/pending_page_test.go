package projections

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// gappedLists folds a run whose task P has a mailbox of n+2 messages and which has asked n+2 questions: in each
// list the first and the last are still pending, the n between them settled (acknowledged, answered). Then each
// settled entry is taken out of the run's records (a message's entry in the box points past the log, a question
// leaves the map), so a page that reads one panics.
func gappedLists(n int) *State {
	var h history
	fixture(&h, 0, true)
	add := func(id string, settled bool) {
		h.add(runR, events.TypeMailboxAppended, &events.MailboxAppended{ID: id, To: taskP, From: "orchestrator",
			Kind: events.KindMessage, Body: id})
		h.add(runR, events.TypeAskRequested, &events.AskRequested{TaskID: taskP, QuestionID: id, Question: "?"})
		if settled {
			h.add(runR, events.TypeMailboxAcknowledged, &events.MailboxAcknowledged{MessageID: id, Recipient: taskP})
			h.add(runR, events.TypeAskAnswered, &events.AskAnswered{TaskID: taskP, QuestionID: id})
		}
	}
	add("first", false)
	for i := range n {
		add(fmt.Sprintf("settled-%d", i), true)
	}
	add("last", false)
	s := fold(h.evs)
	r := s.runs[runR]
	for i := 1; i <= n; i++ {
		r.boxes[taskP][i] = 1 << 40
		delete(r.asks, r.askOrder[i])
	}
	return s
}

// TestPendingPageSkipsSettledEntries reads pending pages of a mailbox and of a run's questions whose thousands of
// settled entries lie between two pending ones: a page must find the next pending entry without a walk over the
// settled ones (which gappedLists makes panic), so that its cost is the page's at 1,000 settled entries as at
// 10,000. A worker piles up settled entries in its own box by acknowledging what it is sent, and every msg.inbox
// page is read under the engine's read lock that the publisher waits for.
func TestPendingPageSkipsSettledEntries(t *testing.T) {
	lists := map[string]func(s *State, f PageFilter) (ids []string, next string, total int, err error){
		"mailbox": func(s *State, f PageFilter) ([]string, string, int, error) {
			p, err := s.Mailbox(runR, taskP, MailboxFilter{Pending: true, Limit: f.Limit, Cursor: f.Cursor})
			var ids []string
			for _, m := range p.Messages {
				ids = append(ids, m.ID)
			}
			return ids, p.NextCursor, p.Total, err
		},
		"asks": func(s *State, f PageFilter) ([]string, string, int, error) {
			p, err := s.AsksPage(runR, true, f)
			var ids []string
			for _, a := range p.Items {
				ids = append(ids, a.QuestionID)
			}
			return ids, p.NextCursor, p.Total, err
		},
	}
	for _, n := range []int{1_000, 10_000} {
		s := gappedLists(n)
		for _, tc := range []struct {
			name string
			f    PageFilter
			want []string
			next string
		}{
			{"from the start", PageFilter{Limit: 10}, []string{"first", "last"}, ""},
			{"limit 1 leaves the last for the next page", PageFilter{Limit: 1}, []string{"first"},
				strconv.FormatUint(uint64(n+1), 36)},
			{"from inside the gap", PageFilter{Limit: 10, Cursor: strconv.FormatUint(uint64(n/2), 36)},
				[]string{"last"}, ""},
			{"past the last", PageFilter{Limit: 10, Cursor: strconv.FormatUint(uint64(n+2), 36)}, nil, ""},
		} {
			for list, page := range lists {
				what := fmt.Sprintf("%s n=%d %s", list, n, tc.name)
				var got []string
				var next string
				var total int
				require.NotPanics(t, func() {
					var err error
					got, next, total, err = page(s, tc.f)
					require.NoError(t, err)
				}, "%s: the page read a settled entry", what)
				require.Equal(t, tc.want, got, what)
				require.Equal(t, tc.next, next, what)
				require.Equal(t, 2, total, what)
			}
		}
	}
}
