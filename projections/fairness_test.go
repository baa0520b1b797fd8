package projections

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestRunUsageAndSlotWaiters: the fold counts a run's events, message bytes and text, marks a run waiting from a slot
// refusal until its next admission or its end, and the queries see it the same after a snapshot round trip.
func TestRunUsageAndSlotWaiters(t *testing.T) {
	var h history
	for _, run := range []string{"A", "B", "C"} {
		h.add(run, events.TypeRunCreated, &events.RunCreated{Team: "t"})
		h.add(run, events.TypeRunRunning, &events.RunRunning{})
	}
	h.add("A", events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: "a", SubID: "gc-a1"})
	h.add("A", events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: "a", SubID: "gc-a2"})
	h.add("A", events.TypeMailboxAppended, &events.MailboxAppended{ID: "m1", To: "a", Body: "hello", Subject: "hi"})
	refusedB := h.add("B", events.TypeDelegateRejected,
		&events.DelegateRejected{TaskID: "b", Reason: events.ReasonSlotsExhausted})
	h.add("C", events.TypeDelegateRejected, &events.DelegateRejected{TaskID: "c",
		Reason: events.ReasonBudgetInsufficient})
	// A, refused while it holds 2 >= its share (1 by default), is owed nothing and does not wait.
	h.add("A", events.TypeDelegateRejected, &events.DelegateRejected{TaskID: "a",
		Reason: events.ReasonSlotsExhausted})
	s := fold(h.evs)

	a, _ := s.Run("A")
	// Text: the team, two admissions' task and sub ids, the refusal's task and reason, and the message's id and
	// recipient; its body and subject are message bytes.
	text := int64(len("t") + 2*len("a"+"gc-a1") + len("a"+events.ReasonSlotsExhausted) + len("m1"+"a"))
	require.Equal(t, RunUsage{Events: 6, MsgBytes: 7, TextBytes: text}, a.Usage)
	require.Equal(t, 7+text, a.Usage.Bytes())
	require.Equal(t, 2, s.SlotsHeldBy("A"))
	run, ok := s.SlotHolder("gc-a2")
	require.True(t, ok)
	require.Equal(t, "A", run)
	require.Equal(t, []string{}, s.SlotsOf("B").SubIDs, "a worker of B sees none of A's holders")
	require.Equal(t, []string{"gc-a1", "gc-a2"}, s.SlotsOf("A").SubIDs)
	require.Equal(t, 2, s.SlotsOf("B").Held)

	now := refusedB.UnixMilli()
	require.Equal(t, 1, s.SlotWaiters("A", now, 60_000, 1), "B waits; C's refusal was not for a slot")
	require.Equal(t, 1, s.SlotWaiters("C", now, 60_000, 1), "B waits, A does not")
	require.Equal(t, 0, s.SlotWaiters("B", now, 60_000, 1), "a run never waits on itself")
	require.Equal(t, 0, s.SlotWaiters("A", now+60_001, 60_000, 1), "the wait lapses")
	require.Equal(t, 0, s.SlotWaiters("C", now, 60_000, 0), "a run holding its share waits for nothing")
	dec, err := DecodeSnapshot(mustEncode(t, s))
	require.NoError(t, err)
	require.Equal(t, 1, dec.SlotWaiters("A", now, 60_000, 1), "the wait survives a snapshot")

	// Admission, or the run's end, ends the wait.
	admitted := fold(append(h.evs, events.Event{Position: uint64(len(h.evs) + 1), Stream: "B",
		Type: events.TypeDelegateAdmitted, Time: refusedB.Time,
		Payload: &events.DelegateAdmitted{TaskID: "b", SubID: "gc-b1"}}))
	require.Equal(t, 0, admitted.SlotWaiters("A", now, 60_000, 1))
	h.add("B", events.TypeRunCancelled, &events.RunCancelled{})
	require.Equal(t, 0, fold(h.evs).SlotWaiters("A", now, 60_000, 1))
}

func mustEncode(t *testing.T, s *State) []byte {
	t.Helper()
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	return b
}

// TestMessagesSinceIsBounded: MessagesSince counts from the newest message back and stops at its bound.
func TestMessagesSinceIsBounded(t *testing.T) {
	var h history
	h.add("A", events.TypeRunCreated, &events.RunCreated{Team: "t"})
	for i := range 10 {
		from := []string{"w1", "w2"}[i%2]
		h.add("A", events.TypeMailboxAppended, &events.MailboxAppended{ID: fmt.Sprint(i), To: "a",
			From: from, Body: "x"})
	}
	s := fold(h.evs)
	counts := func(from string, since int64, upTo int) []int {
		all, sent := s.MessagesSince("A", from, since, upTo)
		return []int{all, sent}
	}
	require.Equal(t, []int{10, 5}, counts("w1", 0, 100))
	require.Equal(t, []int{4, 2}, counts("w2", 0, 4), "w2 sent the newest")
	require.Equal(t, []int{3, 1}, counts("w1", at(9), 100), "positions 9, 10 and 11: w1 sent position 10's")
	require.Equal(t, []int{10, 0}, counts("", 0, 100))
	all, sent := s.MessagesSince("nope", "w1", 0, 100)
	require.Zero(t, all+sent)
}

