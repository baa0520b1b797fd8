package audit

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Job decisions (D§9, commands/job*.go) are explained like the others: the
// command is rebuilt from what its events recorded and decided again on the
// state just before it. A proxy message's nonce is recorded as nothing but
// the job's digest, so a message that passed the nonce check is rebuilt with
// the job's digest and one refused for its nonce with a digest no nonce has.
// A grant is recorded by its fingerprints only, so the decisions that read a
// whole grant (job.create, a continue, manifest.revalidate) are explained
// from their recorded inputs and not decided again (Today says so).

// isJobFamily reports whether an event type belongs to jobs.
func isJobFamily(typ string) bool {
	family, _, _ := strings.Cut(typ, ".")
	return family == "job" || family == "lease" || family == "proxy" || family == "manifest"
}

// jobDecisionStarts reports whether an event of a job decision without a
// command id starts a decision of its own (after last), rather than
// following the events of the one before in the same clock reading.
func jobDecisionStarts(last, ev events.Event) bool {
	switch ev.Type {
	case events.TypeJobStatusChanged:
		return last.Type != events.TypeLeaseCleared && last.Type != events.TypeLeaseOpened &&
			last.Type != events.TypeManifestRevalidationFailed
	case events.TypeLeaseOpened:
		return last.Type != events.TypeManifestRevalidated
	case events.TypeLeaseCleared:
		// A lease is cleared after a manager's refused call, and after the
		// event that ended its worker (an expiry's settlement among them),
		// with the reason that says so: a manager's lease.clear or
		// job.transition read at the same clock as a worker's end, another
		// job's or one that held no lease, is a decision of its own.
		_, _, ended := commands.EndedWorker(last)
		p := events.PayloadAs[events.LeaseCleared](ev)
		return last.Type != events.TypeProxyRejected && !(ended && p != nil && p.Reason == commands.LeaseReasonWorkerEnded)
	case events.TypeProxyRejected:
		return last.Type != events.TypeManifestRevalidationFailed
	case events.TypeProxyCancelled:
		p := events.PayloadAs[events.ProxyCancelled](ev)
		return last.Type != events.TypeProxyCancelled || p == nil || p.By != "disconnect"
	}
	return isJobFamily(ev.Type)
}

// notRedecided marks a decision whose command cannot be rebuilt whole.
const notRedecided = "not decided again: the grant is recorded by its fingerprints only"

// explainJob explains a job decision group.
func explainJob(s *projections.State, group []events.Event, d Decision) (Decision, bool) {
	first := group[0]
	cmd, subject := jobCommandFrom(s, group)
	d.Subject = subject
	d.Recorded = jobOutcome(group, nil)
	if cmd == nil {
		d.Command = jobCommandName(group)
		d.Today = notRedecided
		d.Rule = jobRule(group, nil)
		return d, true
	}
	d.Command = cmd.Kind()
	env := commands.Env{Config: s.Config(), Now: first.Time, Actor: first.Actor, CommandID: first.CommandID}
	dec, err := commands.Decide(s, cmd, env)
	d.Today = jobOutcome(dec.Events, err)
	d.Rule = jobRule(dec.Events, err)
	compare(&d, group, dec.Events)
	return d, true
}

// jobCommandName names the command of a group not decided again.
func jobCommandName(group []events.Event) string {
	switch p := group[0].Payload.(type) {
	case *events.JobCreated:
		return "job.create"
	case *events.JobRejected:
		if p.Op == "create" {
			return "job.create"
		}
		return p.Op
	case *events.ManifestRevalidated:
		if p.Mode == events.RevalidateCall {
			return "manifest.revalidate"
		}
	case *events.ManifestRevalidationFailed:
		if p.Mode == events.RevalidateCall {
			return "manifest.revalidate"
		}
	}
	return "lease.open"
}

// noNonce is a digest no nonce has: a message refused for its nonce is
// rebuilt with it.
var noNonce = strings.Repeat("0", 64)

// sized is a JSON value of exactly n bytes (at least 2), for a payload the
// log records by its size only.
func sized(n int64) json.RawMessage {
	if n < 2 {
		n = 2
	}
	return json.RawMessage(`"` + strings.Repeat("x", int(n-2)) + `"`)
}

