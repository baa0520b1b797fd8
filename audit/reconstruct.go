package audit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// promptNotRecorded stands in for the prompt of a rejected request: the
// prompt is recorded only on admission, and no policy check reads it.
const promptNotRecorded = "(prompt not recorded on a rejection)"

// importedFrom begins Today of an imported decision, which is not decided again; the importing system's name
// follows.
const importedFrom = "not decided again: imported from "

// explainGroup re-runs the decision recorded as group against s, the state
// just before it. ok is false for groups that are not decisions audit
// explains (run and task transitions, messages, ...).
func explainGroup(s *projections.State, group []events.Event) (Decision, bool) {
	first := group[0]
	d := Decision{
		Position: first.Position, Last: group[len(group)-1].Position, Time: time.Unix(0, first.Time).UTC(),
		Run: first.Stream, Actor: first.Actor.String(),
	}
	var (
		cmd commands.Command
		id  string // what the recorded decision minted
	)
	switch first.Type {
	case events.TypeDelegateRequested, events.TypeDelegateRejected, events.TypeDelegateAdmitted:
		// NB: an admission that opens its group has no request before it: only an import writes one (pi-crew's
		// files can hold an admission line alone), and it is explained as that system's decision below.
		if !slices.ContainsFunc(group, decidesDelegation) {
			return d, false // NB: a request without its decision, which only an import writes, decided nothing
		}
		var sub string
		cmd, sub = requestFrom(group)
		d.Command, d.Subject = "delegate.request", sub
		if sub == "" {
			d.Subject = cmd.(*commands.DelegateRequest).TaskID
		}
		id = strings.TrimPrefix(sub, "gc-")
	case events.TypeEngineConfigured:
		p := events.PayloadAs[events.EngineConfigured](first)
		if p == nil {
			return d, false
		}
		d.Command = "engine.configure"
		cmd = &commands.Configure{Config: projections.ConfigOf(p)}
	case events.TypeRunQuotaExceeded:
		p := events.PayloadAs[events.RunQuotaExceeded](first)
		if p == nil {
			return d, false
		}
		cmd = &commands.QuotaRecheck{RunID: first.Stream, Recorded: *p}
		d.Command, d.Subject = p.Method, p.TaskID
	case events.TypeTaskUsage:
		p := events.PayloadAs[events.TaskUsage](first)
		if p == nil || len(group) == 1 {
			return d, false // NB: a report that crossed no threshold of its run's budget decided nothing
		}
		cmd = &commands.TaskUsage{RunID: first.Stream, TaskID: p.TaskID, Input: p.Input, Output: p.Output,
			CacheRead: p.CacheRead, CacheWrite: p.CacheWrite, Cost: p.Cost, Turns: p.Turns}
		d.Command, d.Subject = cmd.Kind(), p.TaskID
	case events.TypeRunBudgetWarning, events.TypeRunBudgetAbort:
		// NB: crewlog records a threshold crossed after the usage report that crossed it (above); one alone only
		// an import writes (pi-crew's files hold it as a line of its own), explained below as that system's.
		if !imported(first) {
			return d, false
		}
		cmd = &commands.TaskUsage{RunID: first.Stream}
		d.Command = cmd.Kind()
	case events.TypePolicyAction:
		p := events.PayloadAs[events.PolicyAction](first)
		if p == nil {
			return d, false
		}
		if cmd = waitMethodFrom(first.Stream, p); cmd == nil {
			return d, false
		}
		d.Command, d.Subject = p.Action, p.TaskID
	case events.TypeCredentialRevoked:
		p := events.PayloadAs[events.CredentialRevoked](first)
		if p == nil || len(group) == 1 {
			return d, false // NB: a revocation that closed no question, and cleared no lease, decided nothing more
		}
		cmd = &commands.CredentialRevoke{RunID: first.Stream, TaskID: p.TaskID, Reason: p.Reason}
		d.Command, d.Subject = cmd.Kind(), p.TaskID
	case events.TypeAskTimedOut:
		// NB: a run's, a revocation's or a settlement's end closes a question after that end's event, but a
		// task.transition that ends or retries a task parked on one closes it first, before the task's event: no
		// engine decision, which ask.expire, re-run on a task still parked before the deadline, refuses. The engine
		// clock's ask.expire records the question's end and its task's resumption alone. One imported is that
		// system's record.
		p := events.PayloadAs[events.AskTimedOut](first)
		if p == nil || imported(first) || !closesQuestionsAlone(group) {
			return d, false
		}
		cmd = &commands.AskExpire{RunID: first.Stream, QuestionID: p.QuestionID}
		d.Command, d.Subject = cmd.Kind(), p.QuestionID
	case events.TypeMailboxAppended:
		var ok bool
		if cmd, id, ok = settlementFrom(group); !ok {
			return d, false
		}
		d.Command = cmd.Kind()
		d.Subject = SettledPayload(settledEvent(group).Payload).SubID
	case events.TypeDelegateCompleted, events.TypeDelegateFailed, events.TypeDelegateTimedOut,
		events.TypeDelegateCancelled:
		// NB: crewlog's own settlement opens with its result message (above); one without it only an import
		// writes (pi-crew's files hold a delegation's end as its terminal line alone), explained below as that
		// system's decision.
		term := SettledPayload(first.Payload)
		if term == nil || !imported(first) {
			return d, false
		}
		cmd = settleCommand(first.Stream, first.Type, term)
		d.Command, d.Subject = cmd.Kind(), term.SubID
	default:
		if isJobFamily(first.Type) {
			return explainJob(s, group, d)
		}
		return d, false
	}
	if source, ok := strings.CutPrefix(first.CorrelationID, events.ImportCorrelation); ok {
		// NB: another system decided it, under its own config and state (commands.Import records it as it was
		// mapped): today's policy deciding the request otherwise is no drift of crewlog's.
		d.Recorded = outcome(group, nil)
		d.Today = importedFrom + source
		d.Rule = rule(s, s.Config(), cmd, group, nil)
		return d, true
	}
	env := commands.Env{
		Config: s.Config(), Now: first.Time, Actor: first.Actor, CommandID: first.CommandID,
		NewID: func() string { return id },
	}
	dec, err := commands.Decide(s, cmd, env)
	d.Recorded = outcome(group, nil)
	d.Today = outcome(dec.Events, err)
	d.Rule = rule(s, env.Config, cmd, dec.Events, err)
	compare(&d, group, dec.Events)
	return d, true
}

