package projections

import (
	"testing"

	"github.com/crewlog/crewlog/events"
	"github.com/stretchr/testify/require"
)

// A realistic run: created → tasks → delegate admitted + reserved → spawned →
// settled with a charge → mailbox delivered → acknowledged.
func TestScenarioMeteredDelegation(t *testing.T) {
	var h history
	h.add(events.EngineStream, events.TypeEngineConfigured,
		&events.EngineConfigured{NestingEnabled: true, MaxDepth: 4,
			MaxSlots: 2, UnmeteredDelegates: events.UnmeteredAllow, ModelCatalog: []string{"anthropic/m1",
				"openai/m2"},
			SettleGraceSec: 30})
	fixture(&h, 100_000, false)
	h.add(runR, events.TypeCredentialIssued, &events.CredentialIssued{TaskID: taskP, Role: events.RoleWorker,
		Digest: "d-p"})
	admitBatch(&h, "gc-1", 20_000, true, 100_000)
	admittedPos := len(h.evs) - 1

	s := fold(h.evs)
	sh, ok := s.Task(runR, "gc-1")
	require.True(t, ok)
	require.Equal(t, Task{RunID: runR, TaskID: "gc-1", Kind: events.TaskKindShadow, Role: "explorer",
		Agent: "delegate", Title: "delegate: search", Status: TaskQueued, Cwd: "/w", DependsOn: []string{}, Depth: 2,
		Model: "anthropic/m1", CreatedAt: at(admittedPos), StartedAt: at(admittedPos)}, sh)
	require.True(t, sh.Shadow())
	parent, _ := s.Task(runR, taskP)
	require.Equal(t, &Allocation{TokensGranted: 100_000, TokensSpent: 20_000}, parent.Allocation, "GS-04")
	require.Equal(t, Slots{Held: 1, Capacity: 2, SubIDs: []string{"gc-1"}}, s.Slots())
	d, _ := s.Delegation(runR, "gc-1")
	require.Equal(t, DelegationQueued, d.Status)
	require.True(t, d.Metered)
	require.Equal(t, int64(20_000), d.Reserved)
	require.Equal(t, uint64(admittedPos), d.AdmittedPosition)
	require.Equal(t, at(admittedPos)+900_000, d.Deadline)

	h.add(runR, events.TypeDelegateSpawned, &events.DelegateSpawned{TaskID: taskP, SubID: "gc-1", PID: 4242})
	settleBatch(&h, "gc-1", events.TypeDelegateCompleted, 20_000, 25_000)
	s = fold(h.evs)
	d, _ = s.Delegation(runR, "gc-1")
	require.Equal(t, DelegationCompleted, d.Status)
	require.Equal(t, 4242, d.PID)
	require.Equal(t, int64(25_000), d.UsageTokens)
	require.Equal(t, Slots{Capacity: 2, SubIDs: []string{}}, s.Slots(), "the slot frees at settlement")
	sh, _ = s.Task(runR, "gc-1")
	require.Equal(t, TaskCompleted, sh.Status)
	a, _ := s.Account(runR, taskP)
	require.Equal(t, int64(25_000), a.TokensSpent, "reservation 20000 + excess 5000, no refund")
	require.Equal(t, int64(100_000), a.TokensGranted)
	require.Equal(t, []Charge{{SubID: "gc-1", Tokens: 5000, UsageTokens: 25_000, ReservedTokens: 20_000,
		At: at(len(h.evs) - 1)}}, a.Charges)

	page, err := s.Mailbox(runR, taskP, MailboxFilter{Pending: true})
	require.NoError(t, err)
	require.Len(t, page.Messages, 1)
	msg := page.Messages[0]
	require.Equal(t, MessageQueued, msg.Status)
	require.Equal(t, "delegate:gc-1", msg.From)
	require.Equal(t, &events.MessageData{SubID: "gc-1", OK: true}, msg.Data)

	h.add(runR, events.TypeMailboxDelivered, &events.MailboxDelivered{MessageID: msg.ID, Recipient: taskP})
	h.add(runR, events.TypeMailboxAcknowledged, &events.MailboxAcknowledged{MessageID: msg.ID, Recipient: taskP})
	s = fold(h.evs)
	m, _ := s.Message(runR, msg.ID)
	require.Equal(t, MessageAcknowledged, m.Status)
	require.Equal(t, at(len(h.evs)-1), m.DeliveredAt)
	require.Equal(t, at(len(h.evs)), m.AcknowledgedAt)
	page, _ = s.Mailbox(runR, taskP, MailboxFilter{Pending: true})
	require.Empty(t, page.Messages, "msg.inbox lists unacknowledged messages only")
	require.Equal(t, uint64(len(h.evs)), s.Position)
	checkInvariants(t, s)
}

// GS-03: unmetered happy path leaves no allocation.
func TestScenarioUnmetered(t *testing.T) {
	var h history
	fixture(&h, 0, false)
	admitBatch(&h, "gc-1", 0, false, 0)
	s := fold(h.evs)
	p, _ := s.Task(runR, taskP)
	require.Nil(t, p.Allocation)
	d, _ := s.Delegation(runR, "gc-1")
	require.False(t, d.Metered)
	require.Empty(t, s.Ledger(runR))
}

// GS-06: the grant is write-once and spend is monotonic.
func TestScenarioWriteOnceGrant(t *testing.T) {
	var h history
	fixture(&h, 100_000, false)
	admitBatch(&h, "gc-1", 20_000, true, 100_000)
	settleBatch(&h, "gc-1", events.TypeDelegateCompleted, 20_000, 5_000)
	admitBatch(&h, "gc-2", 80_000, true, 999) // a later grant value is ignored
	s := fold(h.evs)
	a, _ := s.Account(runR, taskP)
	require.Equal(t, int64(100_000), a.TokensGranted)
	require.Equal(t, int64(100_000), a.TokensSpent)
	require.Zero(t, a.Remaining())
	require.Empty(t, a.Charges, "usage below the reservation charges nothing")
}

