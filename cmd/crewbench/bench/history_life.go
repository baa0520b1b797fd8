package bench

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// The shape of one run's life in the history.
const (
	historyTasks = 4
	// setupEvents: run.created + the orchestrator's credential.issued,
	// run.running, and per task task.created, credential.issued and
	// task.started.
	setupEvents = 3 + 3*historyTasks
	// closeEvents: task.completed per task, run.completed.
	closeEvents = historyTasks + 1
	// inFlightEvents: the delegation an active run is left with
	// (requested, admitted, reserved, spawned).
	inFlightEvents = 4
	// maxStepEvents bounds the events of one step of a run's work (a
	// delegation: requested, admitted, reserved, spawned, mailbox.appended,
	// charged, completed, and its result's acknowledgement).
	maxStepEvents = 8
	// minRunEvents and minActiveEvents are the least a finished and an
	// active run hold: their set-up and their end.
	minRunEvents    = setupEvents + closeEvents
	minActiveEvents = setupEvents + inFlightEvents
	// historyTimeoutSec keeps an active run's delegation in flight for a
	// day: the engine clock must not time it out while crewd is measured.
	historyTimeoutSec = 86400
)

// runLife is one run of the history: its ids and where its work has got to.
// Concurrency: one goroutine at a time.
type runLife struct {
	g   *historyWriter
	run string
	// events is how many events the run holds once its life is over;
	// open: live leaves the run running (an active run), the writer then
	// leaves it with a delegation in flight.
	events int64
	open   bool
	tasks  [historyTasks]string
	steps  int
	usage  [historyTasks]int64 // each task's cumulative usage, as reported
	orch   events.Principal
}

// newRunLife is the k-th run of g's history: finished with its share of
// the events, or, past g.nfinished, active with g.activeEvents.
func newRunLife(g *historyWriter, k int) *runLife {
	l := &runLife{g: g, run: historyRunID(k), open: k >= g.nfinished}
	if l.open {
		l.events = g.activeEvents
	} else {
		l.events = g.share(k)
	}
	for i := range l.tasks {
		l.tasks[i] = fmt.Sprintf("%02d_work", i)
	}
	l.orch = events.OrchestratorPrincipal(l.run)
	return l
}

// historyRunID is the id of the k-th run, in pi-crew's shape.
func historyRunID(k int) string { return fmt.Sprintf("team_20261001090000_%08x", k) }

// live plays the run: set up, work in whole steps while one more fits its
// events, then single-event usage reports until only its end is left — its
// completion, or for an open run the delegation left in flight, which the
// writer adds last — then complete it unless it is open. So the run holds
// exactly l.events events, the same steps for the same l.events.
func (l *runLife) live(ctx context.Context) error {
	if err := l.setUp(ctx); err != nil {
		return err
	}
	end := int64(closeEvents)
	if l.open {
		end = inFlightEvents
	}
	for l.g.runEvents(l.run)+maxStepEvents+end <= l.events {
		if err := l.step(ctx); err != nil {
			return err
		}
	}
	for l.g.runEvents(l.run)+end < l.events {
		if err := l.reportUsage(ctx); err != nil {
			return err
		}
	}
	if l.open {
		return nil
	}
	return l.complete(ctx)
}