// closesQuestionsAlone reports whether group records nothing but questions' ends and tasks' resumptions, as the
// engine clock's ask.expire decides.
func closesQuestionsAlone(group []events.Event) bool {
	return !slices.ContainsFunc(group, func(ev events.Event) bool {
		return ev.Type != events.TypeAskTimedOut && ev.Type != events.TypeTaskResumed
	})
}

// imported reports whether ev was recorded by an import: another system's decision, not crewlog's.
func imported(ev events.Event) bool {
	return strings.HasPrefix(ev.CorrelationID, events.ImportCorrelation)
}

// compare sets d's drift: where today's events differ from the recorded
// group.
func compare(d *Decision, group, today []events.Event) {
	diffs, derr := Diff(comparable(group, group), comparable(today, group))
	if derr != nil {
		diffs = []Difference{{Path: "$", Left: "(events)", Right: derr.Error()}}
	}
	d.Differences = collapse(diffs)
	d.Drift = len(diffs) > 0
}

// requestFrom rebuilds the DelegateRequest recorded by a request group:
// delegate.requested (absent for nesting-disabled, and from an imported
// admission alone) and the decision. The
// policy inputs recorded with the decision give the requested budget,
// model, timeout and trust; an admission also gives the prompt,
// description and maxTurns.
func requestFrom(group []events.Event) (*commands.DelegateRequest, string) {
	first := group[0]
	c := &commands.DelegateRequest{RunID: first.Stream, Prompt: promptNotRecorded}
	var (
		sub string
		pol *events.Policy
		adm *events.DelegateAdmitted
	)
	for _, ev := range group {
		switch p := ev.Payload.(type) {
		case *events.DelegateRequested:
			c.TaskID, sub = p.TaskID, p.SubID
			c.Role = &p.Role
		case *events.DelegateRejected:
			c.TaskID, pol = p.TaskID, p.Policy
			if sub == "" {
				sub = p.SubID
			}
		case *events.DelegateAdmitted:
			c.TaskID, pol, adm = p.TaskID, p.Policy, p
			if sub == "" {
				sub = p.SubID
			}
		}
	}
	if adm != nil {
		c.Prompt = adm.Prompt
		if adm.Description != "" {
			c.Description = &adm.Description
		}
		if adm.MaxTurns > 0 {
			c.MaxTurns = &adm.MaxTurns
		}
		if pol == nil {
			c.Model, c.BudgetTokens, c.TimeoutSec = &adm.Model, &adm.ReservedTokens, &adm.TimeoutSec
		}
	}
	if pol != nil {
		if c.Role == nil && pol.Role != "" {
			c.Role = &pol.Role
		}
		if pol.Model != "" {
			c.Model = &pol.Model
		}
		c.BudgetTokens, c.TimeoutSec, c.Untrusted = &pol.Requested, &pol.TimeoutSec, !pol.Trusted
	}
	return c, sub
}

