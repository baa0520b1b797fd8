package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Run quotas (SPEC §5). A run's callers grow it through a few commands;
// each such decision is measured by the events it would append — events in
// the run's stream, bytes of text, messages — and refused when the run
// would pass a quota of the config in force: quotaEvents (events in the
// stream), quotaBytes (the bytes of text the run's events hold: message
// bodies and subjects, and every other string its events record, their
// envelopes' included, events.TextBytes) or quotaMsgsPerMin (messages
// appended in the last minute by the engine clock, Env.Now). Everything the check reads is in
// the state, the config and the clock reading, so replay decides the same.
//
// Commands that wind a run down or settle its work (terminal transitions,
// settle, spawned, cancel, revoke, deliver/ack, job stops, lease clears, a
// call's delivered result, the clock's expiries) are never refused by a
// quota: a run at its quota can always finish. Each of them is bounded by
// what came before it (a delegation settles once, a lease clears once per
// open), so they cannot loop. Their text counts against the bytes quota
// all the same, and the measured command that would bring one round again
// (a retry, a reopened run, a new task) is refused once the run is past
// it, whether or not it adds text itself. A wind-down that would take its
// run past the bytes quota keeps only a line of each status text
// (quota_clip.go): a run may hold many tasks, and each one ending with the
// longest texts would multiply what the quota allows.
//
// Everything a client can repeat without winding the run down is measured
// like the gated commands, or it would grow the run's stream without bound:
//   - the commands that never wind down: task.usage (a report can be sent
//     again and again), credential.issue (each issue replaces the last),
//     lease.open (lease.open and job.transition paused make a cycle); but
//     the one report that aborts the run on its budget winds it down
//     (windingDown);
//   - a transition that does not move toward the end (windingDown): a
//     run's same-status transition, a run leaving a terminal status, a
//     run's → blocked or → planning, a task's retry (→ queued); a run's
//     → running from queued, planning or blocked and a task's queued →
//     running stay free, since completing needs them, and without the
//     measured edges they cannot come round again;
//   - proxy.complete of a call that is no longer current: it records only
//     a fenced completion, and can be sent for the same call any number of
//     times;
//   - a refusal of any command that records nothing but the refusal
//     (refusalRecords): it changes nothing, and a client that repeats it
//     (wait.resolve while the wait methods are off, a worker's every call)
//     would otherwise grow the run's stream without bound.
//
// The run's workers share each quota but its reserve (config quotaReserve,
// a percent): a worker is refused at the rest, so that however a run's
// workers use it, its orchestrator (and the admin) can still steer, message,
// create tasks and report within the reserve. Of the workers' part, one
// worker may use at most a share, so a worker flooding its run cannot hold
// what its sibling workers need: of the message rate config
// quotaWorkerMsgShare percent (its messages of the last minute), of the
// events and the bytes quotas config quotaWorkerShare percent (what its
// task appended to the run as its actor, projections.Task.ActorEvents and
// ActorBytes), each checked after the run's own quotas. A delegation's
// grandchild uses the share of the workflow task that started it
// (projections.State.ShareHolder), not one of its own, and the message
// that delivers a delegation's result counts for that share too, whoever
// appends it: else a worker would pass its share by delegating and sending
// from its grandchildren, or having them end with long results. The
// actor's role and task are in the decision's input, and recorded with
// every event, and the delegations are in the state, so replay decides the
// same.
//
// A refusal answers quota-exceeded (events, bytes, and a worker's share of
// them) or rate-limit (message rate, and a worker's share of it) and
// records run.quota_exceeded with what the check saw — at most one per run
// per QuotaWindowSec, so a flood of refused commands cannot grow the log it
// is kept from growing.
var quotaGated = map[string]bool{
	"msg.send": true, "escalate": true, "steer.push": true, "delegate.request": true, "wait.request": true,
	"task.create": true, "job.create": true, "proxy.request": true, "proxy.cancel": true,
	"task.usage": true, "credential.issue": true, "lease.open": true,
}

// windingDown is a command measured against its run's quotas unless its
// decision moves the run toward its end. windsDown reads only the state the
// command is decided against and the command, so replay decides the same.
type windingDown interface {
	Command
	windsDown(s *projections.State) bool
}

