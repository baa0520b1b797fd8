package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
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

// TestViewsOfDelegationNamesCrewdOmitted: crewd sends a delegation that would not fit in its frame without its texts
// either without its role and runId (namesOmitted; the runId is the run asked about). delegations printed the empty
// role as the role and --json an empty runId, and replay --diff reported each as a difference between the daemon and
// the log. delegations now says the role was omitted, crewctl puts the runId back, and the diff compares what crewd
// sent.
func TestViewsOfDelegationNamesCrewdOmitted(t *testing.T) {
	f := newFake(t)
	f.omitDelegationNames = true
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	require.NotEmpty(t, f.s.Delegations(audittest.RunBudget), "the scenario's run holds delegations")
	r := crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--run", audittest.RunBudget, "--diff",
		"--socket", "fake.sock", "--token-file", tok)
	require.Equal(t, exitOK, r.code, "the views as sent without their names: %s%s", r.out, r.err)
	require.Contains(t, r.out, "0 difference(s)")

	r = crewctl(t, f.dial, "delegations", audittest.RunBudget, "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, omittedNote)
	require.NotContains(t, r.out, "explorer")
	r = crewctl(t, f.dial, "delegations", audittest.RunBudget, "--json", "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	var shown struct{ Delegations []broker.WireDelegation }
	require.NoError(t, json.Unmarshal([]byte(r.out), &shown))
	require.NotEmpty(t, shown.Delegations)
	for _, d := range shown.Delegations {
		require.True(t, d.NamesOmitted)
		require.Equal(t, audittest.RunBudget, d.RunID, "crewctl puts back the runId crewd left out")
	}
}

// TestViewsOfNamesAndDependsOnCrewdOmitted: crewd sends a run or a task that would not fit in its frame without its
// texts either without its names (namesOmitted: a run's team, workflow and cwd, a task's role, agent, stepId,
// failureCause and runId), and a task without its dependsOn (dependsOnOmitted). show run, runs and tasks printed the
// empty names as if they were the names, show run --json a task without its dependencies, and replay --diff reported
// each omission as a difference between the daemon and the log. The views now say the names were omitted, crewctl
// reads a dependsOn crewd left out page by page (query.tasks {taskId}) and puts the runId back, and the diff compares
// what crewd sent.
func TestViewsOfNamesAndDependsOnCrewdOmitted(t *testing.T) {
	data, socket := liveDaemonWith(t, broker.Options{MaxFrame: wire.MaxFrameFloor})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := adminOf(t, ctx, socket)
	// NB: a char of four bytes takes four in the request and in the answer: the run.create and the task.create fit
	// in the frame, and the run and the task read back, with every field the engine adds, do not.
	wide := strings.Repeat("😀", 200)
	run := callOK(t, ctx, a, "run.create", map[string]any{"team": "t", "goal": "g", "cwd": "/" + wide})["runId"].(string)
	callOK(t, ctx, a, "run.transition", map[string]any{"runId": run, "to": "running"})
	names := strings.Repeat("😀", 60)
	callOK(t, ctx, a, "task.create", map[string]any{"runId": run, "taskId": "W", "role": names, "agent": names,
		"stepId": names, "title": "w", "cwd": "/w"})
	var deps []any
	for i := range 16 {
		id := fmt.Sprintf("D%02d-%s", i, strings.Repeat("d", 44))
		callOK(t, ctx, a, "task.create", map[string]any{"runId": run, "taskId": id, "role": "r", "agent": "a",
			"title": "t", "cwd": "/w"})
		deps = append(deps, id)
	}
	callOK(t, ctx, a, "task.create", map[string]any{"runId": run, "taskId": "X", "role": "r", "agent": "a",
		"title": "t", "cwd": "/w", "dependsOn": deps})

	b, err := dialBroker(ctx, socket, liveToken)
	require.NoError(t, err)
	defer b.Close()
	sent, err := callPaged[broker.WireTask](ctx, b, "query.tasks", "tasks", run)
	require.NoError(t, err)
	require.Equal(t, "W", sent[0].TaskID)
	require.True(t, sent[0].NamesOmitted, "crewd leaves W's names out")
	require.Empty(t, sent[0].RunID, "and its runId: the run asked about")
	require.Equal(t, "X", sent[len(sent)-1].TaskID)
	require.True(t, sent[len(sent)-1].DependsOnOmitted, "crewd leaves X's dependsOn out")
	require.False(t, sent[len(sent)-1].NamesOmitted)
	var sentRun broker.WireRun
	require.NoError(t, a.Call(ctx, "query.run", map[string]any{"runId": run}, &sentRun))
	require.True(t, sentRun.NamesOmitted, "crewd leaves the run's names out")

	on := []string{"--data", data, "--socket", socket}
	r := crewctl(t, dialBroker, append([]string{"show", "run", run}, on...)...)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "team "+omittedNote)
	require.Contains(t, r.out, "W  "+omittedNote)
	r = crewctl(t, dialBroker, append([]string{"tasks", run}, on...)...)
	require.Equal(t, exitOK, r.code, r.err)
	require.Regexp(t, `W +\(omitted: `, r.out)
	r = crewctl(t, dialBroker, append([]string{"runs"}, on...)...)
	require.Equal(t, exitOK, r.code, r.err)
	require.Regexp(t, run+` +running +\(omitted: `, r.out)

	r = crewctl(t, dialBroker, append([]string{"show", "run", run, "--json"}, on...)...)
	require.Equal(t, exitOK, r.code, r.err)
	var shown runViews
	require.NoError(t, json.Unmarshal([]byte(r.out), &shown))
	x := shown.Tasks[len(shown.Tasks)-1]
	require.Equal(t, "X", x.TaskID)
	require.Len(t, x.DependsOn, len(deps), "crewctl reads the dependsOn crewd left out")
	require.Equal(t, deps[15], x.DependsOn[15])
	require.False(t, x.DependsOnOmitted, "what crewctl shows is the whole list")
	require.True(t, shown.Tasks[0].NamesOmitted)
	require.Equal(t, run, shown.Tasks[0].RunID, "crewctl puts back the runId crewd left out")
	require.True(t, shown.Run.NamesOmitted)

	// The log, read from a backup while crewd runs, holds what crewd sent without: no difference.
	dest := filepath.Join(t.TempDir(), "backup")
	r = crewctl(t, dialBroker, "backup", dest, "--data", data, "--socket", socket)
	require.Equal(t, exitOK, r.code, r.out+r.err)
	r = crewctl(t, dialBroker, "replay", "--data", dest, "--diff", "--socket", socket, "--token-file",
		filepath.Join(data, adminTokenFile))
	require.Equal(t, exitOK, r.code, r.out+r.err)
	require.Contains(t, r.out, "0 difference(s)")
}