// sizedResult is a result object of about n bytes.
func sizedResult(n int64) json.RawMessage {
	const frame = len(`{"content":""}`)
	if n < int64(frame) {
		return json.RawMessage(`{"content":""}`)
	}
	return json.RawMessage(`{"content":"` + strings.Repeat("x", int(n)-frame) + `"}`)
}

// jobCommandFrom rebuilds the command of a job decision, or nil when it
// cannot be rebuilt whole; subject is "job/request" or the job.
func jobCommandFrom(s *projections.State, group []events.Event) (commands.Command, string) {
	first := group[0]
	run := first.Stream
	header := func(job string) projections.JobHeader { h, _ := s.JobHeader(run, job); return h }
	switch p := first.Payload.(type) {
	case *events.ProxyRequested:
		h := header(p.JobID)
		return &commands.ProxyRequest{RunID: run, TaskID: h.TaskID, JobID: p.JobID, RequestID: p.RequestID,
			RequestIDChars: len([]rune(p.RequestID)), NonceDigest: h.NonceDigest, Tool: p.Tool,
			Args: json.RawMessage(p.Args)}, p.JobID + "/" + p.RequestID
	case *events.ProxyRejected:
		h := header(p.JobID)
		digest := h.NonceDigest
		if p.Reason == events.ProxyReasonNonce {
			digest = noNonce
		}
		subject := p.JobID + "/" + orDash(p.RequestID)
		switch p.Op {
		case events.ProxyOpRequest:
			c := &commands.ProxyRequest{RunID: run, TaskID: h.TaskID, JobID: p.JobID, RequestID: p.RequestID,
				RequestIDChars: len([]rune(p.RequestID)), NonceDigest: digest, Tool: p.Tool, Args: json.RawMessage(`{}`)}
			if p.Reason == events.ProxyReasonBadRequestID {
				c.RequestIDChars = p.RequestIDChars
			}
			if p.Reason == events.ProxyReasonPayloadTooLarge {
				c.Args = sized(p.Bytes)
			}
			return c, subject
		case events.ProxyOpCancel:
			return &commands.ProxyCancel{RunID: run, TaskID: h.TaskID, JobID: p.JobID, RequestID: p.RequestID,
				NonceDigest: digest}, subject
		case events.ProxyOpComplete:
			c := &commands.ProxyComplete{RunID: run, JobID: p.JobID, RequestID: p.RequestID, NonceDigest: digest,
				Result: json.RawMessage(`{}`)}
			if p.Reason == events.ProxyReasonPayloadTooLarge {
				c.Result = sizedResult(p.Bytes)
			}
			return c, subject
		}
	case *events.ProxyCompleted:
		h := header(p.JobID)
		result := json.RawMessage(p.Result)
		if p.Fenced {
			result = sizedResult(p.ResultBytes)
		}
		return &commands.ProxyComplete{RunID: run, JobID: p.JobID, RequestID: p.RequestID, NonceDigest: h.NonceDigest,
			Result: result}, p.JobID + "/" + p.RequestID
	case *events.ProxyCancelled:
		if p.By == "disconnect" {
			return &commands.JobDisconnect{RunID: run, JobID: p.JobID}, p.JobID
		}
		h := header(p.JobID)
		return &commands.ProxyCancel{RunID: run, TaskID: h.TaskID, JobID: p.JobID, RequestID: p.RequestID,
			NonceDigest: h.NonceDigest}, p.JobID + "/" + p.RequestID
	case *events.LeaseOpened:
		return &commands.LeaseOpen{RunID: run, JobID: p.JobID, Mode: p.Mode, RootToolCallID: p.RootToolCallID}, p.JobID
	case *events.LeaseCleared:
		if len(group) > 1 {
			if st := events.PayloadAs[events.JobStatusChanged](group[1]); st != nil {
				return &commands.JobTransition{RunID: run, JobID: p.JobID, To: st.To, Reason: st.Reason}, p.JobID
			}
		}
		reason := p.Reason
		if reason == "cleared" {
			reason = ""
		}
		return &commands.LeaseClear{RunID: run, JobID: p.JobID, Reason: reason}, p.JobID
	case *events.JobStatusChanged:
		return &commands.JobTransition{RunID: run, JobID: p.JobID, To: p.To, Reason: p.Reason}, p.JobID
	case *events.JobRootsReset:
		return &commands.JobRootsReset{RunID: run}, run
	case *events.JobRejected:
		switch p.Op {
		case "lease.open":
			c := &commands.LeaseOpen{RunID: run, JobID: p.JobID, Mode: events.LeaseStart, RootToolCallID: "(not recorded)"}
			if p.Reason == "not-paused" {
				// NB: the grant is not recorded, and a continue is refused not-paused before its grant is read:
				// any grant decides the same, but none is a malformed continue (bad-params).
				c.Mode, c.Tools = events.LeaseContinue, json.RawMessage(`[]`)
			}
			return c, p.JobID
		case "lease.clear":
			return &commands.LeaseClear{RunID: run, JobID: p.JobID}, p.JobID
		case "job.transition":
			to := events.JobCancelled
			if p.Reason == "not-running" {
				to = events.JobPaused
			}
			return &commands.JobTransition{RunID: run, JobID: p.JobID, To: to}, p.JobID
		}
		return nil, p.JobID
	case *events.JobCreated:
		return nil, p.JobID
	case *events.ManifestRevalidated:
		return nil, p.JobID + "/" + orDash(p.RequestID)
	case *events.ManifestRevalidationFailed:
		return nil, p.JobID + "/" + orDash(p.RequestID)
	}
	return nil, ""
}

