package commands

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// stepBack is a step of the wall clock back further than the engine holds its time for (maxHold): the engine's
// time follows it, and what was recorded before is dated ahead of it.
const stepBack = 24 * time.Hour

// After the clock steps back beyond maxHold, the writer still makes runs cold: a pass is due a pass interval after
// the last one by the engine's time, not only once that time is past the time the last pass planned the next for,
// which the step put a day ahead, a day in which every run that ended stayed hot whatever the retention and the cap.
func TestEvictionGoesOnAfterTheClockStepsBack(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention time.Duration
		ended     int
		wantHot   int
	}{
		{"no retention", -1, 3, 0},
		{"more ended runs than are retained", time.Hour, MaxRetainedRuns + 5, MaxRetainedRuns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := openColdEngine(t, Options{SnapshotEvery: -1, Retention: tc.retention})
			// a pass plans the next by the clock before the step
			require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "A", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
			f.clock.Advance(-stepBack)
			endRuns(t, f, "C", tc.ended)
			require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "N", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
			f.eng.Read(func(s *projections.State) {
				hot := 0
				for i := range tc.ended {
					if s.IsHot(fmt.Sprintf("C%02d", i)) {
						hot++
					}
				}
				require.Equal(t, tc.wantHot, hot, "ended runs kept hot after the step back")
			})
		})
	}
}

// An ended run whose last event is stamped ahead of the engine's time (recorded before the clock stepped back, or
// by an earlier crewd, or an importer whose clock was ahead) is retained from when a pass first found it ended, not
// until its stamp: as many such runs as MaxRetainedRuns neither keep every run that ends after them cold at once nor
// stay hot themselves once the retention has passed by the engine's time.
func TestRunsStampedAheadDoNotHoldTheRetention(t *testing.T) {
	f := openColdEngine(t, Options{SnapshotEvery: -1, Retention: time.Hour})
	endRuns(t, f, "F", MaxRetainedRuns)
	f.clock.Advance(-stepBack)
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "N", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	const later = 6
	endRuns(t, f, "C", later)
	f.eng.Read(func(s *projections.State) {
		for i := range later {
			require.True(t, s.IsHot(fmt.Sprintf("C%02d", i)), "run C%02d, ended last, went cold at once", i)
			require.True(t, s.IsCold(fmt.Sprintf("F%02d", i)), "run F%02d, ended first, kept its place", i)
		}
	})
	f.clock.Advance(time.Hour)
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "M", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	f.eng.Read(func(s *projections.State) {
		require.Equal(t, MaxRetainedRuns+later, s.ColdRuns(), "ended runs hot an hour after their retention passed")
	})
}

// An imported run its files leave live (a pi-crew runtime that died mid-run) stays hot however long it is left: only
// an end makes a run cold, and an import's files are the truth of their runs. The admin ends it (run.transition,
// as for any run), and it goes cold at the next eviction pass.
func TestAnImportedRunLeftLiveIsHotUntilTheAdminEndsIt(t *testing.T) {
	f := openColdEngine(t, Options{SnapshotEvery: -1, Retention: -1})
	for _, req := range []Request{
		importOf("I", "import:I:run", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}),
		importOf("I", "import:I:running", events.TypeRunRunning, &events.RunRunning{}),
	} {
		r, err := f.eng.Submit(context.Background(), req)
		require.NoError(t, err)
		require.Nil(t, r.Rejected)
	}
	f.clock.Advance(30 * 24 * time.Hour)
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "N", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	f.eng.Read(func(s *projections.State) { require.True(t, s.IsHot("I"), "a live run went cold") })

	require.Nil(t, f.submitAs(admin, &RunTransition{RunID: "I", To: "cancelled"}).Rejected)
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "M", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	f.eng.Read(func(s *projections.State) { require.True(t, s.IsCold("I"), "the run the admin ended is hot") })
}

// The writer looks for runs to make cold at most once a second of the engine's time (evictPassEvery), however many
// groups it hands off meanwhile: each pass walks the ended hot runs, which a flood of small commands must not have it
// walk once a group.
func TestEvictionPassesComeAtMostOnceASecond(t *testing.T) {
	var passes atomic.Int32
	f := openColdEngine(t, Options{SnapshotEvery: -1, Retention: time.Hour,
		hooks: &testHooks{missingViewsDecided: func(bool, bool) { passes.Add(1) }}})
	create := func(id string) {
		t.Helper()
		r, err := f.eng.Submit(context.Background(), Request{Actor: admin,
			Command: &RunCreate{RunID: id, Team: "t", Goal: "g", Cwd: "/w"}})
		require.NoError(t, err)
		require.Nil(t, r.Rejected)
	}
	create("A")
	first := passes.Load()
	require.Positive(t, first, "a pass is due at the first group")
	for i := range 5 {
		f.clock.Advance(199 * time.Millisecond)
		create(fmt.Sprintf("B%d", i))
	}
	require.Equal(t, first, passes.Load(), "no pass within a second of the last")
	f.clock.Advance(5 * time.Millisecond)
	create("C")
	require.Equal(t, first+1, passes.Load(), "the next pass a second after the last")
}
