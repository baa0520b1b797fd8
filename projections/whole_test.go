package projections_test

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
	"github.com/crewlog/crewlog/projections/projectionstest"
)

// Whole enters the cold runs it reads back in the order of the runs in memory at once, where it entered them one at
// a time: it answers as the fold that keeps every run hot, for cold runs summarised in the index or kept in memory,
// before, between and after hot ones, some read back and made cold again (their entries left behind).
func TestWholeAnswersAsTheFullFold(t *testing.T) {
	const runs = 200 // NB: more than orderSlack beyond twice the hot runs, so that entries are compacted
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	do := func(actor events.Actor, c commands.Command) {
		t.Helper()
		_, err := w.Buffer(actor, c)
		require.NoError(t, err)
	}
	id := func(r int) string { return fmt.Sprintf("run-%03d", r) }
	for r := range runs {
		do(audittest.Admin, &commands.RunCreate{RunID: id(r), Team: "t", Goal: "g", Cwd: "/w"})
		do(audittest.Orchestrator, &commands.RunTransition{RunID: id(r), To: "running"})
		do(audittest.Orchestrator, &commands.TaskCreate{RunID: id(r), TaskID: "01_work", Role: "explorer", Agent: "a",
			Title: "w", Cwd: "/w", StepID: "s"})
		do(audittest.Orchestrator, &commands.MessageSend{RunID: id(r), To: []string{"01_work"}, Body: "go"})
	}
	for r := range runs {
		if r%4 != 1 { // the others stay running: hot, between the cold ones and after them
			do(audittest.Orchestrator, &commands.RunTransition{RunID: id(r), To: "completed"})
		}
	}
	require.NoError(t, w.Flush())
	now := w.Now/1e6 + 1
	full := projections.New()
	require.NoError(t, projections.Replay(full, l, 0))
	want := projectionstest.Answers(t, full, now)
	for _, index := range []bool{true, false} {
		s, _, err := projections.LoadTiered(l, projections.Tiering{Now: now, Index: index})
		require.NoError(t, err)
		require.Equal(t, runs/4, s.HotRuns(), "index %v", index)
		whole, err := s.Whole()
		require.NoError(t, err)
		projectionstest.RequireSame(t, want, projectionstest.Answers(t, whole, now),
			fmt.Sprintf("cold, index %v", index))
		for r := 0; r < runs; r += 3 {
			_, err := s.FaultIn(id(r))
			require.NoError(t, err)
		}
		s.EvictAll(now, 0, 0)
		for r := 0; r < runs; r += 5 {
			_, err := s.FaultIn(id(r))
			require.NoError(t, err)
		}
		require.Greater(t, s.HotRuns(), runs/4, "index %v: runs read back", index)
		whole, err = s.Whole()
		require.NoError(t, err)
		projectionstest.RequireSame(t, want, projectionstest.Answers(t, whole, now),
			fmt.Sprintf("come and gone, index %v", index))
	}
}
