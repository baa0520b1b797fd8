// Package projectionstest compares states by their answers: every query of
// projections.State asked about every run and record. Tests of the hot and
// cold tiers use it to check that a state that keeps runs cold answers as
// the full fold does.
package projectionstest

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// stateQueries are the methods of *projections.State that answer
// questions; Answers asks each of them. The others change a state or
// say how it is held.
var (
	stateQueries = []string{
		"Account", "AccountHistory", "Allocation", "Ask", "Asks", "AsksPage", "Authorize", "Config", "Credential",
		"LookupCredential", "Credentials", "CredentialsPage",
		"Delegation", "Delegations", "DelegationsPage", "DueAsks", "InFlight", "IsShadow", "Ledger", "LedgerPage",
		"LedgerPageWithin", "LedgerTotals", "Mailbox", "Message", "MessagesSince", "RootSpent", "Run", "LookupRun",
		"RunStatus", "LookupRunStatus", "RunEndedAt", "Runs", "SlotHolder", "SlotWaiters", "Slots",
		"SlotsHeld", "SlotsHeldBy", "SlotsOf", "StrandedAsks", "Task", "TaskStatus", "TaskAttempt",
		"LookupTaskStatus", "LookupTaskStatuses", "Tasks", "TasksPage", "LiveTasks", "TaskDependsOn",
		"RunningTasks",
		"EachLiveTask", "EachWorkflowTask", "EachInFlight",
		"ActiveLeases", "Job", "JobCount", "JobHeader", "LookupJobHeader", "JobPage", "JobTool", "Jobs", "EachJob",
		"LiveRequests", "ProxyRequestOf", "RevokedRootsOf", "RevokedRootCount", "RootRevoked", "WorkerAppended",
		"ShareHolder", "SlotsHeldByWorker", "WorkerSlotWaiters",
	}
	stateNotQueries = []string{
		"AssumePool", "Clone", "ColdInMemory", "ColdRuns", "ColdStore", "EvictAll", "EvictAllCounted", "Evict",
		"Evictable", "FaultIn", "HotRuns", "IsCold", "IsHot", "MissingViews", "SetColdStore", "SnapshotRecords",
		"ThawFrom", "Warm", "Whole",
	}
)

// RequireEveryQueryAsked fails when *projections.State has a method that is
// neither asked by Answers nor listed as no query: a new query must be
// compared too.
func RequireEveryQueryAsked(t testing.TB) {
	typ := reflect.TypeOf(&projections.State{})
	for i := 0; i < typ.NumMethod(); i++ {
		name := typ.Method(i).Name
		require.True(t, slices.Contains(stateQueries, name) || slices.Contains(stateNotQueries, name),
			"projections.State.%s is new: make Answers ask it, or list it as no query", name)
	}
}