// decidesDelegation reports whether ev is a delegation request's decision.
func decidesDelegation(ev events.Event) bool {
	return ev.Type == events.TypeDelegateAdmitted || ev.Type == events.TypeDelegateRejected
}

// waitMethodFrom rebuilds the wait method a policy switch refused (policy.action): the switch is checked after only
// the shape of what the method carries, which the stand-ins for the question and its id (the refusal records
// neither) pass, so they decide nothing. nil for an action audit does not know.
func waitMethodFrom(run string, p *events.PolicyAction) commands.Command {
	switch p.Action {
	case "wait.request":
		return &commands.WaitRequest{RunID: run, TaskID: p.TaskID, Question: notRecorded}
	case "wait.resolve":
		return &commands.WaitResolve{RunID: run, TaskID: p.TaskID, QuestionID: notRecorded}
	}
	return nil
}

// notRecorded stands in for a parameter a refusal does not record and its rule does not read.
const notRecorded = "(not recorded)"

// settlementFrom rebuilds a delegate.settle (or, for a timeout the engine
// clock decided, a delegate.expire) from its events: the result message, an
// optional charge and the terminal event. id is what the decision minted:
// the message id's suffix.
func settlementFrom(group []events.Event) (commands.Command, string, bool) {
	msg := events.PayloadAs[events.MailboxAppended](group[0])
	last := settledEvent(group)
	term := SettledPayload(last.Payload)
	if msg == nil || term == nil || !strings.HasPrefix(msg.From, events.ResultSenderPrefix) {
		return nil, "", false
	}
	id := msg.ID
	if i := strings.LastIndexByte(id, '_'); i >= 0 {
		id = id[i+1:]
	}
	if last.Type == events.TypeDelegateTimedOut && term.Expired {
		return &commands.DelegateExpire{RunID: last.Stream, SubID: term.SubID}, id, true
	}
	return settleCommand(last.Stream, last.Type, term), id, true
}

// settleCommand rebuilds the delegate.settle that ended a delegation with the terminal event of type typ, term its
// payload.
func settleCommand(run, typ string, term *events.DelegateSettled) *commands.DelegateSettle {
	out := map[string]string{
		events.TypeDelegateCompleted: commands.OutcomeOK, events.TypeDelegateFailed: commands.OutcomeFailed,
		events.TypeDelegateTimedOut: commands.OutcomeTimedOut, events.TypeDelegateCancelled: commands.OutcomeCancelled,
	}[typ]
	c := &commands.DelegateSettle{RunID: run, SubID: term.SubID, Outcome: out, Text: "(result text)"}
	if term.UsageTokens > 0 {
		c.UsageTokens = &term.UsageTokens
	}
	return c
}

// settledEvent is the terminal delegate event of a settlement's group: its
// last event but the lease.cleared that may follow it (the settled shadow
// task was a job's worker).
func settledEvent(group []events.Event) events.Event {
	last := group[len(group)-1]
	for i := len(group) - 1; i > 0 && last.Type == events.TypeLeaseCleared; i-- {
		last = group[i-1]
	}
	return last
}

