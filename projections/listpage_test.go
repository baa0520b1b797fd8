package projections

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// listHistory is a run whose asks are resolved and whose messages (to three
// boxes) are delivered and acknowledged in random order, some never; boxes
// lists each box's message ids in append order.
func listHistory(rng *rand.Rand, n int) (evs []events.Event, boxes map[string][]string) {
	var h history
	fixture(&h, 0, true)
	boxes = map[string][]string{}
	var open, unacked []string
	settle := func(ids *[]string) string {
		i := rng.IntN(len(*ids))
		id := (*ids)[i]
		*ids = append((*ids)[:i], (*ids)[i+1:]...)
		return id
	}
	for i := range n {
		switch k := rng.IntN(6); {
		case k == 0:
			q := fmt.Sprintf("q%d", i)
			open = append(open, q)
			h.add(runR, events.TypeAskRequested,
				&events.AskRequested{TaskID: taskP, QuestionID: q, Options: []string{q}})
		case k == 1 && len(open) > 0:
			typ, q := events.TypeAskAnswered, settle(&open)
			if rng.IntN(2) == 0 {
				h.add(runR, events.TypeAskTimedOut, &events.AskTimedOut{TaskID: taskP, QuestionID: q})
				continue
			}
			h.add(runR, typ, &events.AskAnswered{TaskID: taskP, QuestionID: q})
		case k == 2:
			h.add(runR, events.TypeCredentialIssued,
				&events.CredentialIssued{TaskID: fmt.Sprintf("t%d", rng.IntN(n/4+1)),
					Role: events.RoleWorker, Digest: strconv.Itoa(i)})
		case k == 3:
			id, to := fmt.Sprintf("m%d", i), []string{events.RunInbox, taskP, "03_other"}[rng.IntN(3)]
			boxes[to] = append(boxes[to], id)
			unacked = append(unacked, id)
			h.add(runR, events.TypeMailboxAppended, &events.MailboxAppended{ID: id, To: to, From: "orchestrator",
				Kind: events.KindMessage, Body: id})
		case k == 4 && len(unacked) > 0:
			h.add(runR, events.TypeMailboxDelivered,
				&events.MailboxDelivered{MessageID: unacked[rng.IntN(len(unacked))]})
		case k == 5 && len(unacked) > 0:
			h.add(runR, events.TypeMailboxAcknowledged, &events.MailboxAcknowledged{MessageID: settle(&unacked)})
		}
	}
	return h.evs, boxes
}

// TestListPagesMatchWholeLists pages a run's asks, credentials and mailboxes
// in place and compares every page, for every limit, filter and cursor (each
// ordinal, and ones refused), with the page cut out of a copy of the whole
// list, on the folded state, its clone and its snapshot read back.
func TestListPagesMatchWholeLists(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	evs, boxes := listHistory(rng, 1500)
	folded := fold(evs)
	b, err := EncodeSnapshot(folded)
	require.NoError(t, err)
	decoded, err := DecodeSnapshot(b)
	require.NoError(t, err)
	limits := []int{0, 1, 2, 3, 7, 50, 1000}
	for name, s := range map[string]*State{"folded": folded, "clone": folded.Clone(), "decoded": decoded} {
		t.Run(name, func(t *testing.T) {
			asks, creds := s.Asks(runR), s.Credentials(runR)
			require.NotEmpty(t, asks)
			require.NotEmpty(t, creds)
			for _, pending := range []bool{false, true} {
				box := map[string][]Message{}
				for to, ids := range boxes {
					for _, id := range ids {
						m, ok := s.Message(runR, id)
						require.True(t, ok)
						box[to] = append(box[to], m)
					}
				}
				for _, limit := range limits {
					requireSamePages(t, fmt.Sprintf("asks/%v/%d", pending, limit), len(asks), limit,
						func(f PageFilter) (Page[Ask], error) { return s.AsksPage(runR, pending, f) },
						func(f PageFilter) (Page[Ask], error) { return wholeAsksPage(s, runR, pending, f) })
					requireSamePages(t, fmt.Sprintf("credentials/%d", limit), len(creds), limit,
						func(f PageFilter) (Page[Credential], error) { return s.CredentialsPage(runR, f) },
						func(f PageFilter) (Page[Credential], error) { return wholeCredentialsPage(s, runR, f) })
					for to, msgs := range box {
						requireSamePages(t, fmt.Sprintf("mailbox/%q/%v/%d", to, pending, limit), len(msgs), limit,
							func(f PageFilter) (Page[Message], error) {
								mp, err := s.Mailbox(runR, to,
									MailboxFilter{Pending: pending, Limit: f.Limit, Cursor: f.Cursor})
								return Page[Message]{Items: mp.Messages, NextCursor: mp.NextCursor,
									Total: mp.Total}, err
							},
							func(f PageFilter) (Page[Message], error) {
								return ordinalPageOfWhole(msgs, f, func(m Message) bool {
									return !pending || m.Status != MessageAcknowledged
								})
							})
					}
				}
			}
		})
	}
}

