package picrew

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// TestImportDoesNotWriteToARunServedThroughTheSocket: a run of the store that has an orchestrator credential was
// created through crewd's socket (an import records no credential), and its principals decide what it records;
// crewd's import.append refuses every write to it. The one-shot import wrote into it all the same when a run
// directory of the crew root bore its id (a worker can make one under any name): the files' tasks, messages and end
// joined the run served through the socket, as the admin. The import now leaves such a run out, nothing of it
// recorded, reported; the other runs of the root are imported.
func TestImportDoesNotWriteToARunServedThroughTheSocket(t *testing.T) {
	const served, imported = "team_20261201120000_00000000000000cc", "team_20261201120000_00000000000000dd"
	l := openFuzzStore(t)
	defer l.Close()
	eng, err := commands.Open(l, commands.Options{Clock: valuesClock, ExpiryInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	r, err := eng.Submit(context.Background(), commands.Request{Principal: events.AdminPrincipal(), CommandID: "c1",
		Actor: events.Actor{Role: events.RoleAdmin},
		Command: &commands.RunCreate{RunID: served, Team: "core", Goal: "served", Cwd: "/w",
			OrchestratorDigest: strings.Repeat("ab", 32)}})
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	require.NoError(t, eng.Close())
	head, _ := l.Head()

	root := t.TempDir()
	for _, id := range []string{served, imported} {
		writeFiles(t, root, map[string]string{
			"state/runs/" + id + "/manifest.json": manifestOf(id, "completed"),
			"state/runs/" + id + "/tasks.json": `[{"id":"01_exec","stepId":"exec","role":"executor",` +
				`"status":"completed"}]`,
		})
	}
	var passes [][]string
	var runs []int
	for range 2 { // and again: the same report, nothing recorded
		sum, err := Import(l, root, &Options{Clock: valuesClock})
		require.NoError(t, err)
		var reports []string
		for _, s := range sum.Skipped {
			if s.Run == served {
				reports = append(reports, s.String())
			}
		}
		passes = append(passes, reports)
		runs = append(runs, len(sum.Runs))
	}
	var writes []string
	forEachEvent(t, l, func(ev *eventlog.Event) {
		if ev.Stream == served {
			writes = append(writes, ev.Type)
		}
	})
	require.Equal(t, []string{events.TypeRunCreated, events.TypeCredentialIssued}, writes,
		"the served run holds its own events only")
	s := stateOf(t, l)
	run, _ := s.Run(served)
	require.Equal(t, "served", run.Goal)
	require.Empty(t, s.Tasks(served))
	require.NotEmpty(t, s.Tasks(imported))
	after, _ := l.Head()
	require.Greater(t, after, head)
	require.Equal(t, []int{1, 1}, runs, "the other run is imported")
	for _, reports := range passes {
		require.Equal(t, []string{"state/runs/" + served + ": run not imported: the store's run " + served + " was " +
			"created through crewd's socket (it has an orchestrator credential), and an import does not " +
			"write to it"}, reports)
	}
}
