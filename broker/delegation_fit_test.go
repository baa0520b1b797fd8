package broker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
)

// TestDelegationsPastIDsTooLargeForAFrame: a delegation carries its run's id (up to 255 chars) and its parent task's
// (up to 256) beside its counters and times, all of which its run.create, task.create and delegate.request fit in a
// frame of 1 KiB, which a daemon allows: settled, with its pid and usage, it read back larger than the frame without
// its texts too, and query.delegations answered oversize-frame at it for good, no cursor passing it, so the
// orchestrator read no later delegation. Such a delegation is sent without its role and runId too (empty: the run
// the query names), namesOmitted true, every other field as it is; one that fits is sent whole.
func TestDelegationsPastIDsTooLargeForAFrame(t *testing.T) {
	f, o, runID := longestRunID(t, nil)
	long := strings.Repeat("t", commands.MaxIDChars)
	var subs []string
	for _, parent := range []string{long, "S"} {
		o.ok("task.create", map[string]any{"taskId": parent, "role": "executor", "agent": "a", "title": "t", "cwd": "/w"})
		o.ok("task.transition", map[string]any{"taskId": parent, "to": "running"})
		p := f.dial()
		p.hello(runID, parent, o.ok("credential.issue", map[string]any{"taskId": parent})["token"].(string))
		sub := p.ok("delegate.request", map[string]any{"prompt": "p", "budgetTokens": 1})["grandchildTaskRef"].(string)
		subs = append(subs, sub)
		o.ok("delegate.spawned", map[string]any{"subId": sub, "pid": 1<<31 - 1})
		o.ok("delegate.cancel", map[string]any{"subId": sub})
		o.ok("delegate.settle", map[string]any{"subId": sub, "outcome": "cancelled", "text": "x", "usageTokens": 1 << 40})
	}

	large, small := largeThenSmall(t, o, "query.delegations", "delegations")
	require.Equal(t, subs[0], large["subId"])
	require.Equal(t, true, large["namesOmitted"], "the role and runId are left out, and it says so")
	require.Equal(t, true, large["textsOmitted"])
	require.Equal(t, "", large["role"])
	require.Equal(t, "", large["runId"])
	require.Equal(t, long, large["parentTaskId"])
	require.Equal(t, "cancelled", large["status"])
	require.Equal(t, float64(1<<40), large["usageTokens"])
	require.Equal(t, subs[1], small["subId"])
	require.Equal(t, runID, small["runId"], "a delegation that fits is sent whole")
	require.Equal(t, "explorer", small["role"])
	require.NotContains(t, small, "namesOmitted")
	require.NotContains(t, small, "textsOmitted")
}
