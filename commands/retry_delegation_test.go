package commands

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestARetriedTasksEarlierDelegationsSettleIntoTheRunInbox: a retry starts a new attempt of a task, and the broker
// ends the connections of the attempt before (Credential.Attempt). A delegation that attempt made is its outstanding
// work, not the new attempt's: its result is settled into the run inbox (rerouted), as when its parent has ended, so
// the new attempt never reads the ended attempt's results as its own; the orchestrator reads it there. A delegation
// the new attempt makes delivers to it. Under a config that leaves rerouteEndedAttempts out — every log written
// before the knob — the settlement is decided as it was, so replay explains it with the same answer.
func TestARetriedTasksEarlierDelegationsSettleIntoTheRunInbox(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config []string
		// retryBefore: the parent task is retried after the delegation is made; retryAfter: before it is made.
		retryBefore, retryAfter bool
		// expire: the engine's clock times the delegation out, where the others are settled by the runtime.
		expire bool
		to     string
	}{
		{name: "made by the attempt before the retry", config: []string{"rerouteEndedAttempts=true"},
			retryBefore: true, to: events.RunInbox},
		{name: "made by the attempt after the retry", config: []string{"rerouteEndedAttempts=true"}, retryAfter: true,
			to: "W"},
		{name: "made by an attempt retried twice since", config: []string{"rerouteEndedAttempts=true"},
			retryBefore: true, retryAfter: true, to: events.RunInbox},
		{name: "made by the attempt before the retry, timed out", config: []string{"rerouteEndedAttempts=true"},
			retryBefore: true, expire: true, to: events.RunInbox},
		{name: "no retry", config: []string{"rerouteEndedAttempts=true"}, to: "W"},
		{name: "no retry, timed out", config: []string{"rerouteEndedAttempts=true"}, expire: true, to: "W"},
		{name: "a log written before the knob", retryBefore: true, to: "W"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newScenarioWorld(t)
			if tc.config != nil {
				require.NoError(t, w.config(tc.config))
			}
			given := func(typ, payload string) { require.NoError(t, w.given(typ, "R", payload)) }
			given(events.TypeRunCreated, `{"team":"t","goal":"g","cwd":"/w"}`)
			given(events.TypeRunRunning, `{}`)
			given(events.TypeTaskCreated,
				`{"taskId":"W","role":"executor","agent":"a","title":"w","cwd":"/w","dependsOn":[]}`)
			given(events.TypeTaskStarted, `{"taskId":"W"}`)
			retry := func() {
				mustDo(t, w, events.RoleOrchestrator, "", "task.transition",
					`{"taskId":"W","to":"queued","reason":"retry"}`)
				mustDo(t, w, events.RoleOrchestrator, "", "task.transition", `{"taskId":"W","to":"running"}`)
			}
			if tc.retryAfter {
				retry()
			}
			sub := mustDo(t, w, events.RoleWorker, "W", "delegate.request",
				`{"prompt":"p"}`).result.(*DelegateResult).GrandchildTaskRef
			if tc.retryBefore {
				retry()
			}
			var out scenarioOutcome
			if tc.expire {
				w.now += (900 + 30 + 1) * 1e9 // past the default timeout and grace
				var err error
				out, err = w.tick()
				require.NoError(t, err)
				require.NotEmpty(t, out.events, "the delegation is timed out")
			} else {
				out = mustDo(t, w, events.RoleOrchestrator, "", "delegate.settle",
					`{"subId":"`+sub+`","outcome":"ok","text":"done"}`)
				res := out.result.(*SettleResult)
				require.Equal(t, tc.to, res.To)
				require.Equal(t, tc.to == events.RunInbox, res.Rerouted)
			}
			p, ok := out.events[0].Payload.(*events.MailboxAppended)
			require.True(t, ok, "the settlement opens with its result's delivery")
			require.Equal(t, tc.to, p.To)
			require.Equal(t, tc.to == events.RunInbox, p.Rerouted)
			require.NoError(t, w.checkInvariants())
			require.NoError(t, w.rebuild(0))
		})
	}
}
