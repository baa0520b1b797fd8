package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
)

// TestReplayDiffLiveRunOnlyTheDaemonHolds: a run the daemon holds that the rebuilt state does not (created after the
// position replayed to, or missing from the store replayed) is a difference, where only the runs the rebuilt state
// knew were asked for and compared.
func TestReplayDiffLiveRunOnlyTheDaemonHolds(t *testing.T) {
	f := newFake(t)
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	r := crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--to", "30", "--diff", "--socket", "fake.sock",
		"--token-file", tok)
	require.Equal(t, exitProblem, r.code, r.err+r.out)
	require.Contains(t, r.out, "$.runs[1]: rebuilt (absent), daemon {")
	require.Contains(t, r.out, audittest.RunUnlimited)

	// With --run, the run asked for alone is compared.
	r = crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--to", "30", "--run", audittest.RunBudget, "--diff",
		"--socket", "fake.sock", "--token-file", tok)
	require.Equal(t, exitProblem, r.code, r.err+r.out)
	require.NotContains(t, r.out, "$.runs[1]")
}
