package projections

import (
	"testing"

	"github.com/crewlog/crewlog/events"
	"github.com/stretchr/testify/require"
)

const (
	runR  = "team_20261001000000_0123456789abcdef"
	taskP = "02_exec"
	t0    = int64(1_790_000_000_000) // unix ms of the first event
)

// history builds a log: positions from 1, one second apart, per-stream versions.
type history struct {
	evs      []events.Event
	versions map[string]uint64
}

func (h *history) add(stream, typ string, p any) events.Event {
	if h.versions == nil {
		h.versions = map[string]uint64{}
	}
	h.versions[stream]++
	pos := uint64(len(h.evs) + 1)
	ev := events.Event{
		Position: pos, Stream: stream, StreamVersion: h.versions[stream], Type: typ,
		SchemaVersion: events.SchemaVersion(typ), Time: (t0 + int64(pos)*1000) * 1e6, Payload: p,
	}
	h.evs = append(h.evs, ev)
	return ev
}

// addBy is add with the event's actor.
func (h *history) addBy(actor events.Actor, stream, typ string, p any) events.Event {
	h.add(stream, typ, p)
	h.evs[len(h.evs)-1].Actor = actor
	return h.evs[len(h.evs)-1]
}

// Actors of the events the tests write, as commands record them.
var (
	byAdmin        = events.Actor{Role: events.RoleAdmin}
	byOrchestrator = events.Actor{Role: events.RoleOrchestrator}
)

// at is the unix ms time of the event at position pos.
func at(pos int) int64 { return t0 + int64(pos)*1000 }

func fold(evs []events.Event) *State {
	s := New()
	for _, ev := range evs {
		Apply(s, ev)
	}
	return s
}

// fixture is D§12's common fixture: run R running in /w, parent task P
// (executor, running, depth absent, model anthropic/m1).
func fixture(h *history, budgetTotal int64, unlimited bool) {
	h.add(runR, events.TypeRunCreated, &events.RunCreated{Team: "default", Workflow: "default",
		Goal: "ship", Cwd: "/w", BudgetTotal: optBudget(budgetTotal), BudgetUnlimited: unlimited})
	h.add(runR, events.TypeRunRunning, &events.RunRunning{})
	h.add(runR, events.TypeTaskCreated, &events.TaskCreated{TaskID: taskP, Role: "executor", Agent: "executor",
		Title: "exec", Cwd: "/w", DependsOn: []string{"01_explore"}, StepID: "exec", Model: "anthropic/m1"})
	h.add(runR, events.TypeTaskStarted, &events.TaskStarted{TaskID: taskP})
}

// admit appends a delegation's admission batch as commands would.
func admitBatch(h *history, sub string, reserve int64, metered bool, grant int64) {
	h.add(runR, events.TypeDelegateRequested, &events.DelegateRequested{TaskID: taskP, SubID: sub, Role: "explorer"})
	p := &events.DelegateAdmitted{TaskID: taskP, SubID: sub, ChildDepth: 2, Role: "explorer", Unmetered: !metered,
		Model: "anthropic/m1", TimeoutSec: 900, Deadline: at(len(h.evs)+1) + 900_000, Cwd: "/w",
		Title: "delegate: search", Prompt: "find X"}
	if metered && reserve > 0 {
		p.ReservedTokens = reserve
	}
	h.add(runR, events.TypeDelegateAdmitted, p)
	if metered {
		h.add(runR, events.TypeBudgetReserved, &events.BudgetReserved{TaskID: taskP, SubID: sub, Tokens: reserve,
			GrantedTokens: grant})
	}
}

// settleBatch appends a settlement batch: result delivery, charge when due,
// terminal event.
func settleBatch(h *history, sub, typ string, reserved, usage int64) {
	msgID := "msg_" + sub
	h.add(runR, events.TypeMailboxAppended, &events.MailboxAppended{ID: msgID, To: taskP, From: "delegate:" + sub,
		Kind: events.KindResponse, Priority: events.PriorityNormal, DeliveryMode: events.DeliveryNextTurn,
		Body: "--- delegate " + sub + " (ok) ---\nfound\n--- end delegate " + sub + " ---",
		Data: &events.MessageData{SubID: sub, OK: typ == events.TypeDelegateCompleted}})
	if usage > reserved && reserved > 0 {
		h.add(runR, events.TypeBudgetCharged, &events.BudgetCharged{TaskID: taskP, SubID: sub,
			Tokens: usage - reserved, UsageTokens: usage, ReservedTokens: reserved})
	}
	h.add(runR, typ, settledPayload(typ, events.DelegateSettled{TaskID: taskP, SubID: sub,
		OK: typ == events.TypeDelegateCompleted, UsageTokens: usage, MessageID: msgID}))
}