// requireSamePages compares page with want from every cursor of a list of n
// (and from cursors refused), and pages through from the start.
func requireSamePages[T any](t *testing.T, what string, n, limit int, page, want func(PageFilter) (Page[T], error)) {
	t.Helper()
	for c := 0; c <= n; c++ {
		f := PageFilter{Limit: limit, Cursor: strconv.FormatUint(uint64(c), 36)}
		w, werr := want(f)
		require.NoError(t, werr)
		got, err := page(f)
		require.NoError(t, err)
		require.Equal(t, w, got, "%s from %s", what, f.Cursor)
	}
	for _, bad := range []string{strconv.FormatUint(uint64(n+1), 36), "-1", "zzzzzzz", "1.5", " 1"} {
		_, err := page(PageFilter{Limit: limit, Cursor: bad})
		require.ErrorIs(t, err, ErrBadCursor, "%s from %q", what, bad)
	}
	var all []T
	for f, pages := (PageFilter{Limit: limit}), 0; ; pages++ {
		require.LessOrEqual(t, pages, n+1, what)
		w, err := want(f)
		require.NoError(t, err)
		got, err := page(f)
		require.NoError(t, err)
		require.Equal(t, w, got, "%s from %q", what, f.Cursor)
		all = append(all, got.Items...)
		if got.NextCursor == "" {
			require.Len(t, all, got.Total, what)
			return
		}
		f.Cursor = got.NextCursor
	}
}

// TestListPageCopiesThePage reads a page of 50 from the middle of lists of
// 20,000: it allocates for the page (each ask's options, the page itself),
// never for the run's list, which a copy of the whole list would (an ask's
// clone alone is an allocation).
func TestListPageCopiesThePage(t *testing.T) {
	const n, limit = 20_000, 50
	s := bigLists(n)
	f := PageFilter{Limit: limit, Cursor: strconv.FormatUint(n/2, 36)}
	for name, read := range map[string]func() (int, error){
		"asks":         func() (int, error) { p, err := s.AsksPage(runR, false, f); return len(p.Items), err },
		"asks-pending": func() (int, error) { p, err := s.AsksPage(runR, true, f); return len(p.Items), err },
		"credentials":  func() (int, error) { p, err := s.CredentialsPage(runR, f); return len(p.Items), err },
		"mailbox-pending": func() (int, error) {
			p, err := s.Mailbox(runR, taskP, MailboxFilter{Pending: true, Limit: f.Limit, Cursor: f.Cursor})
			return len(p.Messages), err
		},
	} {
		got, err := read()
		require.NoError(t, err)
		require.Equal(t, limit, got, name)
		require.LessOrEqual(t, testing.AllocsPerRun(5, func() { _, _ = read() }), float64(limit+2), name)
	}
}
