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

// A delegation's shadow task holds no share of its own under shareByDelegator: its worker's appends count for the
// workflow task whose delegation started it, through every delegation between, and a damaged log whose delegation
// is its own parent (no decision writes one) ends the walk up rather than looping, counting for the shadow task
// itself. A log without the knob (every log written before it) counts each worker for its own task, as it was
// decided.
func TestShadowTasksCountForTheirWorkflowTask(t *testing.T) {
	for _, c := range []struct {
		name                 string
		configure            bool
		gc1Holder, gc2Holder string
		a1, gc1, gc2, loop   int64
		sentForGC1Share      int
		sentForA1Share       int
	}{
		{name: "shareByDelegator", configure: true, gc1Holder: "a1", gc2Holder: "a1", a1: 3, gc1: 3, gc2: 3, loop: 1,
			sentForGC1Share: 1, sentForA1Share: 1},
		{name: "a log without the knob", gc1Holder: "gc-1", gc2Holder: "gc-2", a1: 1, gc1: 1, gc2: 1, loop: 1,
			sentForGC1Share: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := fold(shadowTaskHistory(c.configure))
			for _, h := range []struct{ task, holder string }{
				{"a1", "a1"}, {"gc-1", c.gc1Holder}, {"gc-2", c.gc2Holder}, {"loop", "loop"}, {"nobody", "nobody"},
			} {
				require.Equal(t, h.holder, s.ShareHolder("R", h.task), h.task)
			}
			for task, want := range map[string]int64{"a1": c.a1, "gc-1": c.gc1, "gc-2": c.gc2, "loop": c.loop} {
				evs, _ := s.WorkerAppended("R", task)
				require.Equal(t, want, evs, task)
			}
			all, sent := s.MessagesSince("R", "gc-1", 0, 100)
			require.Equal(t, []int{2, c.sentForGC1Share}, []int{all, sent}, "the messages counted for gc-1's share")
			all, sent = s.MessagesSince("R", "a1", 0, 100)
			require.Equal(t, []int{2, c.sentForA1Share}, []int{all, sent}, "the messages counted for a1's share")
		})
	}
}

// shadowTaskHistory is a run with workflow task a1, its delegation gc-1, gc-1's delegation gc-2, a damaged
// delegation loop that is its own parent, and a message from gc-2 and one from loop; configure puts a config with
// shareByDelegator in force first.
func shadowTaskHistory(configure bool) []events.Event {
	var h history
	if configure {
		cfg := DefaultConfig()
		cfg.ShareByDelegator = true
		h.addBy(byAdmin, events.EngineStream, events.TypeEngineConfigured, cfg.Event())
	}
	h.addBy(byAdmin, "R", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/r"})
	h.addBy(byOrchestrator, "R", events.TypeTaskCreated, &events.TaskCreated{TaskID: "a1", Role: "executor",
		Agent: "executor", Title: "T", Cwd: "/r"})
	admit := func(by events.Actor, parent, sub string) {
		h.addBy(by, "R", events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: parent, SubID: sub,
			ChildDepth: 2, Role: "explorer", Cwd: "/r", Title: "delegate: " + sub, Prompt: "p"})
	}
	worker := func(task string) events.Actor { return events.Actor{Role: events.RoleWorker, TaskID: task} }
	admit(worker("a1"), "a1", "gc-1")
	admit(worker("gc-1"), "gc-1", "gc-2")
	admit(byOrchestrator, "loop", "loop") // damaged: the delegation's parent is its own shadow task
	msg := func(id, from string) {
		h.addBy(worker(from), "R", events.TypeMailboxAppended,
			&events.MailboxAppended{ID: id, To: "", From: from, Kind: "message", Body: "x"})
	}
	msg("m1", "gc-2")
	msg("m2", "loop")
	return h.evs
}