// Answers asks every query of s (stateQueries) about every run, and every
// record of each, paged and whole, plus an unknown run, at clock reading now
// (unix ms). Two states that answer alike give equal maps.
func Answers(t testing.TB, s *projections.State, now int64) map[string]any {
	t.Helper()
	out := map[string]any{}
	put := func(k string, v ...any) {
		_, dup := out[k]
		require.False(t, dup, k)
		out[k] = v
	}
	put("Position", s.Position)
	put("Config", s.Config())
	put("Slots", s.Slots())
	put("SlotsHeld", s.SlotsHeld())
	put("InFlight", s.InFlight())
	put("DueAsks", s.DueAsks(now))
	put("DueAsksLater", s.DueAsks(now+int64(time.Hour/time.Millisecond)))
	put("StrandedAsks", s.StrandedAsks())
	// The runs list, paged every way a client pages it (finished runs come
	// from the index of cold runs' summaries, the others from memory).
	statusSets := [][]projections.RunStatus{nil, {projections.RunCompleted},
		{projections.RunRunning, projections.RunCancelled}, {projections.RunFailed}}
	for _, newest := range []bool{false, true} {
		for si, st := range statusSets {
			for _, limit := range []int{1, 3} {
				f := projections.RunFilter{Statuses: st, Limit: limit, Newest: newest}
				for p := 0; ; p++ {
					page, err := s.Runs(f)
					require.NoError(t, err)
					page.IndexRead = 0 // what the page answers, not what it read: the index, or memory, or both
					put(fmt.Sprintf("Runs/%v/%d/%d/%d", newest, si, limit, p), page)
					if page.NextCursor == "" {
						break
					}
					f.Cursor = page.NextCursor
				}
			}
		}
	}
	all, err := s.Runs(projections.RunFilter{})
	require.NoError(t, err)
	ids := []string{"nope"}
	for _, r := range all.Runs {
		ids = append(ids, r.RunID)
	}
	for _, run := range ids {
		q := func(k string, v ...any) { put(run+"/"+k, v...) }
		r, ok := s.Run(run)
		q("Run", r, ok)
		r, ok, err := s.LookupRun(run)
		require.NoError(t, err, run)
		q("LookupRun", r, ok)
		rs, ok := s.RunStatus(run)
		q("RunStatus", rs, ok)
		rs, ok, err = s.LookupRunStatus(run)
		require.NoError(t, err, run)
		q("LookupRunStatus", rs, ok)
		q("RunEndedAt", s.RunEndedAt(run))
		q("SlotsHeldBy", s.SlotsHeldBy(run))
		q("SlotsOf", s.SlotsOf(run))
		q("SlotWaiters", s.SlotWaiters(run, now, 1e9, 2))
		// NB: counting the first live task's messages too, as the quota counts a worker's
		var firstTask string
		s.EachLiveTask(run, func(t projections.Task) bool { firstTask = t.TaskID; return false })
		all, sent := s.MessagesSince(run, firstTask, 0, 1000)
		q("MessagesSince", all, sent)
		evs, bytes := s.WorkerAppended(run, firstTask)
		q("WorkerAppended", evs, bytes)
		holder, held := s.SlotsHeldByWorker(run, firstTask)
		q("SlotsHeldByWorker", holder, held)
		q("WorkerSlotWaiters", s.WorkerSlotWaiters(run, holder, now, 1e9, 2))
		q("WorkerSlotWaiters/none", s.WorkerSlotWaiters(run, "", now, 1e9, 2))
		q("RootSpent", s.RootSpent(run))
		q("LiveTasks", s.LiveTasks(run))
		var liveTasks, workflowTasks []projections.Task
		s.EachLiveTask(run, func(t projections.Task) bool { liveTasks = append(liveTasks, t); return true })
		s.EachWorkflowTask(run, func(t projections.Task) bool {
			workflowTasks = append(workflowTasks, t)
			return true
		})
		q("EachLiveTask", liveTasks)
		q("EachWorkflowTask", workflowTasks)
		tasks := s.Tasks(run)
		q("Tasks", tasks)
		recordPages(t, q, "TasksPage", func(f projections.PageFilter) (string, any, error) {
			p, err := s.TasksPage(run, f)
			return p.NextCursor, p, err
		})
		taskIDs := []string{"nope"}
		for _, task := range tasks {
			taskIDs = append(taskIDs, task.TaskID)
		}
		statuses, err := s.LookupTaskStatuses(run, taskIDs)
		require.NoError(t, err)
		q("LookupTaskStatuses", statuses)
		recipients := []string{events.RunInbox, "nobody"}
		for _, task := range append(tasks, projections.Task{TaskID: "nope"}) {
			id := task.TaskID
			recipients = append(recipients, id)
			tk, ok := s.Task(run, id)
			q("Task/"+id, tk, ok)
			ts, ok := s.TaskStatus(run, id)
			q("TaskStatus/"+id, ts, ok)
			ts, retries, ok := s.TaskAttempt(run, id)
			q("TaskAttempt/"+id, ts, retries, ok)
			ts, ok, err := s.LookupTaskStatus(run, id)
			require.NoError(t, err)
			q("LookupTaskStatus/"+id, ts, ok)
			q("IsShadow/"+id, s.IsShadow(run, id))
			q("RunningTasks/"+id, s.RunningTasks(run, task.Role, task.Cwd))
			a, ok := s.Account(run, id)
			q("Account/"+id, a, ok)
			al, ok := s.Allocation(run, id)
			q("Allocation/"+id, al, ok)
			recordPages(t, q, "TaskDependsOn/"+id, func(f projections.PageFilter) (string, any, error) {
				p, ok, err := s.TaskDependsOn(run, id, f)
				return p.NextCursor, []any{p, ok}, err
			})
			recordPages(t, q, "AccountHistory/"+id, func(f projections.PageFilter) (string, any, error) {
				h, ok, err := s.AccountHistory(run, id, f)
				return h.NextCursor, []any{h, ok}, err
			})
		}
		dels := s.Delegations(run)
		q("Delegations", dels)
		var inFlight []projections.Delegation
		s.EachInFlight(run, func(d projections.Delegation) bool { inFlight = append(inFlight, d); return true })
		q("EachInFlight", inFlight)
		recordPages(t, q, "DelegationsPage", func(f projections.PageFilter) (string, any, error) {
			p, err := s.DelegationsPage(run, f)
			return p.NextCursor, p, err
		})
		for _, d := range dels {
			dd, ok := s.Delegation(run, d.SubID)
			q("Delegation/"+d.SubID, dd, ok)
			h, ok := s.SlotHolder(d.SubID)
			q("SlotHolder/"+d.SubID, h, ok)
			// NB: the delegation's shadow task, whose worker uses the share of the task that started it
			q("ShareHolder/"+d.SubID, s.ShareHolder(run, d.SubID))
			evs, bytes := s.WorkerAppended(run, d.SubID)
			q("WorkerAppended/"+d.SubID, evs, bytes)
		}
		q("Ledger", s.Ledger(run))
		granted, spent := s.LedgerTotals(run)
		q("LedgerTotals", granted, spent)
		recordPages(t, q, "LedgerPage", func(f projections.PageFilter) (string, any, error) {
			p, err := s.LedgerPage(run, f)
			return p.NextCursor, p, err
		})
		for _, most := range []int{0, 1, math.MaxInt} { // no history, the shortest, every one
			recordPages(t, q, fmt.Sprintf("LedgerPageWithin/%d", most), func(f projections.PageFilter) (string, any, error) {
				p, err := s.LedgerPageWithin(run, f, most)
				return p.NextCursor, p, err
			})
		}
		for _, to := range recipients {
			for _, pending := range []bool{false, true} {
				var msgs []projections.Message
				for p, f := 0, (projections.MailboxFilter{Pending: pending, Limit: 2}); ; p++ {
					page, err := s.Mailbox(run, to, f)
					require.NoError(t, err)
					q(fmt.Sprintf("Mailbox/%s/%v/%d", to, pending, p), page)
					msgs = append(msgs, page.Messages...)
					if page.NextCursor == "" {
						break
					}
					f.Cursor = page.NextCursor
				}
				for _, m := range msgs {
					mm, ok := s.Message(run, m.ID)
					q(fmt.Sprintf("Message/%s/%v/%s", to, pending, m.ID), mm, ok)
				}
			}
		}
		asks := s.Asks(run)
		q("Asks", asks)
		for _, pending := range []bool{false, true} {
			recordPages(t, q, fmt.Sprintf("AsksPage/%v", pending),
				func(f projections.PageFilter) (string, any, error) {
					p, err := s.AsksPage(run, pending, f)
					return p.NextCursor, p, err
				})
		}
		for _, a := range asks {
			aa, ok := s.Ask(run, a.QuestionID)
			q("Ask/"+a.QuestionID, aa, ok)
		}
		jobs := s.Jobs(run)
		q("Jobs", jobs)
		var walked []projections.Job
		require.NoError(t, s.EachJob(run, func(j projections.Job) bool { walked = append(walked, j); return true }))
		q("EachJob", walked)
		n, live := s.JobCount(run)
		q("JobCount", n, live)
		q("ActiveLeases", s.ActiveLeases(run))
		rr := s.RevokedRootsOf(run)
		q("RevokedRootsOf", rr)
		roots, saturated := s.RevokedRootCount(run)
		q("RevokedRootCount", roots, saturated)
		authorize := func(parent, tool string) projections.Authorization {
			a, err := s.Authorize(run, parent, tool)
			require.NoError(t, err)
			return a
		}
		q("Authorize/none", authorize("", "x"))
		for _, root := range append(rr.Roots, "nope") {
			q("Authorize/"+root, authorize(root+"/c", "x"))
			q("RootRevoked/"+root, s.RootRevoked(run, root))
		}
		for _, j := range append(jobs, projections.Job{JobID: "nope"}) {
			jj, ok := s.Job(run, j.JobID)
			q("Job/"+j.JobID, jj, ok)
			// Its calls by pages of 2 from the first, then a page past the last.
			for from := 0; ; {
				pg, ok, err := s.JobPage(run, j.JobID, from, 2)
				require.NoError(t, err)
				q(fmt.Sprintf("JobPage/%s/%d", j.JobID, from), pg, ok)
				if !ok || pg.Next >= pg.Seen {
					break
				}
				from = pg.Next
			}
			pg, ok, err := s.JobPage(run, j.JobID, len(j.Requests)+1, 2)
			require.NoError(t, err)
			q("JobPage/"+j.JobID+"/past", pg, ok)
			h, ok := s.JobHeader(run, j.JobID)
			q("JobHeader/"+j.JobID, h, ok)
			h, ok, err = s.LookupJobHeader(run, j.JobID)
			require.NoError(t, err)
			q("LookupJobHeader/"+j.JobID, h, ok)
			q("LiveRequests/"+j.JobID, s.LiveRequests(run, j.JobID))
			for _, tool := range append(j.Tools, "nope") {
				g, ro := s.JobTool(run, j.JobID, tool)
				q("JobTool/"+j.JobID+"/"+tool, g, ro)
				q("Authorize/"+j.JobID+"/"+tool, authorize(j.Root+"/c", tool))
			}
			for _, r := range append(j.Requests, &projections.ProxyRequest{RequestID: "nope"}) {
				pr, ok := s.ProxyRequestOf(run, j.JobID, r.RequestID)
				q("ProxyRequestOf/"+j.JobID+"/"+r.RequestID, pr, ok)
			}
		}
		creds := s.Credentials(run)
		q("Credentials", creds)
		recordPages(t, q, "CredentialsPage", func(f projections.PageFilter) (string, any, error) {
			p, err := s.CredentialsPage(run, f)
			return p.NextCursor, p, err
		})
		for _, c := range append(creds, projections.Credential{Key: "nope"}) {
			cc, ok := s.Credential(run, c.Key)
			q("Credential/"+c.Key, cc, ok)
			cc, ok, err := s.LookupCredential(run, c.Key)
			require.NoError(t, err)
			q("LookupCredential/"+c.Key, cc, ok)
		}
	}
	return out
}

// RequireSame compares two Answers one answer at a time, so a difference
// names its query.
func RequireSame(t testing.TB, want, got map[string]any, what string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		require.Equal(t, want[k], got[k], "%s: %s", what, k)
	}
	require.Len(t, got, len(want), what)
}

// recordPages reads every page of size 2 of a paged query.
func recordPages(t testing.TB, q func(string, ...any), name string,
	read func(projections.PageFilter) (next string, page any, err error)) {
	f := projections.PageFilter{Limit: 2}
	for p := 0; ; p++ {
		next, page, err := read(f)
		require.NoError(t, err)
		q(fmt.Sprintf("%s/%d", name, p), page)
		if next == "" {
			return
		}
		f.Cursor = next
	}
}
