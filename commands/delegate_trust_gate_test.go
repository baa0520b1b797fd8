package commands

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// The trust gate (SPEC §4.1 step 6, D§4.3 check 2) refuses a request marked untrusted with trust-denied, after the
// role gate and before the depth gate, and records the request's trust on the policy. No broker request can mark
// itself untrusted (gs-11 trust-is-not-a-param), so the gate is held here, on the command as decided.
func TestDelegateTrustGate(t *testing.T) {
	for _, c := range []struct {
		name      string
		maxDepth  string
		role      string
		untrusted bool
		reason    string // "" when admitted
	}{
		{"a trusted request is admitted", "4", "explorer", false, ""},
		{"an untrusted request is refused", "4", "explorer", true, events.ReasonTrustDenied},
		{"the role gate comes first", "4", "reviewer", true, events.ReasonRoleDenied},
		{"the trust gate comes before depth", "1", "explorer", true, events.ReasonTrustDenied},
		{"a trusted request meets the depth gate", "1", "explorer", false, events.ReasonDepthExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newScenarioWorld(t)
			require.NoError(t, w.config([]string{"nestingEnabled=true", "maxDepth=" + c.maxDepth, "maxSlots=2"}))
			require.NoError(t, w.given(events.TypeRunCreated, "R", `{"team":"t","goal":"g","cwd":"/w"}`))
			require.NoError(t, w.given(events.TypeRunRunning, "R", `{}`))
			require.NoError(t, w.given(events.TypeTaskCreated, "R",
				`{"taskId":"P","role":"executor","agent":"executor","title":"p","cwd":"/w","dependsOn":[]}`))
			require.NoError(t, w.given(events.TypeTaskStarted, "R", `{"taskId":"P"}`))

			out, err := w.decide(&DelegateRequest{RunID: "R", TaskID: "P", Prompt: "x", Role: &c.role,
				Untrusted: c.untrusted}, worker("P"), "R")
			require.NoError(t, err)
			if c.reason == "" {
				require.Nil(t, out.err)
				require.Equal(t, events.TypeDelegateAdmitted, out.events[1].Type)
				return
			}
			require.NotNil(t, out.err)
			require.Equal(t, []string{CodePolicyDenied, c.reason}, []string{out.err.Code, out.err.Reason})
			require.Len(t, out.events, 2)
			rejected := events.PayloadAs[events.DelegateRejected](out.events[1])
			require.NotNil(t, rejected)
			require.Equal(t, c.reason, rejected.Reason)
			require.Equal(t, !c.untrusted, rejected.Policy.Trusted, "the policy records the request's trust")
		})
	}
}