// SettledPayload returns the payload of a terminal delegate event (its four
// types share one shape), or nil for any other payload.
func SettledPayload(payload any) *events.DelegateSettled {
	switch p := payload.(type) {
	case *events.DelegateCompleted:
		return (*events.DelegateSettled)(p)
	case *events.DelegateFailed:
		return (*events.DelegateSettled)(p)
	case *events.DelegateTimedOut:
		return (*events.DelegateSettled)(p)
	case *events.DelegateCancelled:
		return (*events.DelegateSettled)(p)
	}
	return nil
}

// outcome summarises a decision's events (and error): "admitted gc-…",
// "rejected: slots-exhausted", "completed, charged 5000", ...
func outcome(evs []events.Event, err error) string {
	var parts []string
	for _, ev := range evs {
		switch p := ev.Payload.(type) {
		case *events.DelegateAdmitted:
			parts = append(parts, "admitted "+p.SubID)
		case *events.DelegateRejected:
			parts = append(parts, "rejected: "+p.Reason)
		case *events.BudgetReserved:
			parts = append(parts, fmt.Sprintf("reserved %d", p.Tokens))
		case *events.BudgetCharged:
			parts = append(parts, fmt.Sprintf("charged %d", p.Tokens))
		case *events.EngineConfigured:
			parts = append(parts, "config changed")
		case *events.RunQuotaExceeded:
			parts = append(parts, "refused: "+p.Quota+" quota")
		case *events.PolicyAction:
			parts = append(parts, "refused: "+p.Reason)
		case *events.AskRequested:
			parts = append(parts, "question asked")
		case *events.RunBudgetWarning:
			parts = append(parts, "budget warning")
		case *events.TaskBudgetFairShare:
			parts = append(parts, "fair share passed")
		case *events.RunBudgetAbort:
			parts = append(parts, "budget abort")
		case *events.TaskCancelled:
			parts = append(parts, p.TaskID+" cancelled")
		case *events.TaskSkipped:
			parts = append(parts, p.TaskID+" skipped")
		case *events.RunFailed:
			parts = append(parts, "run failed")
		case *events.CredentialRevoked:
			parts = append(parts, "credential revoked")
		case *events.AskTimedOut:
			parts = append(parts, "question "+p.QuestionID+" closed")
		case *events.TaskResumed:
			parts = append(parts, p.TaskID+" resumed")
		case *events.MailboxAppended:
			if p.Rerouted {
				parts = append(parts, "result rerouted to the run inbox")
			}
		default:
			if t := SettledPayload(ev.Payload); t != nil {
				parts = append(parts, strings.TrimPrefix(ev.Type, "delegate."))
			}
		}
	}
	var rej *commands.RejectedError
	if len(evs) == 0 {
		switch {
		case errors.As(err, &rej):
			return fmt.Sprintf("refused with no event: %s (%s)", rej.Code, rej.Reason)
		case err != nil:
			return "error: " + err.Error()
		}
		return "no event (nothing to change)"
	}
	if len(parts) == 0 {
		return "recorded"
	}
	return strings.Join(parts, ", ")
}

