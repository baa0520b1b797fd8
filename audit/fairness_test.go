package audit

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestExplainQuotaAndSlotShare: replay --explain re-decides a recorded quota refusal and a slot-share refusal
// with the config, state and clock of the time, without drift, and names the rule and its inputs.
func TestExplainQuotaAndSlotShare(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	cfg := projections.DefaultConfig()
	cfg.MaxSlots, cfg.SlotShare, cfg.QuotaMsgsPerMin = 2, 1, 2
	const a, b = "team_20261001090000_0000000000000001", "team_20261001090000_0000000000000002"
	do := func(actor events.Actor, cmd commands.Command) error {
		_, err := w.Do(actor, cmd)
		return err
	}
	require.NoError(t, do(audittest.Admin, &commands.Configure{Config: cfg}))
	for _, run := range []string{a, b} {
		require.NoError(t, do(audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Cwd: "/" + run}))
		require.NoError(t, do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"}))
		require.NoError(t, do(audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "explorer", Agent: "explorer", Cwd: "/" + run}))
		require.NoError(t, do(audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}))
	}
	worker := audittest.Worker("t1")
	for range 2 {
		require.NoError(t, do(worker, &commands.DelegateRequest{RunID: a, TaskID: "t1", Prompt: "p"}))
	}
	var rej *commands.RejectedError
	require.ErrorAs(t, do(worker, &commands.DelegateRequest{RunID: b, TaskID: "t1", Prompt: "p"}), &rej)
	require.Equal(t, events.ReasonSlotsExhausted, rej.Reason)
	require.NoError(t, do(audittest.Orchestrator, &commands.DelegateSettle{RunID: a, SubID: "gc-00000001", Outcome: commands.OutcomeOK}))
	require.ErrorAs(t, do(worker, &commands.DelegateRequest{RunID: a, TaskID: "t1", Prompt: "p"}), &rej)
	require.Equal(t, events.ReasonSlotShareExceeded, rej.Reason)
	// The settlement delivered one message to the run: one more fits the rate of two a minute.
	require.NoError(t, do(worker, &commands.MessageSend{RunID: a, FromTask: "t1", To: []string{"parent"}, Body: "hi"}))
	require.ErrorAs(t, do(worker, &commands.MessageSend{RunID: a, FromTask: "t1", To: []string{"parent"}, Body: "hi"}), &rej)
	require.Equal(t, commands.CodeRateLimit, rej.Code)
	require.NoError(t, l.Close())

	rules := explainedRules(t, dir)
	require.Equal(t, "quota msg-rate: used 2 + adding 1 > max 2", rules["msg.send refused: msg-rate quota"])
	require.Contains(t, rules["delegate.request rejected: slot-share-exceeded"],
		"the run holds 1 >= its share 1 while 1 other run(s) wait; 1/2 in flight")
}

// TestExplainWorkerSlotShare: under workerSlotShare a worker refused a slot while it holds its share of the pool
// and its sibling waits is re-decided without drift, and the rule names the worker's inputs; the sibling then gets
// the slot. A log without the knob (every log written before it) is re-decided as it was: the worker takes the
// slot, and its sibling is refused again.
func TestExplainWorkerSlotShare(t *testing.T) {
	for _, workerSlotShare := range []bool{true, false} {
		t.Run(fmt.Sprintf("workerSlotShare=%t", workerSlotShare), func(t *testing.T) {
			cfg := projections.DefaultConfig()
			cfg.NestingEnabled, cfg.MaxSlots, cfg.SlotShare, cfg.WorkerSlotShare = true, 2, 1, workerSlotShare
			dir, l, _, do := quotaWorld(t, cfg, "t1", "t2")
			const a = "team_20261001090000_0000000000000001"
			request := func(task string) error {
				return do(audittest.Worker(task), &commands.DelegateRequest{RunID: a, TaskID: task, Prompt: "look"})
			}
			require.NoError(t, request("t1"))
			require.NoError(t, request("t1"))
			var rej *commands.RejectedError
			require.ErrorAs(t, request("t2"), &rej)
			require.Equal(t, events.ReasonSlotsExhausted, rej.Reason)
			require.NoError(t, do(audittest.Orchestrator, &commands.DelegateSettle{RunID: a, SubID: "gc-00000001",
				Outcome: commands.OutcomeOK}))
			if !workerSlotShare {
				require.NoError(t, request("t1"), "a log without the knob: the worker takes the slot")
				require.ErrorAs(t, request("t2"), &rej)
				require.Equal(t, events.ReasonSlotsExhausted, rej.Reason)
				require.NoError(t, l.Close())
				require.NotContains(t, explainedRules(t, dir), "delegate.request rejected: slot-share-exceeded")
				return
			}
			require.ErrorAs(t, request("t1"), &rej)
			require.Equal(t, events.ReasonSlotShareExceeded, rej.Reason)
			require.NoError(t, request("t2"), "the sibling's slot")
			require.NoError(t, l.Close())

			require.Equal(t, "slot-share-exceeded (the requesting worker holds 1 >= its share 1 with its delegations "+
				"while 1 other task(s) of the run wait; 1/2 in flight)",
				explainedRules(t, dir)["delegate.request rejected: slot-share-exceeded"])
		})
	}
}

