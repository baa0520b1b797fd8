package projections

import (
	"fmt"
	"math/rand/v2"

	"github.com/crewlog/crewlog/events"
)

// randomEvent draws an event of any type over small id pools, so that most
// events hit existing records and some refer to missing ones.
func randomEvent(rng *rand.Rand) (stream, typ string, p any) {
	types := events.Types()
	typ = types[rng.IntN(len(types))]
	run := fmt.Sprintf("run%d", rng.IntN(3))
	task := fmt.Sprintf("t%d", rng.IntN(4))
	// subIds are unique daemon-wide (UUIDs), hence the run prefix.
	sub := fmt.Sprintf("gc-%s-%d", run, rng.IntN(5))
	if rng.IntN(4) == 0 {
		task = sub // shadows are tasks too
	}
	msg := fmt.Sprintf("m%d", rng.IntN(6))
	q := fmt.Sprintf("q%d", rng.IntN(3))
	n := func() int64 { return rng.Int64N(1000) }
	opts := func() []string {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		return []string{"a", "b"}
	}
	switch typ {
	case events.TypeRunCreated:
		p = &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w", BudgetTotal: new(n()),
			BudgetUnlimited: rng.IntN(4) == 0, BudgetWarning: new(0.8)}
	case events.TypeTaskCreated:
		p = &events.TaskCreated{TaskID: task, Role: "executor", Agent: "a", Title: "T", Cwd: "/w", DependsOn: opts(),
			StepID: "s", Depth: rng.IntN(3)}
	case events.TypeTaskStarted:
		p = &events.TaskStarted{TaskID: task, Cwd: []string{"", "/w", "/w2"}[rng.IntN(3)]}
	case events.TypeTaskWaiting:
		p = &events.TaskWaiting{TaskID: task, QuestionID: q, AskedAt: n(), Deadline: n(), Options: opts()}
	case events.TypeTaskUsage:
		p = &events.TaskUsage{TaskID: task, Input: n(), Output: n(), CacheRead: n(), CacheWrite: n(), Cost: 0.25}
	case events.TypeDelegateAdmitted:
		if last := sub[len(sub)-1]; task == sub && last != '0' {
			// NB: a delegation started by another delegation's worker (a grandchild's), derived, not drawn: those
			// of sub 0 keep delegations that are their own parent, as a damaged log may hold.
			task = sub[:len(sub)-1] + string(last-1)
		}
		p = &events.DelegateAdmitted{TaskID: task, SubID: sub, ChildDepth: rng.IntN(4), Role: "explorer",
			Unmetered: rng.IntN(2) == 0, ReservedTokens: n(), Model: "m", TimeoutSec: 900, Deadline: n(), Cwd: "/w",
			Title: "delegate: x", Prompt: "p"}
	case events.TypeDelegateSpawned:
		p = &events.DelegateSpawned{TaskID: task, SubID: sub, PID: rng.IntN(100)}
	case events.TypeBudgetReserved:
		p = &events.BudgetReserved{TaskID: task, SubID: sub, Tokens: n(), GrantedTokens: n()}
	case events.TypeBudgetCharged:
		p = &events.BudgetCharged{TaskID: task, SubID: sub, Tokens: n(), UsageTokens: n(), ReservedTokens: n()}
	case events.TypeMailboxAppended:
		to := []string{task, events.RunInbox}[rng.IntN(2)]
		var data *events.MessageData
		if rng.IntN(2) == 0 {
			data = &events.MessageData{SubID: sub, OK: true}
		}
		from := "x"
		if data != nil {
			from = "delegate:" + sub // a delegation's result, counted for its delegating worker's share
		}
		p = &events.MailboxAppended{ID: msg, To: to, From: from, Kind: events.KindMessage, Body: "b", Data: data}
	case events.TypeAskRequested:
		p = &events.AskRequested{TaskID: task, QuestionID: q, Question: "?", AskedAt: n(), Deadline: n(),
			Options: opts()}
	case events.TypeAskTimedOut:
		p = &events.AskTimedOut{TaskID: task, QuestionID: q,
			Reason: []string{"", events.AskReasonAskerEnded, events.AskReasonRunEnded}[rng.IntN(3)]}
	case events.TypeCredentialIssued:
		p = &events.CredentialIssued{TaskID: []string{task, events.OrchestratorKey}[rng.IntN(2)], Role: "worker",
			Digest: fmt.Sprint(n())}
	case events.TypeCredentialRevoked:
		p = &events.CredentialRevoked{TaskID: []string{task, events.OrchestratorKey}[rng.IntN(2)],
			Reason: []string{"", "rotated"}[rng.IntN(2)]}
	case events.TypeEngineConfigured:
		slots := 1 + rng.IntN(4)
		// NB: the knobs of a worker's shares follow the slots' draw, not draws of their own: another draw would
		// change every kept seed's history.
		p = &events.EngineConfigured{NestingEnabled: true, MaxDepth: 4, MaxSlots: slots, ModelCatalog: opts(),
			SlotShare: 1, SlotWaitSec: 60, ShareByDelegator: slots%2 == 0, WorkerSlotShare: slots > 1}
	default:
		// The remaining payloads are keyed by the same few fields; fill
		// them by name through a zero payload.
		p = events.NewPayload(typ)
		setIDs(p, task, sub, msg, q)
	}
	if typ == events.TypeEngineConfigured {
		run = events.EngineStream
	}
	return run, typ, p
}