// rule names the rule that decided cmd today, with the inputs it read.
func rule(s *projections.State, cfg projections.Config, cmd commands.Command, evs []events.Event, err error) string {
	var rej *commands.RejectedError
	if len(evs) == 0 && errors.As(err, &rej) {
		return fmt.Sprintf("%s: %s", rej.Reason, rej.Message)
	}
	switch c := cmd.(type) {
	case *commands.DelegateRequest:
		for _, ev := range evs {
			switch p := ev.Payload.(type) {
			case *events.DelegateRejected:
				return RejectionRule(p)
			case *events.DelegateAdmitted:
				return admissionRule(s, c.RunID, p)
			}
		}
	case *commands.DelegateSettle, *commands.DelegateExpire:
		return settlementRule(s, cfg, cmd, evs)
	case *commands.Configure:
		if len(evs) == 0 {
			return "config unchanged: nothing recorded"
		}
		return "config change: " + configChange(s.Config(), c.Config)
	case *commands.WaitRequest, *commands.WaitResolve:
		for _, ev := range evs {
			if p, ok := ev.Payload.(*events.PolicyAction); ok {
				return fmt.Sprintf("%s (%s)", p.Reason, p.Policy)
			}
		}
		if err == nil {
			return "broker.waitMethodsEnabled=true: not refused"
		}
	case *commands.TaskUsage:
		return budgetRule(s, c, evs)
	case *commands.AskExpire:
		return askExpiryRule(s, c, evs)
	case *commands.CredentialRevoke:
		r := withReason(fmt.Sprintf("credential of %s revoked", c.TaskID), c.Reason)
		if q := closedQuestions(evs, "its task"); q != "" {
			r += "; " + q
		}
		return r
	case *commands.QuotaRecheck:
		for _, ev := range evs {
			if p, ok := ev.Payload.(*events.RunQuotaExceeded); ok {
				return commands.QuotaRule(*p) + reserveCarved(cfg, ev.Actor, p, s.ShareHolder(c.RunID, p.TaskID))
			}
		}
		if err == nil {
			return fmt.Sprintf("within quota %s (max %d) today", c.Recorded.Quota, c.Recorded.Max)
		}
	}
	if err != nil {
		return err.Error()
	}
	return "-"
}

// reserveCarved names what a worker's quota limit is carved from: the run's quota less the reserve (config
// quotaReserve) its orchestrator and the admin alone may use, and for a worker's share the task that holds it
// (holder: the refused worker's task, or under shareByDelegator the workflow task whose delegation started it). ""
// for another actor, or a quota too small to split (a worker's limit is then the quota).
func reserveCarved(cfg projections.Config, actor events.Actor, q *events.RunQuotaExceeded, holder string) string {
	switch q.Quota {
	case events.QuotaWorkerMsgRate:
		quota, part, _ := commands.WorkerQuotaShare(cfg, actor, events.QuotaMsgRate)
		return fmt.Sprintf(", one worker's share: the quotaWorkerMsgShare of %d%% of the %d messages a minute the run's "+
			"workers share (the run's %d less its quotaReserve of %d%%)", cfg.QuotaWorkerMsgShare, part, quota,
			cfg.QuotaReserve)
	case events.QuotaWorkerEvents, events.QuotaWorkerBytes:
		of, what := events.QuotaEvents, "events"
		if q.Quota == events.QuotaWorkerBytes {
			of, what = events.QuotaBytes, "bytes of text"
		}
		quota, part, _ := commands.WorkerQuotaShare(cfg, actor, of)
		counted := "as its actor"
		if cfg.ShareByDelegator {
			counted = "with the delegations it started and their results"
		}
		return fmt.Sprintf(", one worker's share: the quotaWorkerShare of %d%% of the %d %s the run's workers share "+
			"(the run's %d less its quotaReserve of %d%%), counted by what task %s appended %s", cfg.QuotaWorkerShare,
			part, what, quota, cfg.QuotaReserve, holder, counted)
	}
	quota, _, carved := commands.WorkerQuotaShare(cfg, actor, q.Quota)
	if !carved {
		return ""
	}
	return fmt.Sprintf(", a worker's share: the run's quota %d less the quotaReserve of %d%% kept for its orchestrator "+
		"and the admin", quota, cfg.QuotaReserve)
}

func admissionRule(s *projections.State, runID string, p *events.DelegateAdmitted) string {
	pol := p.Policy
	if pol == nil {
		return "admitted"
	}
	checks := fmt.Sprintf("depth %d <= %d, slots %d/%d", pol.ChildDepth, pol.MaxDepth, pol.Held, pol.Capacity)
	if pol.Waiting > 0 {
		// NB: the fair-slot rule decided too: with other runs waiting, a run at its share is refused.
		checks += fmt.Sprintf(", the run holds %d < its share %d while %d other run(s) wait", pol.RunHeld, pol.SlotShare,
			pol.Waiting)
	}
	if p.Unmetered {
		why := "the run has no budgetTotal and the parent no allocation"
		if run, ok := s.Run(runID); ok && run.BudgetUnlimited {
			why = "the run's budget is unlimited"
		}
		return fmt.Sprintf("admitted: unmetered (%s; unmeteredDelegates=%s), %s", why, orDash(pol.UnmeteredDelegates),
			checks)
	}
	return fmt.Sprintf("admitted: metered (budget mode %s), within grant (reserves %d of remaining %s), %s",
		budgetMode(pol.BudgetMode), pol.Requested, remainingInputs(pol), checks)
}

