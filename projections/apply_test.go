package projections

import (
	"testing"

	"github.com/crewlog/crewlog/events"
	"github.com/stretchr/testify/require"
)

type applyCase struct {
	name  string
	build func(h *history)
	check func(t *testing.T, s *State)
}

func runCases(t *testing.T, cases []applyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h history
			tc.build(&h)
			s := fold(h.evs)
			tc.check(t, s)
			checkInvariants(t, s)
		})
	}
}

func TestApplyRuns(t *testing.T) {
	runCases(t, []applyCase{
		{"created carries the manifest", func(h *history) {
			h.add("r1", events.TypeRunCreated, &events.RunCreated{Team: "t", Workflow: "w", Goal: "g", Cwd: "/c",
				BudgetTotal: new(int64(5000)), BudgetWarning: new(0.5), BudgetAbort: new(0.9)})
		}, func(t *testing.T, s *State) {
			r, ok := s.Run("r1")
			require.True(t, ok)
			require.Equal(t, Run{RunID: "r1", Team: "t", Workflow: "w", Goal: "g", Cwd: "/c", Status: RunQueued,
				BudgetTotal: new(int64(5000)), BudgetWarning: new(0.5), BudgetAbort: new(0.9), CreatedAt: at(1),
				UpdatedAt: at(1), Usage: RunUsage{Events: 1, TextBytes: int64(len("t" + "w" + "g" + "/c"))}}, r)
		}},
		{"status events and a second create", func(h *history) {
			h.add("r1", events.TypeRunCreated, &events.RunCreated{Team: "t"})
			h.add("r1", events.TypeRunPlanning, &events.RunPlanning{})
			h.add("r1", events.TypeRunRunning, &events.RunRunning{})
			h.add("r1", events.TypeRunCreated, &events.RunCreated{Team: "other"})
			h.add("r1", events.TypeRunBlocked, &events.RunBlocked{Summary: "Waiting for response"})
		}, func(t *testing.T, s *State) {
			r, _ := s.Run("r1")
			require.Equal(t, RunBlocked, r.Status)
			require.Equal(t, "t", r.Team, "the first run.created wins")
			require.Equal(t, "Waiting for response", r.Summary)
			require.Equal(t, at(5), r.UpdatedAt)
			require.False(t, r.Status.Stale())
		}},
		{"budget thresholds", func(h *history) {
			h.add("r1", events.TypeRunCreated, &events.RunCreated{BudgetTotal: new(int64(100))})
			h.add("r1", events.TypeRunBudgetWarning,
				&events.RunBudgetWarning{BudgetTotal: 100, BudgetUsed: 80, Threshold: "warning"})
			h.add("r1", events.TypeRunBudgetAbort,
				&events.RunBudgetAbort{BudgetTotal: 100, BudgetUsed: 95, Threshold: "abort"})
		}, func(t *testing.T, s *State) {
			r, _ := s.Run("r1")
			require.True(t, r.BudgetWarned)
			require.True(t, r.BudgetAborted)
		}},
		{"events of a missing run are ignored", func(h *history) {
			h.add("ghost", events.TypeRunRunning, &events.RunRunning{})
			h.add("ghost", events.TypeTaskCreated, &events.TaskCreated{TaskID: "t"})
			h.add("ghost", events.TypeDelegateAdmitted, &events.DelegateAdmitted{SubID: "gc"})
		}, func(t *testing.T, s *State) {
			_, ok := s.Run("ghost")
			require.False(t, ok)
			require.Nil(t, s.Tasks("ghost"))
			require.Zero(t, s.SlotsHeld())
			require.Equal(t, uint64(3), s.Position, "ignored events still advance the position")
		}},
	})
}