// setIDs fills the id fields of the payloads randomEvent does not build
// field by field.
func setIDs(p any, task, sub, msg, q string) {
	switch v := p.(type) {
	case *events.TaskCompleted:
		v.TaskID = task
	case *events.TaskFailed:
		v.TaskID, v.Error = task, "e"
	case *events.TaskNeedsAttention:
		v.TaskID = task
	case *events.TaskCancelled:
		v.TaskID = task
	case *events.TaskSkipped:
		v.TaskID = task
	case *events.TaskRetried:
		v.TaskID = task
	case *events.TaskResumed:
		v.TaskID, v.QuestionID = task, q
	case *events.DelegateRequested:
		v.TaskID, v.SubID = task, sub
	case *events.DelegateRejected:
		// NB: the reason follows the sub's id, not a draw: slot refusals make tasks wait for a slot.
		v.TaskID, v.SubID = task, sub
		v.Reason = []string{events.ReasonDepthExceeded, events.ReasonSlotsExhausted,
			events.ReasonSlotShareExceeded}[int(sub[len(sub)-1])%3]
	case *events.DelegateCompleted:
		v.TaskID, v.SubID, v.OK = task, sub, true
	case *events.DelegateFailed:
		v.TaskID, v.SubID = task, sub
	case *events.DelegateTimedOut:
		v.TaskID, v.SubID = task, sub
	case *events.DelegateCancelled:
		v.TaskID, v.SubID = task, sub
	case *events.DelegateCancelRequested:
		v.TaskID, v.SubID = task, sub
	case *events.MailboxDelivered:
		v.MessageID = msg
	case *events.MailboxAcknowledged:
		v.MessageID = msg
	case *events.SteerPushed:
		v.TaskID, v.MessageID = task, msg
	case *events.AskAnswered:
		v.TaskID, v.QuestionID = task, q
	}
}

// randomHistory returns n random events; run.created is drawn more often so
// that runs exist early. Credential events name an actor of every kind
// (none included), as the fold keeps who issued and revoked; every other
// event names one in turn, workers of tasks that exist and of one that
// never does (t9) among them, as the fold counts what each worker appended.
func randomHistory(rng *rand.Rand, n int) []events.Event {
	var h history
	actors := []events.Actor{{}, byAdmin, byOrchestrator, {Role: events.RoleWorker, TaskID: "t1"},
		{Role: events.RoleEngine}}
	others := append(actors, events.Actor{Role: events.RoleWorker, TaskID: "t2"},
		events.Actor{Role: events.RoleWorker, TaskID: "t9"},
		events.Actor{Role: events.RoleWorker, TaskID: "gc-run0-1"}) // a delegation's worker
	for range n {
		stream, typ, p := randomEvent(rng)
		if rng.IntN(20) == 0 {
			stream, typ, p = fmt.Sprintf("run%d", rng.IntN(3)), events.TypeRunCreated, &events.RunCreated{Team: "t"}
		}
		// NB: in turn, not drawn: a draw would change every seed's history after it.
		by := others[len(h.evs)%len(others)]
		if typ == events.TypeCredentialIssued || typ == events.TypeCredentialRevoked {
			by = actors[rng.IntN(len(actors))]
		}
		h.addBy(by, stream, typ, p)
	}
	return h.evs
}

// realisticHistory is the event mix of real runs: per run a few tasks that
// start, report usage and complete, metered delegations that are admitted,
// spawned and settled with their result delivered and acknowledged,
// credentials, messages. It returns at least n events.
func realisticHistory(n int) []events.Event { return realisticRuns(n, false) }

