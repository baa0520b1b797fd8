package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker/wire"
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

// TestDaemonThatCannotReadARunIsNoProblemFound: crewd answers replay-failed for a finished run it cannot read back
// from its log. Nothing was then compared or shown, so show, tasks, replay --diff and events --follow against it exit
// 3 (the store could not be read), saying why, where they exited 1, which to replay --diff means differences found
// between the daemon and the log.
func TestDaemonThatCannotReadARunIsNoProblemFound(t *testing.T) {
	f := newFake(t)
	f.fail = map[string]*wire.Error{"query.tasks": wire.NewError(wire.CodeReplayFailed, "")}
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	for _, args := range [][]string{
		{"show", "run", audittest.RunBudget},
		{"tasks", audittest.RunBudget},
		{"replay", "--data", scenarioData(t), "--run", audittest.RunBudget, "--diff", "--socket", "fake.sock"},
	} {
		r := crewctl(t, f.dial, append(args, "--token-file", tok)...)
		require.Equal(t, exitOpen, r.code, "%v: %s%s", args, r.out, r.err)
		require.Empty(t, r.out, "%v", args)
		require.Contains(t, r.err, "replay-failed", "%v", args)
	}

	// A tail whose subscription crewd cannot replay: the page before it is printed, and the same exit.
	f.fail = map[string]*wire.Error{"events.subscribe": wire.NewError(wire.CodeReplayFailed, "")}
	r := crewctl(t, f.dial, "events", "--run", audittest.RunBudget, "--follow", "--token-file", tok)
	require.Equal(t, exitOpen, r.code, r.out+r.err)
	require.Contains(t, r.err, "replay-failed")
}

// TestViewsOfTextsCrewdOmitted: crewd sends a run, a task or a delegation whose texts would not fit in its frame
// without them (textsOmitted). show run says the goal was omitted, and tasks the title, where they printed an empty
// one, delegations --json keeps the flag, and replay --diff compares what crewd sent, where every such goal,
// summary, title, cwd, model, error and reason was a difference between the daemon and the log.
func TestViewsOfTextsCrewdOmitted(t *testing.T) {
	f := newFake(t)
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	r := crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--run", audittest.RunBudget, "--diff",
		"--socket", "fake.sock", "--token-file", tok)
	require.Equal(t, exitOK, r.code, "the views as sent whole: %s%s", r.out, r.err)

	f.omitTexts = true
	r = crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--run", audittest.RunBudget, "--diff",
		"--socket", "fake.sock", "--token-file", tok)
	require.Equal(t, exitOK, r.code, "the views as sent without their texts: %s%s", r.out, r.err)

	r = crewctl(t, f.dial, "show", "run", audittest.RunBudget, "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "goal: (omitted: larger than crewd's frame; the dashboard shows it)")
	r = crewctl(t, f.dial, "tasks", audittest.RunBudget, "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "(omitted: larger than crewd's frame; the dashboard shows it)")
	r = crewctl(t, f.dial, "delegations", audittest.RunBudget, "--json", "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, `"textsOmitted": true`)
	r = crewctl(t, f.dial, "show", "run", audittest.RunBudget, "--json", "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, `"textsOmitted": true`)
}