// budgetRule names the thresholds of its run's budget a usage report crossed, with the numbers compared: the
// thresholds are the run's (its manifest's budgetWarning and budgetAbort fractions) or the defaults.
func budgetRule(s *projections.State, c *commands.TaskUsage, evs []events.Event) string {
	run, _ := s.Run(c.RunID)
	percent := func(f *float64, def float64) float64 { return math.Round(commands.Threshold(f, def)*1e4) / 1e2 }
	var rules []string
	for _, ev := range evs {
		switch p := ev.Payload.(type) {
		case *events.RunBudgetWarning:
			rules = append(rules, fmt.Sprintf("run budget %d of %d used >= the warning at %g%%", p.BudgetUsed, p.BudgetTotal,
				percent(run.BudgetWarning, commands.DefaultBudgetWarning)))
		case *events.RunBudgetAbort:
			r := fmt.Sprintf("run budget %d of %d used >= the abort at %g%%", p.BudgetUsed, p.BudgetTotal,
				percent(run.BudgetAbort, commands.DefaultBudgetAbort))
			if slices.ContainsFunc(evs, func(ev events.Event) bool { return ev.Type == events.TypeRunFailed }) {
				r += ": its live tasks end and the run fails" // NB: a run already ended records the abort alone
			}
			rules = append(rules, r)
		case *events.TaskBudgetFairShare:
			rules = append(rules, fmt.Sprintf("task %s uses %d > %g%% of the run budget", p.TaskID, p.TaskUsage,
				commands.FairShareFraction*100))
		}
	}
	if len(rules) == 0 {
		return "no threshold of the run's budget crossed today"
	}
	return strings.Join(rules, "; ")
}

// budgetMode names a recorded budget mode; absent is the default.
func budgetMode(m string) string {
	if m == "" {
		return events.BudgetModePicrew
	}
	return m
}

// remainingInputs shows how a metered decision found what remained: the
// parent's grant less its spend and, in nested mode for a workflow task,
// the run pool less the spend of the run's workflow tasks.
func remainingInputs(pol *events.Policy) string {
	own := pol.Granted - pol.Spent
	s := fmt.Sprintf("%d = %d granted - %d spent", own, pol.Granted, pol.Spent)
	if pol.RunPool > 0 || pol.RunSpent > 0 {
		s = fmt.Sprintf("%d = min(%d granted - %d spent, run pool %d budgetTotal - %d spent by its workflow tasks)",
			min(own, pol.RunPool-pol.RunSpent), pol.Granted, pol.Spent, pol.RunPool, pol.RunSpent)
	}
	return s
}

func settlementRule(s *projections.State, cfg projections.Config, cmd commands.Command, evs []events.Event) string {
	var runID, subID string
	switch c := cmd.(type) {
	case *commands.DelegateSettle:
		runID, subID = c.RunID, c.SubID
	case *commands.DelegateExpire:
		runID, subID = c.RunID, c.SubID
	}
	d, ok := s.Delegation(runID, subID)
	if !ok {
		return "delegation not found"
	}
	var b strings.Builder
	if _, expire := cmd.(*commands.DelegateExpire); expire {
		fmt.Fprintf(&b, "expired: deadline %s + grace %ds passed; ",
			time.UnixMilli(d.Deadline).UTC().Format(time.RFC3339), cfg.SettleGraceSec)
	}
	var usage int64
	if c, ok := cmd.(*commands.DelegateSettle); ok && c.UsageTokens != nil {
		usage = *c.UsageTokens
	}
	switch {
	case !d.Metered:
		b.WriteString("unmetered: nothing charged")
	case usage > d.Reserved:
		fmt.Fprintf(&b, "usage %d > reserved %d: charged %d", usage, d.Reserved, usage-d.Reserved)
		for _, ev := range evs {
			if p := events.PayloadAs[events.BudgetCharged](ev); p != nil && p.Uncharged > 0 {
				b.Reset()
				fmt.Fprintf(&b, "usage %d > reserved %d: charged %d, %d uncharged (budget mode %s: %s)",
					usage, d.Reserved, p.Tokens, p.Uncharged, budgetMode(cfg.BudgetMode), chargeCapped)
			}
		}
	default:
		fmt.Fprintf(&b, "usage %d within reserved %d: no charge, no refund", usage, d.Reserved)
	}
	for _, ev := range evs {
		if p := events.PayloadAs[events.MailboxAppended](ev); p != nil && p.Rerouted {
			fmt.Fprintf(&b, "; result rerouted to the run inbox (%s)", rerouteReason(s, d))
		}
	}
	if q := closedQuestions(evs, "its shadow task"); q != "" {
		b.WriteString("; " + q)
	}
	b.WriteString("; slot freed")
	return b.String()
}

