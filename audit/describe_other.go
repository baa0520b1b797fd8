package audit

import (
	"fmt"
	"strings"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// describeMailbox tells message traffic; bodies are never shown (they may
// be long and are not the audit's business).
func describeMailbox(ev events.Event) string {
	switch p := ev.Payload.(type) {
	case *events.MailboxAppended:
		to := p.To
		if to == events.RunInbox {
			to = "the run inbox"
		}
		s := fmt.Sprintf("%s %s from %s to %s", p.Kind, p.ID, p.From, to)
		if p.Rerouted {
			s += " (rerouted: the attempt of its parent that asked for it ended)"
		}
		return s
	case *events.MailboxDelivered:
		return fmt.Sprintf("message %s delivered to %s", p.MessageID, orDash(p.Recipient))
	case *events.MailboxAcknowledged:
		return fmt.Sprintf("message %s acknowledged by %s", p.MessageID, orDash(p.Recipient))
	case *events.SteerPushed:
		return fmt.Sprintf("steering %s pushed to %s", p.MessageID, p.TaskID)
	}
	return ev.Type
}

// describeAsk tells questions and their ends.
func describeAsk(ev events.Event) string {
	switch p := ev.Payload.(type) {
	case *events.AskRequested:
		return fmt.Sprintf("%s asks %s (timeout %ds)", p.TaskID, p.QuestionID, p.TimeoutSec)
	case *events.AskAnswered:
		return fmt.Sprintf("question %s of %s answered", p.QuestionID, p.TaskID)
	case *events.AskTimedOut:
		if p.Reason != "" { // its task or its run ended first
			return withReason(fmt.Sprintf("question %s of %s closed before its deadline", p.QuestionID, p.TaskID), p.Reason)
		}
		return fmt.Sprintf("question %s of %s timed out", p.QuestionID, p.TaskID)
	}
	return ev.Type
}

// describeCredential tells who got or lost a credential; digests are not
// shown.
func describeCredential(ev events.Event) string {
	switch p := ev.Payload.(type) {
	case *events.CredentialIssued:
		return fmt.Sprintf("%s credential issued for %s", p.Role, p.TaskID)
	case *events.CredentialRevoked:
		return withReason(fmt.Sprintf("credential of %s revoked", p.TaskID), p.Reason)
	}
	return ev.Type
}

// describeEngine tells the admission knobs put in force.
func describeEngine(ev events.Event) string {
	p := events.PayloadAs[events.EngineConfigured](ev)
	if p == nil {
		return ev.Type
	}
	return "config: " + ConfigSummary(projections.ConfigOf(p))
}

// ConfigSummary is the one-line form of the admission knobs; the fair-slot
// and quota knobs follow when any is set (a log written before they existed
// has none), the wait methods when they are off, and the job limits in force
// when any is set.
func ConfigSummary(c projections.Config) string {
	cat := "any model"
	if c.ModelCatalog != nil {
		cat = "catalog [" + strings.Join(c.ModelCatalog, ",") + "]"
	}
	s := fmt.Sprintf("nesting=%t maxDepth=%d maxSlots=%d serialize=%t unmetered=%s %s grace=%ds budgetMode=%s",
		c.NestingEnabled, c.MaxDepth, c.MaxSlots, c.SerializeOnPathOverlap, c.UnmeteredDelegates, cat, c.SettleGraceSec,
		budgetMode(c.BudgetMode))
	if c.SlotShare != 0 || c.SlotWaitSec != 0 || c.QuotaEvents != 0 || c.QuotaBytes != 0 || c.QuotaMsgsPerMin != 0 {
		s += fmt.Sprintf(" slotShare=%d slotWait=%ds quotaEvents=%d quotaBytes=%d quotaMsgsPerMin=%d",
			c.SlotShare, c.SlotWaitSec, c.QuotaEvents, c.QuotaBytes, c.QuotaMsgsPerMin)
	}
	if c.QuotaReserve != 0 {
		s += fmt.Sprintf(" quotaReserve=%d%%", c.QuotaReserve)
	}
	if c.QuotaWorkerMsgShare != 0 {
		s += fmt.Sprintf(" quotaWorkerMsgShare=%d%%", c.QuotaWorkerMsgShare)
	}
	if c.QuotaWorkerShare != 0 {
		s += fmt.Sprintf(" quotaWorkerShare=%d%%", c.QuotaWorkerShare)
	}
	if !c.WaitMethodsEnabled {
		s += " waitMethods=false"
	}
	if c.ProxyPayloadBytes != 0 || c.ProxyManifestBytes != 0 || c.ProxyMaxInFlight != 0 || c.ProxyMaxRequests != 0 ||
		c.RevokedRootLimit != 0 {
		j := c.JobLimits()
		s += fmt.Sprintf(" proxyPayloadBytes=%d proxyManifestBytes=%d proxyMaxInFlight=%d proxyMaxRequests=%d "+
			"revokedRootLimit=%d", j.PayloadBytes, j.ManifestBytes, j.MaxInFlight, j.MaxRequests, j.RevokedRoots)
	}
	if c.RerouteEndedAttempts {
		s += " rerouteEndedAttempts=true"
	}
	if c.ShareByDelegator {
		s += " shareByDelegator=true"
	}
	if c.WorkerSlotShare {
		s += " workerSlotShare=true"
	}
	return s
}
