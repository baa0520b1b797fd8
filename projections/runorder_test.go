package projections

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// hotRuns is a state holding n runs in memory, all running.
func hotRuns(n int) *State {
	var h history
	for r := range n {
		run := fmt.Sprintf("team_20261001000000_%016x", r)
		h.add(run, events.TypeRunCreated, &events.RunCreated{Team: "t", Workflow: "w", Goal: "a goal of a few words",
			Cwd: "/w"})
		h.add(run, events.TypeRunRunning, &events.RunRunning{})
	}
	return fold(h.evs)
}

// BenchmarkRunsPageInMemory pages the runs list as the dashboard's first page does (newest first, 100 a page) over
// 1,000 and 10,000 runs held in memory, under the published state's read lock.
//
//	go test ./projections -run '^$' -bench RunsPageInMemory -benchmem
func BenchmarkRunsPageInMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			s := hotRuns(n)
			f := RunFilter{Newest: true, Limit: 100, MaxScan: 5000}
			b.ReportAllocs()
			for b.Loop() {
				if page, err := s.Runs(f); err != nil || len(page.Runs) != 100 {
					b.Fatal(err, len(page.Runs))
				}
			}
		})
	}
}

// pageAlloc is the bytes a page of f allocates over s, on average over a few pages.
func pageAlloc(t *testing.T, s *State, f RunFilter) uint64 {
	t.Helper()
	const pages = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range pages {
		page, err := s.Runs(f)
		require.NoError(t, err)
		require.Len(t, page.Runs, f.Limit)
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / pages
}

// TestARunsPageDoesNotListEveryRunInMemory: a page of runs listed every run memory holds and sorted them by creation
// ordinal, whatever its limit, under the published state's read lock, which the publisher waits for: a page of 10
// runs of 10,000 allocated and sorted 10,000 entries (about 160 KiB, 1 to 3 ms for a page of 100). The runs in memory
// are now kept in order as they come and go, and a page visits only the runs it looks at.
func TestARunsPageDoesNotListEveryRunInMemory(t *testing.T) {
	for _, f := range []RunFilter{
		{Limit: 10, Newest: true},
		{Limit: 10},
		{Limit: 10, Cursor: strconv.FormatUint(500, 36)},
		{Limit: 10, Newest: true, Cursor: strconv.FormatUint(500, 36)},
	} {
		small, large := pageAlloc(t, hotRuns(1000), f), pageAlloc(t, hotRuns(10000), f)
		require.Less(t, large, small+4<<10, "%+v: a page of 10,000 runs in memory allocates %d bytes, of 1,000 %d",
			f, large, small)
	}
}

// The runs in memory stay in creation order as runs go cold (their summaries to the index, or kept in memory when
// the index is not written) and come back (read back), their entries compacted on the way: every page answers as
// from a state that keeps every run hot.
func TestRunsInMemoryStayInOrderAsTheyComeAndGo(t *testing.T) {
	const runs = 150
	var h history
	id := func(r int) string { return fmt.Sprintf("team_20261001000000_%016x", r) }
	for r := range runs {
		h.add(id(r), events.TypeRunCreated, &events.RunCreated{Team: "t", Workflow: "w", Goal: "g", Cwd: "/w"})
		h.add(id(r), events.TypeRunRunning, &events.RunRunning{})
	}
	for i := range runs {
		if r := i * 7 % runs; r%5 != 0 {
			h.add(id(r), events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
		}
	}
	now := h.evs[len(h.evs)-1].UnixMilli() + 1
	want := fold(h.evs)
	for _, index := range []bool{true, false} {
		l := appendHistory(t, h.evs)
		s, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: index, Index: index})
		require.NoError(t, err)
		require.Equal(t, runs/5, s.HotRuns())
		if index {
			require.Less(t, len(s.order), runs/2, "the entries of the runs that left memory compacted")
		}
		requireOrdered(t, s)
		requireRunsAlike(t, want, s, fmt.Sprintf("cold, index %v", index))
		back := s.Clone()
		for r := runs - 1; r >= 0; r -= 3 {
			_, err := back.FaultIn(id(r))
			require.NoError(t, err)
		}
		requireOrdered(t, back)
		requireOrdered(t, s)
		requireRunsAlike(t, want, back, fmt.Sprintf("read back, index %v", index))
		requireRunsAlike(t, want, s, fmt.Sprintf("the copy read back from, index %v", index))
	}
}

// requireOrdered requires s.order to hold every run in memory once, by creation ordinal.
func requireOrdered(t *testing.T, s *State) {
	t.Helper()
	var listed []string
	for i, e := range s.order {
		require.True(t, i == 0 || s.order[i-1].ord < e.ord, "entry %d out of order", i)
		if run := s.memRun(e.id); run != nil {
			listed = append(listed, e.id)
			ord := 0
			if r := s.runs[e.id]; r != nil {
				ord = r.ord
			} else {
				ord = s.cold[e.id].ord
			}
			require.Equal(t, ord, e.ord, "entry %d of run %s", i, e.id)
		}
	}
	inMemory := slices.Collect(maps.Keys(s.runs))
	inMemory = append(inMemory, slices.Collect(maps.Keys(s.cold))...)
	require.ElementsMatch(t, inMemory, listed)
}