// Growth is what a decision would add to its run.
type Growth struct {
	Events int64
	Bytes  int64
	Msgs   int64
}

// growthOf measures the events of a decision on run runID.
func growthOf(runID string, evs []events.Event) Growth {
	var g Growth
	for _, ev := range evs {
		if ev.Stream != runID {
			continue
		}
		g.Events++
		g.Bytes += events.TextBytes(ev)
		if p := events.PayloadAs[events.MailboxAppended](ev); p != nil && ev.Type == events.TypeMailboxAppended {
			g.Bytes += int64(len(p.Body) + len(p.Subject))
			g.Msgs++
		}
	}
	return g
}

// refusalRecords are the events that record a refusal and nothing else.
var refusalRecords = map[string]bool{
	events.TypePolicyAction: true, events.TypeJobRejected: true, events.TypeProxyRejected: true,
	events.TypeDelegateRequested: true, events.TypeDelegateRejected: true,
}

// onlyRefusal reports whether a decision refused with err and records
// nothing but that refusal.
func onlyRefusal(d Decision, err error) bool {
	if err == nil {
		return false
	}
	for _, ev := range d.Events {
		if !refusalRecords[ev.Type] {
			return false
		}
	}
	return true
}

// measured reports whether decision d of cmd (err its refusal) is checked
// against the run's quotas.
func measured(s *projections.State, cmd Command, d Decision, err error) bool {
	w, ok := cmd.(windingDown)
	switch {
	case onlyRefusal(d, err):
		return true
	case ok && w.windsDown(s):
		return false // NB: a gated command too: the task.usage that aborts the run winds it down
	}
	return quotaGated[cmd.Kind()] || ok
}

// withQuota replaces a measured decision by a quota refusal when the
// decision would take its run past a quota.
func withQuota(s *projections.State, cmd Command, env *Env, d Decision, err error) (Decision, error) {
	if len(d.Events) == 0 || !measured(s, cmd, d, err) {
		return d, err
	}
	runID := d.Events[0].Stream
	if q, over := overQuota(s, runID, growthOf(runID, d.Events), env); over {
		q.Method = cmd.Kind()
		return refuseQuota(s, runID, q, env)
	}
	return d, err
}

// overQuota checks growth g of run runID against the quotas, in the order
// events, bytes, message rate, and reports the first one it passes.
func overQuota(s *projections.State, runID string, g Growth, env *Env) (events.RunQuotaExceeded, bool) {
	run, ok := s.Run(runID)
	if !ok {
		return events.RunQuotaExceeded{}, false
	}
	cfg, u, limit := env.Config, run.Usage, quotaLimit(env)
	switch {
	case cfg.QuotaEvents > 0 && g.Events > 0 && u.Events+g.Events > limit(cfg.QuotaEvents):
		return events.RunQuotaExceeded{Quota: events.QuotaEvents, Used: u.Events, Adding: g.Events,
			Max: limit(cfg.QuotaEvents)}, true
	case pastBytesQuota(u, g, env):
		// NB: without a g.Bytes > 0 guard: a measured command that adds no
		// text is refused once the run is past the quota (a wind-down's
		// text can take it there), or it could bring a text-carrying
		// wind-down round again (a retry, then a failure with its error).
		q := events.RunQuotaExceeded{Quota: events.QuotaBytes, Used: u.Bytes(), Adding: g.Bytes,
			Max: limit(cfg.QuotaBytes)}
		return q, true
	case cfg.QuotaMsgsPerMin > 0 && g.Msgs > 0:
		most := limit(int64(cfg.QuotaMsgsPerMin))
		since := env.millis() - events.QuotaWindowSec*1000 + 1
		mine, sender := workerMsgLimit(env, most)
		// NB: the run's count first: when it passes, the window may hold more messages than were counted, and
		// the sender's count is only whole when the run's is.
		recent, sent := s.MessagesSince(runID, sender, since, cfg.QuotaMsgsPerMin+1)
		if int64(recent)+g.Msgs > most {
			return events.RunQuotaExceeded{Quota: events.QuotaMsgRate, Used: int64(recent), Adding: g.Msgs,
				Max: most}, true
		}
		if mine > 0 && int64(sent)+g.Msgs > mine {
			return events.RunQuotaExceeded{Quota: events.QuotaWorkerMsgRate, Used: int64(sent), Adding: g.Msgs,
				Max: mine}, true
		}
	}
	return overWorkerShare(s, runID, g, env)
}

