package projections

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// Each task counts the events its worker appended to the run as their actor, and the bytes they added to what the
// run's bytes quota counts (a message's body and subject once, as the run does); no other actor's events, and a
// worker naming no task of the run counts for none. The counts survive a snapshot, and the fold from position 1
// equals the state started from a snapshot and folded over the tail.
func TestTasksCountWhatTheirWorkerAppended(t *testing.T) {
	a1, a2 := events.Actor{Role: events.RoleWorker, TaskID: "a1"}, events.Actor{Role: events.RoleWorker, TaskID: "a2"}
	var h history
	h.addBy(byAdmin, "R", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/r"})
	for _, id := range []string{"a1", "a2"} {
		h.addBy(byOrchestrator, "R", events.TypeTaskCreated, &events.TaskCreated{TaskID: id, Role: "executor",
			Agent: "executor", Title: "T", Cwd: "/r"})
	}
	msg := &events.MailboxAppended{ID: "m1", To: "", From: "a1", Kind: "message", Body: "hello", Subject: "hi"}
	first := h.addBy(a1, "R", events.TypeMailboxAppended, msg)
	again := h.addBy(a1, "R", events.TypeMailboxAppended, msg) // a duplicate: its body is not held twice
	created := h.addBy(a1, "R", events.TypeTaskCreated, &events.TaskCreated{TaskID: "a3", Role: "executor",
		Agent: "executor", Title: "T", Cwd: "/r"})
	h.addBy(byOrchestrator, "R", events.TypeMailboxAppended,
		&events.MailboxAppended{ID: "m2", To: "a1", From: "orchestrator", Kind: "message", Body: "go"})
	h.addBy(events.Actor{Role: events.RoleWorker, TaskID: "gone"}, "R", events.TypeMailboxAppended,
		&events.MailboxAppended{ID: "m3", To: "", From: "gone", Kind: "message", Body: "x"})
	k := len(h.evs)
	started := h.addBy(a2, "R", events.TypeTaskStarted, &events.TaskStarted{TaskID: "a2", Cwd: "/r"})

	s := fold(h.evs)
	wantA1 := events.TextBytes(first) + int64(len("hello")+len("hi")) + events.TextBytes(again) +
		events.TextBytes(created)
	for _, c := range []struct {
		task          string
		events, bytes int64
	}{
		{"a1", 3, wantA1},
		{"a2", 1, events.TextBytes(started)},
		{"a3", 0, 0},
		{"gone", 0, 0},
	} {
		evs, bytes := s.WorkerAppended("R", c.task)
		require.Equal(t, []int64{c.events, c.bytes}, []int64{evs, bytes}, c.task)
	}
	evs, bytes := s.WorkerAppended("nope", "a1")
	require.Equal(t, []int64{0, 0}, []int64{evs, bytes}, "a run the state does not hold")

	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	restored, err := DecodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, s, restored, "a snapshot keeps the counts")

	mid := fold(h.evs[:k])
	b, err = EncodeSnapshot(mid)
	require.NoError(t, err)
	fromSnapshot, err := DecodeSnapshot(b)
	require.NoError(t, err)
	for _, ev := range h.evs[k:] {
		Apply(fromSnapshot, ev)
	}
	require.Equal(t, s, fromSnapshot, "a snapshot folded over the tail equals the fold from position 1")
}