// TestExplainQuotaReserve: a worker's refusal at the rest of a quota (its reserve kept for the orchestrator) is
// re-decided with the actor the event recorded, without drift, and so is the orchestrator's use of the reserve; the
// rule names the run's quota and the reserve the worker's limit is carved from, not the limit alone.
func TestExplainQuotaReserve(t *testing.T) {
	cfg := projections.DefaultConfig()
	cfg.QuotaMsgsPerMin, cfg.QuotaReserve = 4, 50
	dir, l, send, _ := quotaWorld(t, cfg, "t1")
	worker := audittest.Worker("t1")
	for range 2 {
		require.NoError(t, send(worker, "parent"))
	}
	var rej *commands.RejectedError
	require.ErrorAs(t, send(worker, "parent"), &rej)
	require.Equal(t, commands.CodeRateLimit, rej.Code)
	for range 2 {
		require.NoError(t, send(audittest.Orchestrator, "t1"), "the orchestrator's reserve")
	}
	require.NoError(t, l.Close())

	rules := explainedRules(t, dir)
	require.Equal(t, "quota msg-rate: used 2 + adding 1 > max 2, a worker's share: the run's quota 4 less the "+
		"quotaReserve of 50% kept for its orchestrator and the admin", rules["msg.send refused: msg-rate quota"])
}

// TestExplainWorkerMsgShare: a worker's refusal at its own share of the message rate is re-decided without drift
// while its sibling, sending after it, is not refused; the rule names the share and what it is a share of.
func TestExplainWorkerMsgShare(t *testing.T) {
	cfg := projections.DefaultConfig()
	cfg.QuotaMsgsPerMin, cfg.QuotaReserve, cfg.QuotaWorkerMsgShare = 8, 25, 50
	dir, l, send, _ := quotaWorld(t, cfg, "t1", "t2")
	for range 3 {
		require.NoError(t, send(audittest.Worker("t1"), "parent"))
	}
	var rej *commands.RejectedError
	require.ErrorAs(t, send(audittest.Worker("t1"), "parent"), &rej)
	require.Equal(t, commands.CodeRateLimit, rej.Code)
	for range 3 {
		require.NoError(t, send(audittest.Worker("t2"), "parent"), "the sibling's share")
	}
	require.NoError(t, l.Close())

	rules := explainedRules(t, dir)
	require.Equal(t, "quota worker-msg-rate: used 3 + adding 1 > max 3, one worker's share: the quotaWorkerMsgShare "+
		"of 50% of the 6 messages a minute the run's workers share (the run's 8 less its quotaReserve of 25%)",
		rules["msg.send refused: worker-msg-rate quota"])
}

// quotaWorld is a store in a new directory holding a running run configured with cfg and a running task of each
// of taskIDs, with the open log, a send of a one-line message by an actor to a recipient, and a command by an
// actor.
func quotaWorld(t *testing.T, cfg projections.Config, taskIDs ...string) (string, *eventlog.Log,
	func(events.Actor, string) error, func(events.Actor, commands.Command) error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	const a = "team_20261001090000_0000000000000001"
	do := func(actor events.Actor, cmd commands.Command) error {
		_, err := w.Do(actor, cmd)
		return err
	}
	require.NoError(t, do(audittest.Admin, &commands.Configure{Config: cfg}))
	require.NoError(t, do(audittest.Admin, &commands.RunCreate{RunID: a, Team: "crew", Cwd: "/a"}))
	require.NoError(t, do(audittest.Orchestrator, &commands.RunTransition{RunID: a, To: "running"}))
	for _, id := range taskIDs {
		require.NoError(t, do(audittest.Orchestrator, &commands.TaskCreate{RunID: a, TaskID: id, Role: "explorer", Agent: "explorer", Cwd: "/a"}))
		require.NoError(t, do(audittest.Orchestrator, &commands.TaskTransition{RunID: a, TaskID: id, To: "running"}))
	}
	send := func(actor events.Actor, to string) error {
		from := ""
		if actor.Role == events.RoleWorker {
			from = actor.TaskID
		}
		return do(actor, &commands.MessageSend{RunID: a, FromTask: from, To: []string{to}, Body: "hi"})
	}
	return dir, l, send, do
}