// overWorkerShare checks growth g of run runID, which passes none of the run's quotas, against env's actor's share
// of the workers' part of the events and the bytes quotas (config quotaWorkerShare), in that order, counted by what
// the task holding the actor's share appended to the run as its actor, with its delegations
// (projections.State.WorkerAppended).
func overWorkerShare(s *projections.State, runID string, g Growth, env *Env) (events.RunQuotaExceeded, bool) {
	cfg, limit := env.Config, quotaLimit(env)
	mine := func(quota int64) int64 {
		if quota <= 0 {
			return 0
		}
		return workerShareLimit(env, limit(quota))
	}
	eventsMine, bytesMine := mine(cfg.QuotaEvents), mine(cfg.QuotaBytes)
	if eventsMine == 0 && bytesMine == 0 {
		return events.RunQuotaExceeded{}, false // NB: no share applies, so the run's tasks are not looked up
	}
	evs, bytes := s.WorkerAppended(runID, env.Actor.TaskID)
	if eventsMine > 0 && g.Events > 0 && evs+g.Events > eventsMine {
		return events.RunQuotaExceeded{Quota: events.QuotaWorkerEvents, Used: evs, Adding: g.Events,
			Max: eventsMine}, true
	}
	// NB: without a g.Bytes > 0 guard, as the run's bytes quota: a wind-down's text can take a worker past its
	// share, and the measured command that would bring one round again is refused then.
	if bytesMine > 0 && bytes+g.Bytes > bytesMine {
		return events.RunQuotaExceeded{Quota: events.QuotaWorkerBytes, Used: bytes, Adding: g.Bytes,
			Max: bytesMine}, true
	}
	return events.RunQuotaExceeded{}, false
}

// pastBytesQuota reports whether growth g would take a run of usage u past
// the bytes quota env's actor may use.
func pastBytesQuota(u projections.RunUsage, g Growth, env *Env) bool {
	return env.Config.QuotaBytes > 0 && u.Bytes()+g.Bytes > quotaLimit(env)(env.Config.QuotaBytes)
}

// quotaLimit is what of a quota env's actor may use: a worker stops short
// of the reserve.
func quotaLimit(env *Env) func(quota int64) int64 {
	cfg := env.Config
	if env.Actor.Role != events.RoleWorker || cfg.QuotaReserve <= 0 {
		return func(quota int64) int64 { return quota }
	}
	// NB: at least 1: a quota too small to split is not reserved (the workers could use none of it).
	r := int64(cfg.QuotaReserve)
	return func(quota int64) int64 { return max(1, quota-percentOf(quota, r)) }
}

// percentOf is pct percent of n (0..100), rounded down, without the overflow of n*pct for a quota near 2^63.
func percentOf(n, pct int64) int64 { return n/100*pct + n%100*pct/100 }

// workerShareLimit is what of part, the workers' part of the events or the bytes quota, env's actor may have
// appended on its own: config quotaWorkerShare percent of it (workerPart).
func workerShareLimit(env *Env, part int64) int64 {
	return workerPart(env, env.Config.QuotaWorkerShare, MaxQuotaWorkerShare, part)
}

// workerMsgLimit is what of most, the workers' part of the message rate, env's actor may use on its own: config
// quotaWorkerMsgShare percent of it (workerPart), and the sender whose messages count against it (the actor's
// task, with every task that holds the same share: projections.State.MessagesSince). 0 and "" when none applies.
func workerMsgLimit(env *Env, most int64) (int64, string) {
	mine := workerPart(env, env.Config.QuotaWorkerMsgShare, MaxQuotaWorkerMsgShare, most)
	if mine == 0 {
		return 0, ""
	}
	return mine, env.Actor.TaskID
}

// workerPart is share percent of part, a part the run's workers share, that env's actor may use on its own (at
// least 1: a part too small to split is not shared out). 0 when none applies: not a worker of a task, or no share
// (0, or whole, the knob's percent that is all of the part and so no limit of its own).
func workerPart(env *Env, share, whole int, part int64) int64 {
	if env.Actor.Role != events.RoleWorker || env.Actor.TaskID == "" || share <= 0 || share >= whole {
		return 0
	}
	return max(1, percentOf(part, int64(share)))
}

