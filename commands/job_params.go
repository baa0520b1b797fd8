package commands

import (
	"encoding/json"
	"unicode/utf8"
)

// Parsing of the job methods (D§9). The nonce of a proxy message is
// digested here, so no command, fingerprint or recorded outcome ever holds
// it; job.create's nonce is minted by the broker, which sets NonceDigest.

func parseJobCreate(p *paramReader, _ Caller, runID string) Command {
	return &JobCreate{RunID: runID, JobID: p.str("jobId", true), TaskID: p.str("taskId", true),
		Tools: p.raw("tools", true)}
}

func parseJobTransition(p *paramReader, _ Caller, runID string) Command {
	return &JobTransition{RunID: runID, JobID: p.str("jobId", true), To: p.str("to", true),
		Reason: p.str("reason", false)}
}

func parseLeaseOpen(p *paramReader, _ Caller, runID string) Command {
	return &LeaseOpen{
		RunID: runID, JobID: p.str("jobId", true), Mode: p.str("mode", true),
		RootToolCallID: p.str("rootToolCallId", true), Tools: p.raw("tools", false),
	}
}

func parseLeaseClear(p *paramReader, _ Caller, runID string) Command {
	return &LeaseClear{RunID: runID, JobID: p.str("jobId", true), Reason: p.str("reason", false)}
}

func parseManifestRevalidate(p *paramReader, _ Caller, runID string) Command {
	return &ManifestRevalidate{RunID: runID, JobID: p.str("jobId", true), RequestID: p.str("requestId", true),
		Tools: p.raw("tools", true)}
}

func parseProxyComplete(p *paramReader, _ Caller, runID string) Command {
	return &ProxyComplete{
		RunID: runID, JobID: p.str("jobId", true), RequestID: p.str("requestId", true), NonceDigest: p.nonce(),
		Result: p.raw("result", true),
	}
}

func parseJobDisconnect(p *paramReader, _ Caller, runID string) Command {
	return &JobDisconnect{RunID: runID, JobID: p.str("jobId", true)}
}

func parseJobRootsReset(_ *paramReader, _ Caller, runID string) Command {
	return &JobRootsReset{RunID: runID}
}

func parseProxyRequest(p *paramReader, c Caller, runID string) Command {
	cmd := &ProxyRequest{RunID: runID, TaskID: c.TaskID, JobID: p.str("jobId", true), NonceDigest: p.nonce(),
		Tool: p.str("tool", true)}
	cmd.RequestID, cmd.RequestIDChars = p.requestID()
	cmd.Args = p.raw("args", false)
	if cmd.Args == nil {
		cmd.Args = json.RawMessage("{}")
	}
	return cmd
}

func parseProxyCancel(p *paramReader, c Caller, runID string) Command {
	return &ProxyCancel{RunID: runID, TaskID: c.TaskID, JobID: p.str("jobId", true),
		RequestID: p.str("requestId", true), NonceDigest: p.nonce()}
}

// raw reads any JSON value as given, compacted: the value is part of the request a retry is told by, and a retry
// that spaces it otherwise is the same request. Key order, escapes and number spellings stay as given (the job
// checks refuse some of them: a key twice, -0).
func (p *paramReader) raw(key string, required bool) json.RawMessage {
	v, ok := p.get(key, required, "present")
	if !ok {
		return nil
	}
	return p.compact(key, v)
}

// nonce reads a proxy message's nonce and returns its digest.
func (p *paramReader) nonce() string {
	n := p.str("nonce", true)
	if p.err != nil {
		return ""
	}
	return SecretDigest(n)
}

// requestID reads a proxy request id without refusing it: T8's check is a
// rule, recorded by the decision. A non-string id has chars -1; a long one
// is cut (its length kept), so a huge id costs nothing downstream.
func (p *paramReader) requestID() (string, int) {
	v, ok := p.get("requestId", false, "a string")
	if !ok || v[0] != '"' {
		return "", -1
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", -1
	}
	n := utf8.RuneCountInString(s)
	if len(s) > MaxRequestIDChars*4 {
		s = s[:MaxRequestIDChars*4]
	}
	return s, n
}
