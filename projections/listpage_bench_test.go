package projections

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/crewlog/crewlog/events"
)

// bigLists is a run holding n asks, n credentials and n messages in one
// mailbox; every third ask is answered and every third message
// acknowledged, so the pending filters keep two thirds.
func bigLists(n int) *State {
	var h history
	fixture(&h, 0, true)
	for i := range n {
		q := fmt.Sprintf("q%d", i)
		h.add(runR, events.TypeAskRequested, &events.AskRequested{TaskID: taskP, QuestionID: q, Question: "?",
			Options: []string{"yes", "no"}})
		if i%3 == 0 {
			h.add(runR, events.TypeAskAnswered, &events.AskAnswered{TaskID: taskP, QuestionID: q})
		}
		h.add(runR, events.TypeCredentialIssued, &events.CredentialIssued{TaskID: fmt.Sprintf("t%d", i),
			Role: events.RoleWorker, Digest: "d"})
		m := fmt.Sprintf("m%d", i)
		h.add(runR, events.TypeMailboxAppended, &events.MailboxAppended{ID: m, To: taskP, From: "orchestrator",
			Kind: events.KindMessage, Priority: events.PriorityNormal,
			DeliveryMode: events.DeliveryNextTurn, Body: "b"})
		if i%3 == 0 {
			h.add(runR, events.TypeMailboxAcknowledged, &events.MailboxAcknowledged{MessageID: m, Recipient: taskP})
		}
	}
	return fold(h.evs)
}

// BenchmarkListPage reads one page (limit 50) of a run holding 100,000 asks,
// credentials and messages in one mailbox, from the middle of each list:
// what a list request holds the engine's read lock for.
func BenchmarkListPage(b *testing.B) {
	const n, limit = 100_000, 50
	s := bigLists(n)
	mid := PageFilter{Limit: limit, Cursor: strconv.FormatUint(n/2, 36)} // as a previous page's cursor would be
	for _, c := range []struct {
		name string
		read func() (int, error)
	}{
		{"asks", func() (int, error) { p, err := s.AsksPage(runR, false, mid); return len(p.Items), err }},
		{"asks-pending", func() (int, error) { p, err := s.AsksPage(runR, true, mid); return len(p.Items), err }},
		{"credentials", func() (int, error) { p, err := s.CredentialsPage(runR, mid); return len(p.Items), err }},
		{"mailbox", func() (int, error) {
			p, err := s.Mailbox(runR, taskP, MailboxFilter{Limit: limit, Cursor: mid.Cursor})
			return len(p.Messages), err
		}},
		{"mailbox-pending", func() (int, error) {
			p, err := s.Mailbox(runR, taskP, MailboxFilter{Pending: true, Limit: limit, Cursor: mid.Cursor})
			return len(p.Messages), err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got, err := c.read(); err != nil || got != limit {
					b.Fatalf("page of %d, %v", got, err)
				}
			}
		})
	}
}