// jobOutcome summarises a job decision's events (or its refusal).
func jobOutcome(evs []events.Event, err error) string {
	var parts []string
	for _, ev := range evs {
		if s := jobOutcomePart(ev); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return outcome(evs, err)
	}
	return strings.Join(parts, ", ")
}

func jobOutcomePart(ev events.Event) string {
	switch p := ev.Payload.(type) {
	case *events.JobCreated:
		return fmt.Sprintf("job %s created with %d tools", p.JobID, len(p.Tools))
	case *events.JobRejected:
		return "refused: " + p.Reason
	case *events.ProxyRejected:
		return "refused: " + p.Reason
	case *events.ProxyRequested:
		return fmt.Sprintf("admitted %s under lease %d", p.RequestID, p.Generation)
	case *events.ProxyCompleted:
		if p.Fenced {
			return "fenced (never delivered)"
		}
		return "delivered"
	case *events.ProxyCancelled:
		return "cancelled " + p.RequestID
	case *events.LeaseOpened:
		return fmt.Sprintf("lease %d opened", p.Generation)
	case *events.LeaseCleared:
		if p.Saturated {
			return fmt.Sprintf("lease %d cleared, revoked-root set saturated", p.Generation)
		}
		return fmt.Sprintf("lease %d cleared", p.Generation)
	case *events.JobStatusChanged:
		return p.To
	case *events.ManifestRevalidated:
		return "grant revalidated"
	case *events.ManifestRevalidationFailed:
		return "grant changed"
	case *events.JobRootsReset:
		return "revoked roots reset"
	}
	return ""
}

// jobRule says which rule decided, with the inputs it saw.
func jobRule(evs []events.Event, err error) string {
	for _, ev := range evs {
		switch p := ev.Payload.(type) {
		case *events.ProxyRejected:
			return ProxyRejectionRule(p)
		case *events.JobRejected:
			return JobRejectionRule(p)
		case *events.ManifestRevalidationFailed:
			return fmt.Sprintf("T4 revalidation (%s): tool %d differs in %s: want %q, got %q; the job is hard-stopped",
				p.Mode, p.Index, p.Cause, p.Want, p.Got)
		case *events.ProxyRequested:
			return fmt.Sprintf("T7–T14 passed: nonce, new id, lease %d active, job running, %q granted (mutating %v), "+
				"%d bytes", p.Generation, p.Tool, p.Mutating, p.ArgsBytes)
		case *events.ProxyCompleted:
			if p.Fenced {
				return fmt.Sprintf("T15 fencing: the call's lease %d is not current (job at %d) or the call ended",
					p.Generation, p.CurrentGeneration)
			}
			return fmt.Sprintf("T15: lease %d still current, call live: delivered (%d bytes, usage stripped, T14)",
				p.Generation, p.ResultBytes)
		case *events.ProxyCancelled:
			if p.By == "disconnect" {
				return "T19: the worker disconnected; every pending call fails"
			}
			return fmt.Sprintf("T16: a live call of the current lease %d of a running job", p.Generation)
		case *events.LeaseCleared:
			s := fmt.Sprintf("T5: lease %d cleared (%s) before the status shows; root %s revoked, %d calls aborted",
				p.Generation, p.Reason, p.RootToolCallID, p.Aborted)
			if p.Saturated {
				s += "; T18: the revoked-root set was full, so it is emptied and saturated (every nested call with a " +
					"parent blocked until reset)"
			}
			return s
		case *events.LeaseOpened:
			return fmt.Sprintf("T5/T6: no active lease, %s allowed; generation %d, root %s", p.Mode, p.Generation,
				p.RootToolCallID)
		case *events.JobCreated:
			return fmt.Sprintf("T1–T3: %d tools, names exact and unique, no delegation tool, JSON-safe, %d bytes",
				len(p.Tools), p.ManifestBytes)
		case *events.JobRootsReset:
			return fmt.Sprintf("T18: session reset drops %d revoked roots (saturated %v)", p.Roots, p.Saturated)
		case *events.JobStatusChanged:
			return fmt.Sprintf("job %s → %s", p.From, p.To)
		case *events.ManifestRevalidated:
			return "T4: the same tools, order, fingerprints and callables"
		}
	}
	if err != nil {
		return err.Error()
	}
	return "-"
}