// setUp creates the run and its running tasks. Credentials are recorded as
// crewd records them, by digest; no one connects with them.
func (l *runLife) setUp(ctx context.Context) error {
	budget := int64(1) << 40
	if err := l.g.submit(ctx, events.AdminPrincipal(), &commands.RunCreate{RunID: l.run, Team: "crew",
		Workflow: "default", Goal: "ship the history benchmark", Cwd: "/srv/crew", BudgetTotal: &budget,
		OrchestratorDigest: daemon.Digest(l.run)}, nil, false); err != nil {
		return err
	}
	if err := l.g.submit(ctx, l.orch, &commands.RunTransition{RunID: l.run, To: "running"}, nil, false); err != nil {
		return err
	}
	for _, t := range l.tasks {
		for _, c := range []commands.Command{
			&commands.TaskCreate{RunID: l.run, TaskID: t, Role: "executor", Agent: "executor", Title: "work on " + t,
				Cwd: "/srv/crew/" + t, StepID: t, Model: "anthropic/m1"},
			&commands.CredentialIssue{RunID: l.run, TaskID: t, Digest: daemon.Digest(l.run + "/" + t)},
			&commands.TaskTransition{RunID: l.run, TaskID: t, To: "running"},
		} {
			if err := l.g.submit(ctx, l.orch, c, nil, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// step is one piece of a task's work, the tasks taking turns: mostly a
// delegation settled with its result, and in between a refused delegation,
// an ask answered, a usage report and a message to the run's inbox.
func (l *runLife) step(ctx context.Context) error {
	i := l.steps
	l.steps++
	t := l.tasks[i%historyTasks]
	switch {
	case i%10 == 9:
		return l.refused(ctx, t)
	case i%7 == 3:
		return l.ask(ctx, t)
	case i%5 == 2:
		return l.reportUsage(ctx)
	case i%4 == 1:
		return l.message(ctx, t, i%8 == 1)
	}
	sub, err := l.delegate(ctx, t)
	if err != nil {
		return err
	}
	usage := int64(50 + 100*(i%2)) // every other one exceeds its reservation and is charged
	var settled commands.SettleResult
	if err := l.g.submit(ctx, l.orch, &commands.DelegateSettle{RunID: l.run, SubID: sub, Outcome: commands.OutcomeOK,
		Text: "found it: the cache key ignores the tenant; patch attached", UsageTokens: &usage}, &settled,
		false); err != nil {
		return err
	}
	if i%3 == 0 {
		return nil // left unread in the task's mailbox
	}
	return l.g.submit(ctx, events.WorkerPrincipal(l.run, t), &commands.MailboxAck{RunID: l.run, Recipient: t,
		MessageIDs: []string{settled.MessageID}}, nil, false)
}

// delegate has task t's request admitted and its grandchild spawned, and
// returns the subId.
func (l *runLife) delegate(ctx context.Context, t string) (string, error) {
	desc, role, budget, timeout := "explore the package", "analyst", int64(100), float64(historyTimeoutSec)
	var res commands.DelegateResult
	if err := l.g.submit(ctx, events.WorkerPrincipal(l.run, t), &commands.DelegateRequest{RunID: l.run, TaskID: t,
		Prompt: "find where the cache key is built and whether it includes the tenant", Description: &desc,
		Role: &role, BudgetTokens: &budget, TimeoutSec: &timeout}, &res, false); err != nil {
		return "", err
	}
	sub := res.GrandchildTaskRef
	return sub, l.g.submit(ctx, l.orch, &commands.DelegateSpawned{RunID: l.run, SubID: sub,
		PID: 1000 + l.steps}, nil, false)
}

// refused is a request the policy denies (a role no grandchild may take).
func (l *runLife) refused(ctx context.Context, t string) error {
	desc, role := "review the patch", "reviewer"
	return l.g.submit(ctx, events.WorkerPrincipal(l.run, t), &commands.DelegateRequest{RunID: l.run, TaskID: t,
		Prompt: "review it", Description: &desc, Role: &role}, nil, true)
}

// ask parks task t on a question and answers it.
func (l *runLife) ask(ctx context.Context, t string) error {
	w := events.WorkerPrincipal(l.run, t)
	var asked commands.WaitResult
	if err := l.g.submit(ctx, w, &commands.WaitRequest{RunID: l.run, TaskID: t, Question: "ship it with the flag on?",
		Options: []string{"yes", "no"}}, &asked, false); err != nil {
		return err
	}
	return l.g.submit(ctx, w, &commands.WaitResolve{RunID: l.run, TaskID: t,
		QuestionID: asked.QuestionID}, nil, false)
}

// reportUsage reports one task's cumulative usage, a little higher each time.
func (l *runLife) reportUsage(ctx context.Context) error {
	k := l.steps % historyTasks
	l.usage[k] += 1200
	return l.g.submit(ctx, l.orch, &commands.TaskUsage{RunID: l.run, TaskID: l.tasks[k], Input: l.usage[k],
		Output: l.usage[k] / 4, CacheRead: l.usage[k] * 2, Turns: int64(l.steps)}, nil, false)
}

// message sends a note from task t to the run's inbox, which the
// orchestrator reads (delivers) and, when ack, acknowledges.
func (l *runLife) message(ctx context.Context, t string, ack bool) error {
	var sent commands.SendResult
	if err := l.g.submit(ctx, events.WorkerPrincipal(l.run, t), &commands.MessageSend{RunID: l.run, FromTask: t,
		To: []string{commands.ToParent}, Body: "progress: tests pass on the tenant fix, benchmarks next",
		Subject: "progress"}, &sent, false); err != nil {
		return err
	}
	ids := []string{sent.MessageID + "_" + commands.ToParent}
	if err := l.g.submit(ctx, l.orch, &commands.MailboxDeliver{RunID: l.run, Recipient: events.RunInbox,
		MessageIDs: ids}, nil, false); err != nil {
		return err
	}
	if !ack {
		return nil
	}
	return l.g.submit(ctx, l.orch, &commands.MailboxAck{RunID: l.run, Recipient: events.RunInbox,
		MessageIDs: ids}, nil, false)
}

// complete ends every task and the run.
func (l *runLife) complete(ctx context.Context) error {
	for _, t := range l.tasks {
		if err := l.g.submit(ctx, l.orch, &commands.TaskTransition{RunID: l.run, TaskID: t, To: "completed"}, nil,
			false); err != nil {
			return err
		}
	}
	return l.g.submit(ctx, l.orch, &commands.RunTransition{RunID: l.run, To: "completed",
		Summary: "done"}, nil, false)
}

func decodeResult(kind string, raw json.RawMessage, into any) error {
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("bench: history: %s result: %w", kind, err)
	}
	return nil
}