// TestExplainGrandchildWorkerShare: under shareByDelegator a grandchild's worker uses the share of the worker whose delegation started it,
// so its refusal, once the two together appended that share, is re-decided without drift and the rule names the
// delegating worker's task as the one whose share it counts, while the sibling is not refused.
func TestExplainGrandchildWorkerShare(t *testing.T) {
	cfg := projections.DefaultConfig()
	cfg.NestingEnabled, cfg.QuotaMsgsPerMin, cfg.QuotaReserve, cfg.QuotaWorkerShare = true, 0, 25, 20
	cfg.ShareByDelegator = true
	cfg.QuotaEvents, cfg.QuotaBytes = 40, 0
	dir, l, send, do := quotaWorld(t, cfg, "t1", "t2")
	const a, sub = "team_20261001090000_0000000000000001", "gc-00000001"
	require.NoError(t, do(audittest.Worker("t1"), &commands.DelegateRequest{RunID: a, TaskID: "t1", Prompt: "look"}))
	require.NoError(t, do(audittest.Orchestrator, &commands.DelegateSpawned{RunID: a, SubID: sub, PID: 100}))
	for range 4 {
		require.NoError(t, send(audittest.Worker(sub), "parent"))
	}
	var rej *commands.RejectedError
	require.ErrorAs(t, send(audittest.Worker(sub), "parent"), &rej)
	require.Equal(t, commands.CodeQuotaExceeded, rej.Code)
	require.Equal(t, "msg.send: run quota exceeded: 6 events from task t1 in the run + 1 > 6 (worker-events quota)",
		rej.Message)
	require.NoError(t, send(audittest.Worker("t2"), "parent"), "the sibling's share")
	require.NoError(t, l.Close())

	require.Equal(t, "quota worker-events: used 6 + adding 1 > max 6, one worker's share: the quotaWorkerShare of 20% "+
		"of the 30 events the run's workers share (the run's 40 less its quotaReserve of 25%), counted by what task "+
		"t1 appended with the delegations it started and their results",
		explainedRules(t, dir)["msg.send refused: worker-events quota"])
}

// explainedRules replays the store in dir with --explain, requires no drift, and returns each decision's rule by
// its command and what was recorded.
func explainedRules(t *testing.T, dir string) map[string]string {
	t.Helper()
	l, err := Open(dir)
	require.NoError(t, err)
	defer l.Close()
	res, err := Replay(l, ReplayOptions{Explain: true})
	require.NoError(t, err)
	require.Zero(t, res.Drift())
	rules := map[string]string{}
	for _, d := range res.Decisions {
		rules[d.Command+" "+d.Recorded] = d.Rule
	}
	return rules
}

// TestExplainWorkerShare: a worker's refusal at its own share of the events or the bytes quota is re-decided without
// drift while its sibling, sending after it, is not refused; the rule names the share, what it is a share of and
// the task whose appended events it counts.
func TestExplainWorkerShare(t *testing.T) {
	for _, c := range []struct {
		name     string
		cfg      func(*projections.Config)
		share    int
		sent     int
		recorded string
		rule     string
	}{
		{"events", func(c *projections.Config) { c.QuotaEvents, c.QuotaBytes = 40, 0 }, 20, 6,
			"msg.send refused: worker-events quota",
			"quota worker-events: used 6 + adding 1 > max 6, one worker's share: the quotaWorkerShare of 20% of the " +
				"30 events the run's workers share (the run's 40 less its quotaReserve of 25%), counted by what task t1 " +
				"appended as its actor"},
		{"bytes", func(c *projections.Config) { c.QuotaEvents, c.QuotaBytes = 0, 2000 }, 18, 4,
			"msg.send refused: worker-bytes quota",
			"quota worker-bytes: used 268 + adding 67 > max 270, one worker's share: the quotaWorkerShare of 18% of " +
				"the 1500 bytes of text the run's workers share (the run's 2000 less its quotaReserve of 25%), counted " +
				"by what task t1 appended as its actor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := projections.DefaultConfig()
			cfg.QuotaMsgsPerMin, cfg.QuotaReserve, cfg.QuotaWorkerShare = 0, 25, c.share
			c.cfg(&cfg)
			dir, l, send, _ := quotaWorld(t, cfg, "t1", "t2")
			for range c.sent {
				require.NoError(t, send(audittest.Worker("t1"), "parent"))
			}
			var rej *commands.RejectedError
			require.ErrorAs(t, send(audittest.Worker("t1"), "parent"), &rej)
			require.Equal(t, commands.CodeQuotaExceeded, rej.Code)
			require.NoError(t, send(audittest.Worker("t2"), "parent"), "the sibling's share")
			require.NoError(t, l.Close())

			require.Equal(t, c.rule, explainedRules(t, dir)[c.recorded])
		})
	}
}