// WorkerQuotaShare is what of the quota named quotaName (events.QuotaEvents, QuotaBytes, QuotaMsgRate) cfg gives
// actor, by the rule the quota check decides by: the run's quota, actor's limit, and whether that limit is carved
// from the quota (a worker's, short of the reserve; a quota too small to split is not carved). Replay --explain
// names what a worker's refusal was carved from by it, so its words cannot drift from the check.
func WorkerQuotaShare(cfg projections.Config, actor events.Actor, quotaName string) (quota, limit int64,
	carved bool) {
	switch quotaName {
	case events.QuotaEvents:
		quota = cfg.QuotaEvents
	case events.QuotaBytes:
		quota = cfg.QuotaBytes
	case events.QuotaMsgRate:
		quota = int64(cfg.QuotaMsgsPerMin)
	}
	limit = quotaLimit(&Env{Config: cfg, Actor: actor})(quota)
	return quota, limit, limit < quota
}

// refuseQuota is the refusal of q: the error, and run.quota_exceeded unless
// the run recorded one less than QuotaWindowSec ago.
func refuseQuota(s *projections.State, runID string, q events.RunQuotaExceeded, env *Env) (Decision, error) {
	q.TaskID = env.Actor.TaskID
	code, what := CodeQuotaExceeded, map[string]string{
		events.QuotaEvents: "events in the run", events.QuotaBytes: "bytes of the run's text",
	}[q.Quota]
	// NB: a worker's share is named by the task that holds it: a grandchild's worker uses its delegating worker's.
	holder := s.ShareHolder(runID, q.TaskID)
	switch q.Quota {
	case events.QuotaMsgRate:
		code, what = CodeRateLimit, "messages to the run in the last minute"
	case events.QuotaWorkerMsgRate:
		code, what = CodeRateLimit, "messages from task "+holder+" in the last minute"
	case events.QuotaWorkerEvents:
		what = "events from task " + holder + " in the run"
	case events.QuotaWorkerBytes:
		what = "bytes of text from task " + holder + " in the run"
	}
	rej := reject(code, "quota-"+q.Quota, "%s: run quota exceeded: %d %s + %d > %d (%s quota)",
		q.Method, q.Used, what, q.Adding, q.Max, q.Quota)
	var d Decision
	run, _ := s.Run(runID)
	if noted := run.Usage.QuotaNotedAt; noted == 0 || env.millis()-noted >= events.QuotaWindowSec*1000 {
		p := q
		d.Events = []events.Event{env.event(runID, events.TypeRunQuotaExceeded, &p)}
	}
	return d, rej
}

// QuotaRecheck re-decides a recorded run.quota_exceeded for replay
// --explain: the quota check of the state before it, with the growth the
// event recorded for that quota. It is never submitted by a client.
type QuotaRecheck struct {
	RunID string
	// Recorded is the run.quota_exceeded payload being re-decided.
	Recorded events.RunQuotaExceeded
}

// Kind implements Command.
func (*QuotaRecheck) Kind() string { return "quota.check" }

func (c *QuotaRecheck) decide(s *projections.State, env *Env) (Decision, error) {
	var g Growth
	switch c.Recorded.Quota {
	case events.QuotaEvents, events.QuotaWorkerEvents:
		g.Events = c.Recorded.Adding
	case events.QuotaBytes, events.QuotaWorkerBytes:
		g.Bytes = c.Recorded.Adding
	case events.QuotaMsgRate, events.QuotaWorkerMsgRate:
		g.Msgs = c.Recorded.Adding
	default:
		return Decision{}, badParams("quota.check: unknown quota %q", c.Recorded.Quota)
	}
	q, over := overQuota(s, c.RunID, g, env)
	if !over {
		return Decision{Result: map[string]any{"ok": true}}, nil
	}
	q.Method = c.Recorded.Method
	return refuseQuota(s, c.RunID, q, env)
}

// QuotaRule explains a quota decision in words, for replay --explain.
func QuotaRule(q events.RunQuotaExceeded) string {
	return fmt.Sprintf("quota %s: used %d + adding %d > max %d", q.Quota, q.Used, q.Adding, q.Max)
}