func TestRunsPaging(t *testing.T) {
	var h history
	ids := []string{"ra", "rb", "rc", "rd", "re"}
	for _, id := range ids {
		h.add(id, events.TypeRunCreated, &events.RunCreated{})
	}
	h.add("rb", events.TypeRunRunning, &events.RunRunning{})
	h.add("rd", events.TypeRunRunning, &events.RunRunning{})
	s := fold(h.evs)

	collect := func(f RunFilter) []string {
		var got []string
		for {
			page, err := s.Runs(f)
			require.NoError(t, err)
			for _, r := range page.Runs {
				got = append(got, r.RunID)
			}
			if page.NextCursor == "" {
				return got
			}
			f.Cursor = page.NextCursor
		}
	}
	require.Equal(t, ids, collect(RunFilter{Limit: 2}))
	require.Equal(t, []string{"re", "rd", "rc", "rb", "ra"}, collect(RunFilter{Limit: 2, Newest: true}))
	require.Equal(t, []string{"rb", "rd"}, collect(RunFilter{Limit: 1, Statuses: []RunStatus{RunRunning}}))
	require.Equal(t, []string{"re", "rc", "ra"},
		collect(RunFilter{Limit: 5, Newest: true, Statuses: []RunStatus{RunQueued}}))
	// A page that looked at MaxScan runs ends there, however few it holds; the pages together hold the same runs.
	page, err := s.Runs(RunFilter{Limit: 5, MaxScan: 2, Statuses: []RunStatus{RunRunning}})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
	require.Equal(t, "rb", page.Runs[0].RunID)
	require.Equal(t, RunPage{Runs: page.Runs, NextCursor: "2", Scanned: 2}, page)
	require.Equal(t, []string{"rb", "rd"}, collect(RunFilter{Limit: 5, MaxScan: 1,
		Statuses: []RunStatus{RunRunning}}))
	require.Equal(t, []string{"re", "rc", "ra"}, collect(RunFilter{Limit: 5, MaxScan: 2, Newest: true,
		Statuses: []RunStatus{RunQueued}}))

	// A cursor stays valid while runs are created.
	page, err = s.Runs(RunFilter{Limit: 2})
	require.NoError(t, err)
	Apply(s, events.Event{Stream: "rf", Type: events.TypeRunCreated, Payload: &events.RunCreated{}})
	page, err = s.Runs(RunFilter{Limit: 10, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Len(t, page.Runs, 4)
	require.Equal(t, "rc", page.Runs[0].RunID)

	for _, bad := range []string{"zzzzzzzzzzzzzzz", "-1", "!", "100"} {
		_, err := s.Runs(RunFilter{Cursor: bad})
		require.ErrorIs(t, err, ErrBadCursor, bad)
	}
}

func TestApplyTasks(t *testing.T) {
	created := func(h *history) {
		h.add(runR, events.TypeRunCreated, &events.RunCreated{})
		h.add(runR, events.TypeTaskCreated, &events.TaskCreated{TaskID: "t1", Role: "executor",
			Agent: "a", Title: "T", Cwd: "/w", StepID: "s1"})
	}
	task := func(t *testing.T, s *State) Task {
		tk, ok := s.Task(runR, "t1")
		require.True(t, ok)
		return tk
	}
	runCases(t, []applyCase{
		{"created is queued with depth absent", created, func(t *testing.T, s *State) {
			tk := task(t, s)
			require.Equal(t, TaskQueued, tk.Status)
			require.Equal(t, 1, tk.EffectiveDepth())
			require.False(t, tk.Shadow())
		}},
		{"started takes the execution cwd", func(h *history) {
			created(h)
			h.add(runR, events.TypeTaskStarted, &events.TaskStarted{TaskID: "t1", Cwd: "/w/wt2"})
		}, func(t *testing.T, s *State) {
			tk := task(t, s)
			require.Equal(t, TaskRunning, tk.Status)
			require.Equal(t, "/w/wt2", tk.Cwd)
			require.Equal(t, at(3), tk.StartedAt)
		}},
		{"failed then retried clears the attempt", func(h *history) {
			created(h)
			h.add(runR, events.TypeTaskStarted, &events.TaskStarted{TaskID: "t1"})
			h.add(runR, events.TypeTaskFailed, &events.TaskFailed{TaskID: "t1", Error: "boom",
				FailureCause: "enospc"})
			h.add(runR, events.TypeTaskRetried, &events.TaskRetried{TaskID: "t1", Reason: "retry"})
		}, func(t *testing.T, s *State) {
			tk := task(t, s)
			require.Equal(t, TaskQueued, tk.Status)
			require.Zero(t, tk.StartedAt)
			require.Zero(t, tk.FinishedAt)
			require.Empty(t, tk.Error)
			require.Equal(t, 1, tk.Retries)
		}},
		{"waiting task cancelled drops its marker", func(h *history) {
			created(h)
			h.add(runR, events.TypeTaskStarted, &events.TaskStarted{TaskID: "t1"})
			h.add(runR, events.TypeTaskWaiting, &events.TaskWaiting{TaskID: "t1", QuestionID: "q"})
			h.add(runR, events.TypeTaskCancelled, &events.TaskCancelled{TaskID: "t1", Reason: "user"})
		}, func(t *testing.T, s *State) {
			tk := task(t, s)
			require.Equal(t, TaskCancelled, tk.Status)
			require.Nil(t, tk.Waiting)
			require.Equal(t, "user", tk.StatusReason)
			require.True(t, tk.Status.Terminal())
		}},
		{"skipped and needs attention", func(h *history) {
			created(h)
			h.add(runR, events.TypeTaskSkipped, &events.TaskSkipped{TaskID: "t1"})
			h.add(runR, events.TypeTaskNeedsAttention, &events.TaskNeedsAttention{TaskID: "t1", Error: "look"})
		}, func(t *testing.T, s *State) {
			require.Equal(t, TaskNeedsAttention, task(t, s).Status)
		}},
		{"usage is cumulative and feeds the run's budget use", func(h *history) {
			created(h)
			h.add(runR, events.TypeTaskUsage, &events.TaskUsage{TaskID: "t1", Input: 10, Output: 5, CacheRead: 100,
				CacheWrite: 1})
			h.add(runR, events.TypeTaskUsage, &events.TaskUsage{TaskID: "t1", Input: 20, Output: 10, CacheRead: 200,
				CacheWrite: 2})
		}, func(t *testing.T, s *State) {
			require.Equal(t, Usage{Input: 20, Output: 10, CacheRead: 200, CacheWrite: 2}, task(t, s).Usage)
			r, _ := s.Run(runR)
			require.Equal(t, int64(32), r.BudgetUsed, "input+output+cacheWrite, not cacheRead")
		}},
		{"events of a missing task, a duplicate create, a wrong payload", func(h *history) {
			created(h)
			h.add(runR, events.TypeTaskStarted, &events.TaskStarted{TaskID: "nope"})
			h.add(runR, events.TypeTaskCreated, &events.TaskCreated{TaskID: "t1", Role: "other"})
			h.add(runR, events.TypeTaskStarted, &events.TaskCompleted{TaskID: "t1"})
			h.add(runR, events.TypeTaskCompleted, nil)
		}, func(t *testing.T, s *State) {
			require.Len(t, s.Tasks(runR), 1)
			require.Equal(t, "executor", task(t, s).Role)
			require.Equal(t, TaskQueued, task(t, s).Status)
		}},
		{"payload values are accepted like pointers", func(h *history) {
			created(h)
			h.add(runR, events.TypeTaskStarted, events.TaskStarted{TaskID: "t1"})
		}, func(t *testing.T, s *State) {
			require.Equal(t, TaskRunning, task(t, s).Status)
		}},
	})
}

func TestApplyDelegations(t *testing.T) {
	runCases(t, []applyCase{
		{"requested and rejected leave no trace", func(h *history) {
			fixture(h, 0, false)
			h.add(runR, events.TypeDelegateRejected,
				&events.DelegateRejected{TaskID: taskP, Reason: events.ReasonNestingDisabled})
			h.add(runR, events.TypeDelegateRequested,
				&events.DelegateRequested{TaskID: taskP, SubID: "gc-1", Role: "explorer"})
			h.add(runR, events.TypeDelegateRejected, &events.DelegateRejected{TaskID: taskP, SubID: "gc-1",
				Reason: events.ReasonSlotsExhausted, Policy: &events.Policy{Held: 2, Capacity: 2}})
		}, func(t *testing.T, s *State) {
			require.Empty(t, s.Delegations(runR))
			require.Len(t, s.Tasks(runR), 1)
			require.Zero(t, s.SlotsHeld())
		}},
		{"cancel requested after settlement is ignored", func(h *history) {
			fixture(h, 0, false)
			admitBatch(h, "gc-1", 0, false, 0)
			settleBatch(h, "gc-1", events.TypeDelegateFailed, 0, 0)
			h.add(runR, events.TypeDelegateCancelRequested,
				&events.DelegateCancelRequested{TaskID: taskP, SubID: "gc-1"})
		}, func(t *testing.T, s *State) {
			d, _ := s.Delegation(runR, "gc-1")
			require.Equal(t, DelegationFailed, d.Status)
			require.False(t, d.CancelRequested)
		}},
		{"expired timeout", func(h *history) {
			fixture(h, 0, false)
			admitBatch(h, "gc-1", 0, false, 0)
			h.add(runR, events.TypeDelegateTimedOut,
				&events.DelegateTimedOut{TaskID: taskP, SubID: "gc-1", Expired: true})
		}, func(t *testing.T, s *State) {
			d, _ := s.Delegation(runR, "gc-1")
			require.Equal(t, DelegationTimedOut, d.Status)
			require.True(t, d.Expired)
			require.Equal(t, at(7), d.SettledAt)
		}},
		{"a shadow can be a parent", func(h *history) {
			fixture(h, 0, false)
			admitBatch(h, "gc-A", 0, false, 0)
			h.add(runR, events.TypeDelegateAdmitted,
				&events.DelegateAdmitted{TaskID: "gc-A", SubID: "gc-B", ChildDepth: 3, Role: "analyst"})
		}, func(t *testing.T, s *State) {
			d, _ := s.Delegation(runR, "gc-B")
			require.Equal(t, "gc-A", d.ParentTaskID)
			tk, _ := s.Task(runR, "gc-B")
			require.Equal(t, 3, tk.Depth)
			require.Equal(t, []string{"gc-A", "gc-B"}, s.Slots().SubIDs)
		}},
		{"in flight is ordered by deadline", func(h *history) {
			fixture(h, 0, false)
			h.add(runR, events.TypeDelegateAdmitted,
				&events.DelegateAdmitted{TaskID: taskP, SubID: "gc-late", Deadline: 900})
			h.add(runR, events.TypeDelegateAdmitted,
				&events.DelegateAdmitted{TaskID: taskP, SubID: "gc-b", Deadline: 100})
			h.add(runR, events.TypeDelegateAdmitted,
				&events.DelegateAdmitted{TaskID: taskP, SubID: "gc-a", Deadline: 100})
		}, func(t *testing.T, s *State) {
			var subs []string
			for _, d := range s.InFlight() {
				subs = append(subs, d.SubID)
			}
			require.Equal(t, []string{"gc-a", "gc-b", "gc-late"}, subs)
			tk, _ := s.Task(runR, "gc-a")
			require.Equal(t, 2, tk.Depth, "pi-crew's fallback depth")
		}},
	})
}

func TestApplyLedger(t *testing.T) {
	runCases(t, []applyCase{
		{"zero reservation still seeds the allocation", func(h *history) {
			fixture(h, 50_000, false)
			admitBatch(h, "gc-1", 0, true, 50_000)
		}, func(t *testing.T, s *State) {
			p, _ := s.Task(runR, taskP)
			require.Equal(t, &Allocation{TokensGranted: 50_000}, p.Allocation)
			d, _ := s.Delegation(runR, "gc-1")
			require.True(t, d.Metered)
			require.Zero(t, d.Reserved)
		}},
		{"a charge without a reservation opens an empty grant", func(h *history) {
			fixture(h, 0, false)
			h.add(runR, events.TypeBudgetCharged, &events.BudgetCharged{TaskID: taskP, SubID: "gc-x", Tokens: 7})
		}, func(t *testing.T, s *State) {
			a, ok := s.Account(runR, taskP)
			require.True(t, ok)
			require.Equal(t, int64(7), a.TokensSpent)
			require.Zero(t, a.TokensGranted)
			require.Equal(t, int64(-7), a.Remaining())
		}},
	})
}

func TestApplyMailbox(t *testing.T) {
	appended := func(h *history, id, to string) {
		h.add(runR, events.TypeMailboxAppended, &events.MailboxAppended{ID: id, To: to, From: "orchestrator",
			Kind: events.KindMessage, Priority: events.PriorityNormal, DeliveryMode: events.DeliveryNextTurn,
			Body: "b-" + id})
	}
	runCases(t, []applyCase{
		{"status only moves forward; duplicates ignored", func(h *history) {
			fixture(h, 0, false)
			appended(h, "m1", taskP)
			h.add(runR, events.TypeMailboxAcknowledged,
				&events.MailboxAcknowledged{MessageID: "m1", Recipient: taskP})
			h.add(runR, events.TypeMailboxDelivered, &events.MailboxDelivered{MessageID: "m1", Recipient: taskP})
			appended(h, "m1", events.RunInbox)
			h.add(runR, events.TypeMailboxDelivered, &events.MailboxDelivered{MessageID: "nope"})
		}, func(t *testing.T, s *State) {
			m, _ := s.Message(runR, "m1")
			require.Equal(t, MessageAcknowledged, m.Status)
			require.Zero(t, m.DeliveredAt)
			require.Equal(t, taskP, m.To)
			page, _ := s.Mailbox(runR, events.RunInbox, MailboxFilter{})
			require.Empty(t, page.Messages)
		}},
		{"rerouted result and steer land where they are addressed", func(h *history) {
			fixture(h, 0, false)
			h.add(runR, events.TypeMailboxAppended,
				&events.MailboxAppended{ID: "r1", To: events.RunInbox, From: "delegate:gc-1",
					Kind: events.KindResponse, Rerouted: true})
			h.add(runR, events.TypeMailboxAppended,
				&events.MailboxAppended{ID: "steer_1", To: taskP, From: "orchestrator",
					Kind: events.KindSteer, Priority: events.PriorityUrgent, DeliveryMode: events.DeliveryInterrupt,
					Body: "stop"})
			h.add(runR, events.TypeSteerPushed, &events.SteerPushed{TaskID: taskP, MessageID: "steer_1"})
		}, func(t *testing.T, s *State) {
			inbox, _ := s.Mailbox(runR, events.RunInbox, MailboxFilter{})
			require.Len(t, inbox.Messages, 1)
			require.True(t, inbox.Messages[0].Rerouted)
			box, _ := s.Mailbox(runR, taskP, MailboxFilter{})
			require.Len(t, box.Messages, 1)
			require.Equal(t, events.KindSteer, box.Messages[0].Kind)
		}},
		{"paging", func(h *history) {
			fixture(h, 0, false)
			for _, id := range []string{"a", "b", "c", "d", "e"} {
				appended(h, id, taskP)
			}
			h.add(runR, events.TypeMailboxAcknowledged, &events.MailboxAcknowledged{MessageID: "b"})
		}, func(t *testing.T, s *State) {
			var got []string
			f := MailboxFilter{Pending: true, Limit: 2}
			for {
				page, err := s.Mailbox(runR, taskP, f)
				require.NoError(t, err)
				require.Equal(t, 4, page.Total)
				for _, m := range page.Messages {
					got = append(got, m.ID)
				}
				if page.NextCursor == "" {
					break
				}
				f.Cursor = page.NextCursor
			}
			require.Equal(t, []string{"a", "c", "d", "e"}, got)
			_, err := s.Mailbox(runR, taskP, MailboxFilter{Cursor: "zz"})
			require.ErrorIs(t, err, ErrBadCursor)
		}},
	})
}

func TestApplyAsksCredentialsConfig(t *testing.T) {
	runCases(t, []applyCase{
		{"ask timed out clears the park", func(h *history) {
			fixture(h, 0, false)
			h.add(runR, events.TypeAskRequested, &events.AskRequested{TaskID: taskP, QuestionID: "q"})
			h.add(runR, events.TypeAskTimedOut, &events.AskTimedOut{TaskID: taskP, QuestionID: "q"})
			h.add(runR, events.TypeAskAnswered, &events.AskAnswered{TaskID: taskP, QuestionID: "q"})
		}, func(t *testing.T, s *State) {
			a, _ := s.Ask(runR, "q")
			require.Equal(t, AskTimedOut, a.Status, "a resolved ask stays resolved")
			r, _ := s.Run(runR)
			require.Nil(t, r.WaitState)
			require.Len(t, s.Asks(runR), 1)
		}},
		{"a closing that names another task leaves the park (R4)", func(h *history) {
			fixture(h, 0, false)
			h.add(runR, events.TypeAskRequested, &events.AskRequested{TaskID: taskP, QuestionID: "q"})
			h.add(runR, events.TypeAskTimedOut, &events.AskTimedOut{TaskID: "other", QuestionID: "q"})
		}, func(t *testing.T, s *State) {
			a, _ := s.Ask(runR, "q")
			require.Equal(t, AskTimedOut, a.Status, "the question closes whoever the closing names")
			r, _ := s.Run(runR)
			require.Equal(t, &WaitState{TaskID: taskP, QuestionID: "q"}, r.WaitState)
			require.Equal(t, []Ask{a}, s.StrandedAsks(), "the park outlived its question")
		}},
		{"credential issue, revoke, re-issue", func(h *history) {
			fixture(h, 0, false)
			h.add(runR, events.TypeCredentialIssued,
				&events.CredentialIssued{TaskID: events.OrchestratorKey, Role: events.RoleOrchestrator, Digest: "o1"})
			h.add(runR, events.TypeCredentialIssued,
				&events.CredentialIssued{TaskID: taskP, Role: events.RoleWorker, Digest: "d1"})
			h.add(runR, events.TypeCredentialRevoked, &events.CredentialRevoked{TaskID: taskP, Digest: "d1"})
		}, func(t *testing.T, s *State) {
			c, ok := s.Credential(runR, taskP)
			require.True(t, ok)
			require.True(t, c.Revoked)
			require.False(t, c.Valid("d1"))
			o, _ := s.Credential(runR, events.OrchestratorKey)
			require.True(t, o.Valid("o1"))
			require.False(t, o.Valid("d1"))
			var keys []string
			for _, c := range s.Credentials(runR) {
				keys = append(keys, c.Key)
			}
			require.Equal(t, []string{events.OrchestratorKey, taskP}, keys)

			Apply(s, events.Event{Stream: runR, Type: events.TypeCredentialIssued,
				Payload: &events.CredentialIssued{TaskID: taskP, Role: events.RoleWorker, Digest: "d2"}})
			c, _ = s.Credential(runR, taskP)
			require.True(t, c.Valid("d2"))
			require.False(t, c.Valid("d1"), "an older secret stops working on re-issue")
		}},
		{"default config", func(h *history) {}, func(t *testing.T, s *State) {
			require.Equal(t, DefaultConfig(), s.Config())
			require.Equal(t, Slots{Capacity: 2, SubIDs: []string{}}, s.Slots())
		}},
		{"configured replaces, empty catalog is kept", func(h *history) {
			h.add(events.EngineStream, events.TypeEngineConfigured, &events.EngineConfigured{MaxDepth: 2, MaxSlots: 8,
				UnmeteredDelegates: events.UnmeteredDeny, ModelCatalog: []string{}, SettleGraceSec: 5})
		}, func(t *testing.T, s *State) {
			c := s.Config()
			require.False(t, c.NestingEnabled)
			require.Equal(t, 8, c.MaxSlots)
			require.NotNil(t, c.ModelCatalog)
			require.Empty(t, c.ModelCatalog)
			require.Equal(t, uint64(1), c.Position)
			require.Equal(t, 8, s.Slots().Capacity)
		}},
	})
}

func TestQueriesReturnCopies(t *testing.T) {
	var h history
	fixture(&h, 100, false)
	admitBatch(&h, "gc-1", 10, true, 100)
	h.add(runR, events.TypeAskRequested, &events.AskRequested{TaskID: taskP, QuestionID: "q", Options: []string{"a"}})
	h.add(events.EngineStream, events.TypeEngineConfigured, &events.EngineConfigured{ModelCatalog: []string{"m"}})
	s := fold(h.evs)
	before := s.Clone()

	tasks := s.Tasks(runR)
	tasks[0].DependsOn[0] = "mutated"
	tasks[0].Allocation.TokensSpent = -1
	a, _ := s.Account(runR, taskP)
	a.Reservations[0].Tokens = -1
	asks := s.Asks(runR)
	asks[0].Options[0] = "mutated"
	c := s.Config()
	c.ModelCatalog[0] = "mutated"
	r, _ := s.Run(runR)
	r.WaitState.TaskID = "mutated"
	require.Equal(t, before, s)
}

func TestCloneIsIndependent(t *testing.T) {
	var h history
	fixture(&h, 100_000, false)
	admitBatch(&h, "gc-1", 10, true, 100_000)
	s := fold(h.evs)
	c := s.Clone()
	require.Equal(t, s, c)

	// Appending to lists of one copy must not show in the other, even when
	// the backing arrays had spare capacity.
	admitBatch(&h, "gc-2", 20, true, 100_000)
	for _, ev := range h.evs[len(h.evs)-3:] {
		Apply(c, ev)
	}
	a, _ := s.Account(runR, taskP)
	require.Len(t, a.Reservations, 1)
	require.Equal(t, 1, s.SlotsHeld())
	require.Equal(t, 2, c.SlotsHeld())
	for _, ev := range h.evs[len(h.evs)-3:] {
		Apply(s, ev)
	}
	require.Equal(t, s, c)
}

// A clone holds no record of the state it was cloned from: the tasks,
// delegations and messages' data are copied (into slabs), not shared.
func TestCloneSharesNoRecord(t *testing.T) {
	var h history
	fixture(&h, 100_000, false)
	for _, sub := range []string{"gc-1", "gc-2", "gc-3"} {
		admitBatch(&h, sub, 10, true, 100_000)
		settleBatch(&h, sub, events.TypeDelegateCompleted, 10, 10)
	}
	s := fold(h.evs)
	c := s.Clone()
	require.Equal(t, s, c)
	data := 0
	for id, r := range s.runs {
		cr := c.runs[id]
		for tid, task := range r.tasks {
			require.NotSame(t, task, cr.tasks[tid])
		}
		for sub, d := range r.dels {
			require.NotSame(t, d, cr.dels[sub])
		}
		for i := range r.msgs.Len() {
			if r.msgs.At(i).Data != nil {
				require.NotSame(t, r.msgs.At(i).Data, cr.msgs.At(i).Data)
				data++
			}
		}
	}
	require.Equal(t, 3, data, "the history settles three delegations with result data")
}