// TestPagesFollowTheCursor: every page query returns each record once, in order, and refuses a cursor it did not
// make.
func TestPagesFollowTheCursor(t *testing.T) {
	var h history
	h.add("A", events.TypeRunCreated, &events.RunCreated{Team: "t"})
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("t%d", i)
		want = append(want, id)
		h.add("A", events.TypeTaskCreated, &events.TaskCreated{TaskID: id, Role: "executor"})
	}
	s := fold(h.evs)
	var got []string
	cursor := ""
	for {
		p, err := s.TasksPage("A", PageFilter{Limit: 3, Cursor: cursor})
		require.NoError(t, err)
		require.Equal(t, 7, p.Total)
		for _, tk := range p.Items {
			got = append(got, tk.TaskID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	require.Equal(t, want, got)
	for _, bad := range []string{"zz", "-1", "!"} {
		_, err := s.DelegationsPage("A", PageFilter{Cursor: bad})
		require.ErrorIs(t, err, ErrBadCursor, bad)
	}
	p, err := s.LedgerPage("nope", PageFilter{Limit: 1})
	require.NoError(t, err)
	require.Empty(t, p.Items)
}

// slotWaitCase asks SlotWaiters, or WorkerSlotWaiters, for the waiters other than asker at clock reading now for a
// share, and holds the answer.
type slotWaitCase struct {
	name, asker string
	now         int64
	share, want int
}

// TestSlotWaitersBounds: a run refused a slot (slots-exhausted or slot-share-exceeded) waits while it holds fewer
// than its share — one holding exactly its share is owed nothing —, not for a refusal a later check makes as well,
// and not once it has ended; SlotWaiters counts the runs refused at or after now − wait that hold fewer than the
// share asked for, on top of the waits AssumePool assumed.
func TestSlotWaitersBounds(t *testing.T) {
	const wait = 60_000
	var h history
	h.add(events.EngineStream, events.TypeEngineConfigured, &events.EngineConfigured{NestingEnabled: true,
		MaxDepth: 4, MaxSlots: 8, SlotShare: 2, SlotWaitSec: 60})
	for _, run := range []string{"A", "B", "C", "D", "E"} {
		h.add(run, events.TypeRunCreated, &events.RunCreated{Team: "t"})
		h.add(run, events.TypeRunRunning, &events.RunRunning{})
	}
	for _, d := range [][2]string{{"A", "gc-a1"}, {"A", "gc-a2"}, {"B", "gc-b1"}} {
		h.add(d[0], events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: "t", SubID: d[1]})
	}
	// A holds its share; B holds one slot; C's request a later check refuses as well; D ends after its refusal; E's
	// refusal comes after its end (an import may record one).
	refused := func(run, reason string, p *events.Policy) events.Event {
		return h.add(run, events.TypeDelegateRejected, &events.DelegateRejected{TaskID: "t", Reason: reason, Policy: p})
	}
	refused("A", events.ReasonSlotsExhausted, nil)
	refusedB := refused("B", events.ReasonSlotShareExceeded, nil)
	refused("C", events.ReasonSlotsExhausted, &events.Policy{Otherwise: events.ReasonBudgetInsufficient})
	refused("D", events.ReasonSlotsExhausted, nil)
	h.add("D", events.TypeRunCompleted, &events.RunCompleted{})
	h.add("E", events.TypeRunFailed, &events.RunFailed{})
	refused("E", events.ReasonSlotsExhausted, nil)
	s := fold(h.evs)
	now := refusedB.UnixMilli()

	waitAt := map[string]int64{}
	for _, run := range []string{"A", "B", "C", "D"} {
		r, _ := s.Run(run)
		waitAt[run] = r.Usage.SlotWaitAt
	}
	require.Equal(t, map[string]int64{"A": 0, "B": now, "C": 0, "D": 0}, waitAt,
		"B waits; A holds its share, C could not use a slot, D has ended")
	for _, tc := range []slotWaitCase{
		{"B waits", "A", now, 2, 1},
		{"a run never waits on itself", "B", now, 2, 0},
		{"at the window's last moment", "A", now + wait, 2, 1},
		{"past the window", "A", now + wait + 1, 2, 0},
		{"holding the share asked for, B is owed nothing", "A", now, 1, 0},
	} {
		require.Equal(t, tc.want, s.SlotWaiters(tc.asker, tc.now, wait, tc.share), tc.name)
	}
	s.AssumePool(0, 2)
	require.Equal(t, 3, s.SlotWaiters("A", now, wait, 2), "the assumed waits count on top of B's")
	require.Equal(t, 2, s.SlotWaiters("B", now, wait, 2), "and beside none")
}