// longRunHistory is realisticHistory's mix in one run that goes on for at
// least n events (each hundred events append eight messages).
func longRunHistory(n int) []events.Event { return realisticRuns(n, true) }

// realisticRuns is realisticHistory, or with oneRun the same rounds of
// tasks all in one run.
func realisticRuns(n int, oneRun bool) []events.Event {
	var h history
	h.evs = make([]events.Event, 0, n+64)
	h.add(events.EngineStream, events.TypeEngineConfigured,
		&events.EngineConfigured{NestingEnabled: true, MaxDepth: 4,
			MaxSlots: 64, UnmeteredDelegates: events.UnmeteredAllow, SettleGraceSec: 30})
	run := ""
	for r := 0; len(h.evs) < n; r++ {
		if r == 0 || !oneRun {
			run = fmt.Sprintf("team_20261001000000_%016x", r)
			h.add(run, events.TypeRunCreated, &events.RunCreated{Team: "default", Workflow: "default", Goal: "g",
				Cwd: "/w", BudgetTotal: new(int64(1_000_000))})
			h.addBy(byAdmin, run, events.TypeCredentialIssued,
				&events.CredentialIssued{TaskID: events.OrchestratorKey, Role: events.RoleOrchestrator, Digest: "d"})
			h.add(run, events.TypeRunRunning, &events.RunRunning{})
		}
		for i := range 4 {
			task := fmt.Sprintf("%02d_step", i)
			if oneRun {
				task = fmt.Sprintf("%04d_%02d_step", r, i)
			}
			h.add(run, events.TypeTaskCreated, &events.TaskCreated{TaskID: task, Role: "executor", Agent: "executor",
				Title: "step", Cwd: "/w", StepID: "step"})
			h.addBy(byOrchestrator, run, events.TypeCredentialIssued,
				&events.CredentialIssued{TaskID: task, Role: events.RoleWorker, Digest: "d"})
			h.add(run, events.TypeTaskStarted, &events.TaskStarted{TaskID: task})
			for j := range 2 {
				sub := fmt.Sprintf("gc-%d-%d-%d", r, i, j)
				h.add(run, events.TypeDelegateRequested,
					&events.DelegateRequested{TaskID: task, SubID: sub, Role: "explorer"})
				h.add(run, events.TypeDelegateAdmitted,
					&events.DelegateAdmitted{TaskID: task, SubID: sub, ChildDepth: 2, Role: "explorer",
						ReservedTokens: 1000, Model: "m", TimeoutSec: 900, Deadline: 1, Cwd: "/w",
						Title: "delegate: x", Prompt: "find"})
				h.add(run, events.TypeBudgetReserved,
					&events.BudgetReserved{TaskID: task, SubID: sub, Tokens: 1000, GrantedTokens: 1_000_000})
				h.add(run, events.TypeDelegateSpawned, &events.DelegateSpawned{TaskID: task, SubID: sub, PID: 100})
				msg := "msg_" + sub
				h.add(run, events.TypeMailboxAppended,
					&events.MailboxAppended{ID: msg, To: task, From: "delegate:" + sub, Kind: events.KindResponse,
						Priority: events.PriorityNormal, DeliveryMode: events.DeliveryNextTurn,
						Body: "--- delegate ---\nresult\n--- end delegate ---"})
				h.add(run, events.TypeBudgetCharged,
					&events.BudgetCharged{TaskID: task, SubID: sub, Tokens: 200, UsageTokens: 1200,
						ReservedTokens: 1000})
				h.add(run, events.TypeDelegateCompleted,
					&events.DelegateCompleted{TaskID: task, SubID: sub, OK: true, UsageTokens: 1200, MessageID: msg})
				h.add(run, events.TypeMailboxDelivered, &events.MailboxDelivered{MessageID: msg, Recipient: task})
				h.add(run, events.TypeMailboxAcknowledged,
					&events.MailboxAcknowledged{MessageID: msg, Recipient: task})
			}
			for k := range 3 {
				h.add(run, events.TypeTaskUsage,
					&events.TaskUsage{TaskID: task, Input: int64(k) * 100, Output: int64(k) * 50})
			}
			h.add(run, events.TypeTaskCompleted, &events.TaskCompleted{TaskID: task})
		}
		if !oneRun {
			h.add(run, events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
		}
	}
	if oneRun {
		h.add(run, events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
	}
	return h.evs
}