// ProxyRejectionRule says which rule refused a proxy message, with what it
// saw.
func ProxyRejectionRule(p *events.ProxyRejected) string {
	rule := map[string]string{
		events.ProxyReasonBadRequestID: "T8", events.ProxyReasonNonce: "T7", events.ProxyReasonReplay: "T9",
		events.ProxyReasonRequestLimit: "T10", events.ProxyReasonNotRunning: "T11", events.ProxyReasonNoLease: "T11",
		events.ProxyReasonNotGranted: "T12", events.ProxyReasonInFlight: "T13", events.ProxyReasonPayloadTooLarge: "T14",
		events.ProxyReasonRevalidationFailed: "T4",
	}[p.Reason]
	if p.Op == events.ProxyOpCancel && p.Reason != events.ProxyReasonNonce {
		rule = "T16"
	}
	s := fmt.Sprintf("%s %s (%s): %s; job %s, lease %d active=%v, %d in flight, %d ids seen", rule, p.Reason, p.Op,
		p.Message, p.Status, p.Generation, p.LeaseActive, p.InFlight, p.Seen)
	if p.Limit > 0 {
		s += fmt.Sprintf(", limit %d", p.Limit)
	}
	if p.Bytes > 0 {
		s += fmt.Sprintf(", %d bytes", p.Bytes)
	}
	return s
}

// JobRejectionRule says which rule refused a manager operation, with what
// it saw.
func JobRejectionRule(p *events.JobRejected) string {
	s := fmt.Sprintf("%s (%s): %s", p.Reason, p.Op, p.Message)
	if p.Status != "" {
		s += fmt.Sprintf("; job %s, lease %d active=%v", p.Status, p.Generation, p.LeaseActive)
	}
	if p.Index != nil {
		s += fmt.Sprintf("; tool %d %q", *p.Index, p.Tool)
	}
	if p.Limit > 0 {
		s += fmt.Sprintf("; %d bytes, limit %d", p.Bytes, p.Limit)
	}
	return s
}

// describeJob tells what a job event did.
func describeJob(ev events.Event) string {
	if s := jobOutcomePart(ev); s != "" {
		switch p := ev.Payload.(type) {
		case *events.ProxyRejected:
			return fmt.Sprintf("%s of %s/%s refused: %s", p.Op, p.JobID, orDash(p.RequestID), p.Reason)
		case *events.JobRejected:
			return fmt.Sprintf("%s of job %s refused: %s", p.Op, p.JobID, p.Reason)
		case *events.ProxyRequested:
			return fmt.Sprintf("%s/%s: %s admitted under lease %d", p.JobID, p.RequestID, p.Tool, p.Generation)
		case *events.ProxyCompleted:
			return fmt.Sprintf("%s/%s result %s", p.JobID, p.RequestID, s)
		case *events.JobStatusChanged:
			return withReason(fmt.Sprintf("job %s %s → %s", p.JobID, p.From, p.To), p.Reason)
		case *events.LeaseOpened:
			return fmt.Sprintf("job %s lease %d opened (%s, root %s)", p.JobID, p.Generation, p.Mode, p.RootToolCallID)
		case *events.LeaseCleared:
			return fmt.Sprintf("job %s %s: %s", p.JobID, s, p.Reason)
		}
		return s
	}
	return ev.Type
}