// askExpiryRule says why the engine clock closed the question of c (commands' AskExpire), with the deadline it
// compared: passed, or not yet with its asker no longer parked on it (asker-ended) or its run ended (run-ended).
func askExpiryRule(s *projections.State, c *commands.AskExpire, evs []events.Event) string {
	a, ok := s.Ask(c.RunID, c.QuestionID)
	if !ok {
		return "question not found"
	}
	deadline := time.UnixMilli(a.Deadline).UTC().Format(time.RFC3339)
	var r string
	for _, ev := range evs {
		p := events.PayloadAs[events.AskTimedOut](ev)
		switch {
		case p == nil:
			continue
		case a.Status != projections.AskPending:
			r = fmt.Sprintf("question %s was %s already: the park of the run on it is cleared", c.QuestionID, a.Status)
		case p.Reason == "":
			r = fmt.Sprintf("expired: question %s of %s, deadline %s passed", c.QuestionID, p.TaskID, deadline)
		default:
			r = fmt.Sprintf("question %s of %s closed before its deadline %s (%s)", c.QuestionID, p.TaskID, deadline,
				p.Reason)
		}
	}
	for _, ev := range evs {
		if p := events.PayloadAs[events.TaskResumed](ev); p != nil {
			r += fmt.Sprintf("; %s resumed", p.TaskID)
		}
	}
	return r
}

// closedQuestions says, for each question evs close (ask.timedout), which task of the decision's was parked on it
// (whose names that task: "its task") and how it closed: before its deadline for the reason recorded (the asker's
// end: nobody can answer it any more), or timed out, its deadline passed. "" when evs close none.
func closedQuestions(evs []events.Event, whose string) string {
	var parts []string
	for _, ev := range evs {
		p := events.PayloadAs[events.AskTimedOut](ev)
		if p == nil {
			continue
		}
		how := "timed out, its deadline passed"
		if p.Reason != "" {
			how = fmt.Sprintf("closed before its deadline (%s): nobody can answer it any more", p.Reason)
		}
		parts = append(parts, fmt.Sprintf("%s %s was parked on question %s: %s", whose, p.TaskID, p.QuestionID, how))
	}
	return strings.Join(parts, "; ")
}

// rerouteReason says why the settlement of d delivered its result to the run inbox, with what the engine read
// (commands' parentEnded): the parent task is gone or ended, or else the attempt of it that made d has ended, a retry
// having started another since (the rule rerouteEndedAttempts puts in force).
func rerouteReason(s *projections.State, d projections.Delegation) string {
	status, retries, found := s.TaskAttempt(d.RunID, d.ParentTaskID)
	switch {
	case !found:
		return fmt.Sprintf("parent task %s not found", d.ParentTaskID)
	case status.Terminal():
		return fmt.Sprintf("parent task %s is %s", d.ParentTaskID, status)
	}
	return fmt.Sprintf("the attempt %d of parent task %s that made it has ended: the task was retried since, "+
		"attempt %d now; rerouteEndedAttempts=true", d.ParentAttempt, d.ParentTaskID, retries)
}