// GS-09 and GS-20(d): slots are derived from the log, so a rebuilt state
// (or one from a snapshot) holds exactly the in-flight delegations.
func TestScenarioSlotsSurviveRestart(t *testing.T) {
	var h history
	fixture(&h, 0, false)
	admitBatch(&h, "gc-1", 0, false, 0)
	admitBatch(&h, "gc-2", 0, false, 0)
	h.add(runR, events.TypeDelegateSpawned, &events.DelegateSpawned{TaskID: taskP, SubID: "gc-2", PID: 7})
	s := fold(h.evs)
	require.Equal(t, 2, s.SlotsHeld())

	settleBatch(&h, "gc-1", events.TypeDelegateTimedOut, 0, 0)
	// A late spawn report and a second terminal event change nothing.
	h.add(runR, events.TypeDelegateSpawned, &events.DelegateSpawned{TaskID: taskP, SubID: "gc-1", PID: 8})
	h.add(runR, events.TypeDelegateCompleted, &events.DelegateCompleted{TaskID: taskP, SubID: "gc-1", OK: true})
	s = fold(h.evs)
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	restarted, err := DecodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, s, restarted)
	require.Equal(t, Slots{Held: 1, Capacity: 2, SubIDs: []string{"gc-2"}}, restarted.Slots())
	d, _ := restarted.Delegation(runR, "gc-1")
	require.Equal(t, DelegationTimedOut, d.Status, "GS-13: timed_out, first terminal wins")
	require.Zero(t, d.PID)
	sh, _ := restarted.Task(runR, "gc-1")
	require.Equal(t, TaskFailed, sh.Status, "the task machine has no timed_out")
	inflight := restarted.InFlight()
	require.Len(t, inflight, 1)
	require.Equal(t, "gc-2", inflight[0].SubID)
	require.Equal(t, DelegationRunning, inflight[0].Status)
}

// GS-14: run cancellation records cancel intents; the runtime settles.
func TestScenarioCancelWithRun(t *testing.T) {
	var h history
	fixture(&h, 0, false)
	admitBatch(&h, "gc-1", 0, false, 0)
	h.add(runR, events.TypeRunCancelled, &events.RunCancelled{Reason: "user"})
	h.add(runR, events.TypeDelegateCancelRequested,
		&events.DelegateCancelRequested{TaskID: taskP, SubID: "gc-1", Reason: "run cancelled"})
	s := fold(h.evs)
	d, _ := s.Delegation(runR, "gc-1")
	require.True(t, d.CancelRequested)
	require.Equal(t, DelegationQueued, d.Status)
	run, _ := s.Run(runR)
	require.Equal(t, RunCancelled, run.Status)
	require.True(t, run.Status.Stale())

	settleBatch(&h, "gc-1", events.TypeDelegateCancelled, 0, 0)
	s = fold(h.evs)
	d, _ = s.Delegation(runR, "gc-1")
	require.Equal(t, DelegationCancelled, d.Status)
	require.Zero(t, s.SlotsHeld())
	sh, _ := s.Task(runR, "gc-1")
	require.Equal(t, TaskCancelled, sh.Status)
}

// GS-17: ask park and resolve.
func TestScenarioAsk(t *testing.T) {
	var h history
	fixture(&h, 0, false)
	asked := at(len(h.evs) + 1)
	h.add(runR, events.TypeTaskWaiting, &events.TaskWaiting{TaskID: taskP, QuestionID: "q1", AskedAt: asked,
		Deadline: asked + 3_600_000, Options: []string{"a", "b"}})
	h.add(runR, events.TypeAskRequested, &events.AskRequested{TaskID: taskP, QuestionID: "q1", Question: "Which API?",
		AskedAt: asked, Deadline: asked + 3_600_000, TimeoutSec: 3600, Clamped: true, Options: []string{"a", "b"}})
	s := fold(h.evs)
	p, _ := s.Task(runR, taskP)
	require.Equal(t, TaskWaiting, p.Status)
	require.Equal(t, &Waiting{QuestionID: "q1", AskedAt: asked, Deadline: asked + 3_600_000,
		Options: []string{"a", "b"}}, p.Waiting)
	run, _ := s.Run(runR)
	require.Equal(t, RunRunning, run.Status, "a park does not change the run status")
	require.Equal(t, &WaitState{TaskID: taskP, QuestionID: "q1", AskedAt: asked}, run.WaitState)

	// An answer to another question leaves the park alone.
	h.add(runR, events.TypeAskAnswered, &events.AskAnswered{TaskID: taskP, QuestionID: "other"})
	s = fold(h.evs)
	run, _ = s.Run(runR)
	require.NotNil(t, run.WaitState)

	h.add(runR, events.TypeAskAnswered, &events.AskAnswered{TaskID: taskP, QuestionID: "q1"})
	h.add(runR, events.TypeTaskResumed, &events.TaskResumed{TaskID: taskP, QuestionID: "q1"})
	s = fold(h.evs)
	p, _ = s.Task(runR, taskP)
	require.Equal(t, TaskRunning, p.Status)
	require.Nil(t, p.Waiting)
	run, _ = s.Run(runR)
	require.Nil(t, run.WaitState)
	ask, _ := s.Ask(runR, "q1")
	require.Equal(t, AskAnswered, ask.Status)
	checkInvariants(t, s)
}