// TestViewsOfSlotHoldersCrewdOmitted: crewd lists only the first holders of the pool that fit in its frame when all
// would not (subIdsOmitted). slots printed the pool as if those were all its holders; it now says how many it left
// out, and --json keeps the flag.
func TestViewsOfSlotHoldersCrewdOmitted(t *testing.T) {
	f := newFake(t)
	f.slots = &broker.WireSlots{Slots: projections.Slots{Held: 3, Capacity: 64, SubIDs: []string{"gc-1"}},
		SubIDsOmitted: true}
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	r := crewctl(t, f.dial, "slots", "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "slots 3/64 held\n  gc-1\n  2 more "+omittedNote)
	r = crewctl(t, f.dial, "slots", "--json", "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, `"subIdsOmitted": true`)
}

// TestTheDiffComparesTheSlotHoldersCrewdListed: replay --diff compares the holders crewd listed when it left some
// out (subIdsOmitted), the first of the rebuilt pool's, where every holder it left out was a difference.
func TestTheDiffComparesTheSlotHoldersCrewdListed(t *testing.T) {
	mine := projections.Slots{Held: 3, Capacity: 64, SubIDs: []string{"a", "b", "c"}}
	cutAsSent(&mine, broker.WireSlots{Slots: projections.Slots{Held: 3, Capacity: 64, SubIDs: []string{"a"}},
		SubIDsOmitted: true})
	require.Equal(t, []string{"a"}, mine.SubIDs)
	mine.SubIDs = []string{"a", "b", "c"}
	cutAsSent(&mine, broker.WireSlots{Slots: projections.Slots{Held: 3, Capacity: 64, SubIDs: []string{"a", "b", "c"}}})
	require.Equal(t, []string{"a", "b", "c"}, mine.SubIDs, "a pool crewd sent whole is compared whole")
}

// TestReplayDiffLiveRunTheDaemonLacks: a run the log holds that the daemon does not (a daemon that lost it, or one
// restored from an older backup) is a difference, the run absent on the daemon's side, where crewd's no-manifest for
// it ended replay --diff with the query's error: nothing compared, no document with --json.
func TestReplayDiffLiveRunTheDaemonLacks(t *testing.T) {
	f := newFake(t)
	l, err := eventlog.Open(filepath.Join(scenarioData(t), storeDir), &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	f.s = projections.New()
	require.NoError(t, projections.Replay(f.s, l, 30)) // the daemon's runs: the first one alone
	require.NoError(t, l.Close())
	_, held := f.s.Run(audittest.RunUnlimited)
	require.False(t, held)
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	r := crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--diff", "--socket", "fake.sock",
		"--token-file", tok)
	require.Equal(t, exitProblem, r.code, r.err+r.out)
	require.Contains(t, r.out, "$.runs[1]: rebuilt {")
	require.Contains(t, r.out, audittest.RunUnlimited+`"`)
	require.Contains(t, r.out, "}, daemon (absent)\n")

	r = crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--run", audittest.RunUnlimited, "--diff",
		"--socket", "fake.sock", "--token-file", tok, "--json")
	require.Equal(t, exitProblem, r.code, r.err+r.out)
	var out replayOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	var runs []audit.Difference // the pool differs too: the daemon's is at position 30
	for _, d := range out.Diff.Differences {
		if strings.HasPrefix(d.Path, "$.runs") {
			runs = append(runs, d)
		}
	}
	require.Len(t, runs, 1)
	require.Equal(t, "$.runs[0]", runs[0].Path)
	require.Equal(t, "(absent)", runs[0].Right)
}
