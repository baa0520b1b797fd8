package audit

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestExplainJobs: every job decision of a log that meets every proxy
// refusal is explained — re-decided without drift where its command can be
// rebuilt, from its recorded inputs where the grant would be needed — and
// every refusal names its rule and what it saw.
func TestExplainJobs(t *testing.T) {
	const run = "team_20261001090000_00000000000000j1"
	grant, changed := grantOf("read"), grantOf("write")
	nonce := commands.SecretDigest("n")
	w := audittest.Worker("t1")
	o := audittest.Orchestrator
	req := func(id string, tool string, args string) decided {
		return decided{w, &commands.ProxyRequest{RunID: run, TaskID: "t1", JobID: "J", RequestID: id, RequestIDChars: len(id),
			NonceDigest: nonce, Tool: tool, Args: json.RawMessage(args)}}
	}
	cfg := projections.DefaultConfig()
	cfg.ProxyMaxInFlight, cfg.ProxyMaxRequests, cfg.ProxyPayloadBytes = 2, 10, 100
	wd, l, dir := decidedLogRefusals(t, []decided{
		{audittest.Admin, &commands.Configure{Config: cfg}},
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "g", Cwd: "/srv"}},
		{o, &commands.RunTransition{RunID: run, To: "running"}},
		{o, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "engineer", Agent: "engineer", Title: "t", Cwd: "/srv", StepID: "s"}},
		{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		{o, &commands.JobCreate{RunID: run, JobID: "J", TaskID: "t1", Tools: json.RawMessage(`[{"name":" x"}]`), NonceDigest: nonce}},
		{o, &commands.JobCreate{RunID: run, JobID: "J", TaskID: "t1", Tools: grant, NonceDigest: nonce}},
		req("early", "read", `{}`),
		{o, &commands.LeaseOpen{RunID: run, JobID: "J", Mode: events.LeaseContinue, RootToolCallID: "c0", Tools: grant}},
		{o, &commands.LeaseOpen{RunID: run, JobID: "J", Mode: events.LeaseStart, RootToolCallID: "c1"}},
		{o, &commands.LeaseOpen{RunID: run, JobID: "J", Mode: events.LeaseStart, RootToolCallID: "c1"}},
		req("", "read", `{}`),
		{w, &commands.ProxyRequest{RunID: run, TaskID: "t1", JobID: "J", RequestID: "r0", RequestIDChars: 2, NonceDigest: commands.SecretDigest("bad"), Tool: "read", Args: json.RawMessage(`{}`)}},
		req("r1", "read", `{"a":1}`),
		req("r1", "read", `{}`),
		req("r2", "bash", `{}`),
		req("r3", "read", `{}`),
		req("r4", "read", `{}`),
		{o, &commands.ManifestRevalidate{RunID: run, JobID: "J", RequestID: "r1", Tools: grant}},
		{o, &commands.ProxyComplete{RunID: run, JobID: "J", RequestID: "r1", NonceDigest: nonce, Result: json.RawMessage(`{"content":[],"usage":1}`)}},
		req("r5", "read", `"`+strings.Repeat("x", 200)+`"`),
		{o, &commands.ProxyComplete{RunID: run, JobID: "J", RequestID: "r3", NonceDigest: commands.SecretDigest("bad"), Result: json.RawMessage(`{}`)}},
		{w, &commands.ProxyCancel{RunID: run, TaskID: "t1", JobID: "J", RequestID: "r3", NonceDigest: nonce}},
		{w, &commands.ProxyCancel{RunID: run, TaskID: "t1", JobID: "J", RequestID: "zz", NonceDigest: nonce}},
		req("r6", "read", `{}`),
		{o, &commands.LeaseClear{RunID: run, JobID: "J", Reason: "dispose"}},
		req("r7", "read", `{}`),
		{o, &commands.ProxyComplete{RunID: run, JobID: "J", RequestID: "r6", NonceDigest: nonce, Result: json.RawMessage(`{"content":[]}`)}},
		{o, &commands.JobTransition{RunID: run, JobID: "J", To: events.JobPaused}},
		{o, &commands.JobTransition{RunID: run, JobID: "J", To: events.JobPaused}},
		{o, &commands.LeaseOpen{RunID: run, JobID: "J", Mode: events.LeaseContinue, RootToolCallID: "c2", Tools: grant}},
		req("r8", "read", `{}`),
		{o, &commands.JobDisconnect{RunID: run, JobID: "J"}},
		req("r9", "read", `{}`),
		req("r10", "read", `{}`),
		{o, &commands.ManifestRevalidate{RunID: run, JobID: "J", RequestID: "r9", Tools: changed}},
		{o, &commands.JobRootsReset{RunID: run}},
	})
	l = reopened(t, wd, l, dir)
	res, err := Replay(l, ReplayOptions{Explain: true})
	require.NoError(t, err)
	for _, d := range res.Decisions {
		require.False(t, d.Drift, "%s at %d drifted: %+v", d.Command, d.Position, d.Differences)
	}
	for _, d := range res.Decisions {
		t.Logf("%d %s %s | %s | %s | %s", d.Position, d.Command, d.Subject, d.Recorded, d.Today, d.Rule)
	}
	reasons := map[string]bool{}
	kinds := map[string]int{}
	for _, d := range res.Decisions {
		kinds[d.Command]++
		for _, r := range []string{"bad-request-id", "nonce", "replay", "request-limit", "no-lease", "not-running",
			"not-granted", "in-flight", "payload-too-large", "revalidation-failed", "lease-active", "not-paused", "tool-name"} {
			if strings.Contains(d.Rule, r+" (") || strings.Contains(d.Rule, " "+r+" (") {
				reasons[r] = true
			}
		}
		require.NotEmpty(t, d.Rule)
		require.NotEqual(t, "-", d.Rule, "%s at %d", d.Command, d.Position)
	}
	for _, r := range []string{"bad-request-id", "nonce", "replay", "request-limit", "no-lease", "not-running", "not-granted",
		"in-flight", "payload-too-large", "lease-active", "not-paused", "tool-name"} {
		require.True(t, reasons[r], "a refusal for %s is explained with its rule", r)
	}
	for _, k := range []string{"job.create", "proxy.request", "proxy.complete", "proxy.cancel", "lease.open", "lease.clear",
		"job.transition", "job.disconnect", "manifest.revalidate", "job.roots_reset"} {
		require.Positive(t, kinds[k], "%s decisions are explained", k)
	}
}

// decidedLogRefusals is decidedLog for steps that may be refused: a refusal's
// events are written all the same, and any other error fails.
func decidedLogRefusals(t *testing.T, steps []decided) (*audittest.World, *eventlog.Log, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	for _, c := range steps {
		_, err := w.Do(c.actor, c.cmd)
		var rej *commands.RejectedError
		if err != nil && !errors.As(err, &rej) {
			require.NoError(t, err)
		}
	}
	return w, l, dir
}