func settledPayload(typ string, p events.DelegateSettled) any {
	switch typ {
	case events.TypeDelegateCompleted:
		v := events.DelegateCompleted(p)
		return &v
	case events.TypeDelegateFailed:
		v := events.DelegateFailed(p)
		return &v
	case events.TypeDelegateTimedOut:
		v := events.DelegateTimedOut(p)
		return &v
	}
	v := events.DelegateCancelled(p)
	return &v
}

// checkInvariants asserts the invariants of D§11.1 that the fold itself
// must keep, whatever the events.
func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	requireOrdered(t, s)
	inFlight := 0
	for _, runID := range runIDs(t, s) {
		r := s.run(runID)
		for _, d := range s.Delegations(runID) {
			// NB: by this run: a settled delegation's subId may hold a slot for another run since.
			holder, held := s.held[d.SubID]
			held = held && holder == runID
			require.Equal(t, !d.Status.Terminal(), held, "D4: a slot is held iff the delegation is in flight")
			if held {
				inFlight++
			}
		}
		for _, a := range s.Ledger(runID) {
			// NB: summed as the ledger folds a spend (events.AddSpend): a negative one, which no decision writes,
			// adds nothing.
			var res, chg int64
			for _, x := range a.Reservations {
				res = events.AddSpend(res, x.Tokens)
			}
			for _, x := range a.Charges {
				chg = events.AddSpend(chg, x.Tokens)
			}
			require.Equal(t, res, a.Reserved)
			require.Equal(t, chg, a.Charged)
			require.Equal(t, SaturatingAdd(a.Reserved, a.Charged), a.TokensSpent,
				"tokensSpent = Σ reservations + Σ charges")
		}
		var used int64
		var live []string
		workflow := 0
		run, _ := s.Run(runID)
		status, ok := s.RunStatus(runID)
		require.True(t, ok)
		require.Equal(t, run.Status, status, "RunStatus is the run's")
		for _, task := range s.Tasks(runID) {
			status, ok := s.TaskStatus(runID, task.TaskID)
			require.True(t, ok)
			require.Equal(t, task.Status, status, "TaskStatus is the task's")
			require.Equal(t, task.Status == TaskWaiting, task.Waiting != nil, "R4: waiting iff marker")
			used += task.Usage.Budgeted()
			if !task.Status.Terminal() {
				live = append(live, task.TaskID)
				if !task.Shadow() {
					workflow++
				}
			}
		}
		require.Equal(t, used, r.run.BudgetUsed)
		var walked []string
		s.EachLiveTask(runID, func(task Task) bool {
			walked = append(walked, task.TaskID)
			return true
		})
		require.Equal(t, live, walked, "EachLiveTask walks the tasks not ended, in creation order")
		require.Equal(t, workflow, s.LiveTasks(runID), "LiveTasks counts the workflow tasks not ended")
		var workflowIDs, walkedWorkflow []string
		for _, task := range s.Tasks(runID) {
			if !task.Shadow() {
				workflowIDs = append(workflowIDs, task.TaskID)
			}
		}
		s.EachWorkflowTask(runID, func(task Task) bool {
			walkedWorkflow = append(walkedWorkflow, task.TaskID)
			return true
		})
		require.Equal(t, workflowIDs, walkedWorkflow, "EachWorkflowTask walks the workflow tasks, in creation order")
		for to, box := range r.boxes {
			for _, i := range box {
				require.Equal(t, to, r.msgs.At(i).To)
			}
		}
		require.Len(t, r.msgIndex, r.msgs.Len())
	}
	require.Equal(t, inFlight, s.Slots().Held)
}

// optBudget is a fixture's budgetTotal: 0 stands for unset.
func optBudget(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

// runIDs returns the ids of every run s knows, hot and cold, in creation
// order.
func runIDs(t testing.TB, s *State) []string {
	t.Helper()
	var ids []string
	_, err := s.eachRun(0, false, true, func(_ int, run *Run) bool {
		ids = append(ids, run.RunID)
		return true
	})
	require.NoError(t, err)
	return ids
}

// firstColdRun returns the id of the first run s holds cold, in creation order (there must be one).
func firstColdRun(t testing.TB, s *State) string {
	t.Helper()
	for _, id := range runIDs(t, s) {
		if s.IsCold(id) {
			return id
		}
	}
	require.Fail(t, "no cold run")
	return ""
}