// configChange lists the knobs that differ. A job limit shows as the config holds it: 0 keeps the dispatcher's
// value (projections.Config.JobLimits).
func configChange(from, to projections.Config) string {
	var ch []string
	add := func(name string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			ch = append(ch, fmt.Sprintf("%s %v -> %v", name, a, b))
		}
	}
	catalog := func(c []string) string {
		if c == nil {
			return "any"
		}
		return "[" + strings.Join(c, ",") + "]"
	}
	add("nesting", from.NestingEnabled, to.NestingEnabled)
	add("maxDepth", from.MaxDepth, to.MaxDepth)
	add("maxSlots", from.MaxSlots, to.MaxSlots)
	add("serialize", from.SerializeOnPathOverlap, to.SerializeOnPathOverlap)
	add("unmetered", from.UnmeteredDelegates, to.UnmeteredDelegates)
	add("catalog", catalog(from.ModelCatalog), catalog(to.ModelCatalog))
	add("grace", from.SettleGraceSec, to.SettleGraceSec)
	add("slotShare", from.SlotShare, to.SlotShare)
	add("slotWait", from.SlotWaitSec, to.SlotWaitSec)
	add("quotaEvents", from.QuotaEvents, to.QuotaEvents)
	add("quotaBytes", from.QuotaBytes, to.QuotaBytes)
	add("quotaMsgsPerMin", from.QuotaMsgsPerMin, to.QuotaMsgsPerMin)
	add("quotaReserve", from.QuotaReserve, to.QuotaReserve)
	add("quotaWorkerMsgShare", from.QuotaWorkerMsgShare, to.QuotaWorkerMsgShare)
	add("quotaWorkerShare", from.QuotaWorkerShare, to.QuotaWorkerShare)
	add("budgetMode", budgetMode(from.BudgetMode), budgetMode(to.BudgetMode))
	add("waitMethods", from.WaitMethodsEnabled, to.WaitMethodsEnabled)
	add("proxyPayloadBytes", from.ProxyPayloadBytes, to.ProxyPayloadBytes)
	add("proxyManifestBytes", from.ProxyManifestBytes, to.ProxyManifestBytes)
	add("proxyMaxInFlight", from.ProxyMaxInFlight, to.ProxyMaxInFlight)
	add("proxyMaxRequests", from.ProxyMaxRequests, to.ProxyMaxRequests)
	add("revokedRootLimit", from.RevokedRootLimit, to.RevokedRootLimit)
	add("rerouteEndedAttempts", from.RerouteEndedAttempts, to.RerouteEndedAttempts)
	add("shareByDelegator", from.ShareByDelegator, to.ShareByDelegator)
	add("workerSlotShare", from.WorkerSlotShare, to.WorkerSlotShare)
	if len(ch) == 0 {
		return "none"
	}
	return strings.Join(ch, ", ")
}

// comparable is the form in which recorded and decided events are compared:
// type, stream and payload. The result message's body is left out (its text
// is not recorded anywhere else, so it cannot be re-derived), and so is a
// payload's policy when the recorded event has none (older writers).
func comparable(evs []events.Event, recorded []events.Event) []map[string]any {
	out := make([]map[string]any, 0, len(evs))
	for i, ev := range evs {
		p, _ := generic(ev.Payload)
		m, _ := p.(map[string]any)
		if m != nil {
			if ev.Type == events.TypeMailboxAppended {
				delete(m, "body")
			}
			if i < len(recorded) {
				if rp, _ := generic(recorded[i].Payload); rp != nil {
					if rm, ok := rp.(map[string]any); ok {
						if _, has := rm["policy"]; !has {
							delete(m, "policy")
						}
					}
				}
			}
		}
		out = append(out, map[string]any{"type": ev.Type, "stream": ev.Stream, "payload": p})
	}
	return out
}

// collapse keeps only the type difference of an event whose type changed:
// its payload fields all differ, which says nothing more.
func collapse(diffs []Difference) []Difference {
	changed := map[string]bool{}
	for _, d := range diffs {
		if prefix, ok := strings.CutSuffix(d.Path, ".type"); ok {
			changed[prefix+"."] = true
		}
	}
	out := diffs[:0]
	for _, d := range diffs {
		if i := strings.Index(d.Path, "]."); i >= 0 && changed[d.Path[:i+2]] && !strings.HasSuffix(d.Path, ".type") {
			continue
		}
		out = append(out, d)
	}
	return out
}
