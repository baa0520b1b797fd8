package projections

import (
	"bytes"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/events/msgpackappend"
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
	id := comeAndGoRun
	h := comeAndGoHistory(runs, func(i int) int { return i * 7 % runs })
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

// comeAndGoRun is the id of the r-th run of comeAndGoHistory.
func comeAndGoRun(r int) string { return fmt.Sprintf("team_20261001000000_%016x", r) }

// comeAndGoHistory creates runs runs, all running, then completes them in the order nth gives (the run completed
// i-th), but for every fifth run (r%5 == 0), which stays running: hot whatever the eviction.
func comeAndGoHistory(runs int, nth func(i int) int) history {
	var h history
	for r := range runs {
		h.add(comeAndGoRun(r), events.TypeRunCreated,
			&events.RunCreated{Team: "t", Workflow: "w", Goal: "g", Cwd: "/w"})
		h.add(comeAndGoRun(r), events.TypeRunRunning, &events.RunRunning{})
	}
	for i := range runs {
		if r := nth(i); r%5 != 0 {
			h.add(comeAndGoRun(r), events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
		}
	}
	return h
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

// The copy of the state that does not write the index (the published one, Evict) lets go of the runs the other copy
// wrote, when it makes them cold or once a failed write is retried, and compacts their entries as the writer does:
// else every run ever created kept its entry there, the copy the pages read, and a page skipped them all.
func TestTheOtherCopyCompactsTheEntriesOfTheRunsItLetsGo(t *testing.T) {
	const runs = 150
	id := comeAndGoRun
	h := comeAndGoHistory(runs, func(i int) int { return i })
	now := h.evs[len(h.evs)-1].UnixMilli() + 1
	want := fold(h.evs)
	for _, failed := range []bool{false, true} {
		fs := vfs.NewMem()
		l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
		require.NoError(t, err)
		appendEvents(t, l, h.evs)
		faults := sstReadFaults()
		if failed { // as TestAFailedWriteOfSummariesIsRetriedAndBothCopiesLetGo makes the first write fail
			require.NoError(t, l.SaveSummaries([]eventlog.Summary{{Stream: id(1), Ord: 1, Position: h.evs[3].Position,
				Data: []byte{summaryFormat}}}))
			require.NoError(t, l.Close())
			l, err = eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(fs, faults)})
			require.NoError(t, err)
		}
		work := fold(h.evs)
		work.SetColdStore(NewColdStore(l, 0))
		work.store.WriteIndex()
		pub := work.Clone()

		if failed {
			faults.On()
		}
		ids := work.EvictAll(now, 0, 0)
		for _, id := range ids {
			pub.Evict(id)
		}
		faults.Off()
		if failed {
			require.Equal(t, runs-runs/5, pub.ColdInMemory(), "kept in memory after the failed write")
			ids = work.EvictAll(now+1000, 0, 0)
			for _, id := range ids {
				pub.Evict(id)
			}
		}
		require.Len(t, ids, runs-runs/5)
		require.Zero(t, pub.ColdInMemory(), "failed %v", failed)
		require.LessOrEqual(t, len(pub.order), 2*pub.HotRuns()+orderSlack, "failed %v: entries compacted", failed)
		requireOrdered(t, pub)
		requireRunsAlike(t, want, pub, fmt.Sprintf("the other copy, failed %v", failed))
		require.NoError(t, l.Close())
	}
}

// BenchmarkSnapshotOfRunsInMemory collects the records a snapshot holds (toSnapshot, as EncodeSnapshot does, and
// NewSnapshotEncoder's copy, made under the engine's read lock) over 1,000 and 10,000 runs held in memory.
//
//	go test ./projections -run '^$' -bench SnapshotOfRunsInMemory -benchmem
func BenchmarkSnapshotOfRunsInMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		s := hotRuns(n)
		b.Run(fmt.Sprintf("collect/runs=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if snap := toSnapshot(s); len(snap.Runs) != n {
					b.Fatal(len(snap.Runs))
				}
			}
		})
		b.Run(fmt.Sprintf("encoder/runs=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewSnapshotEncoder(s)
			}
		})
	}
}

// sortedSnapshotOf is snapshotOf as it was before it walked s.order: every run in memory listed and sorted by
// creation ordinal. The reference the walk's bytes are held to.
func sortedSnapshotOf(s *State, hot func(*runState) snapshotRun) snapshot {
	n := len(s.runs) + len(s.cold)
	snap := snapshot{Position: s.Position, Config: s.config, RunCount: s.nruns, Ords: make([]int, 0, n),
		Runs: make([]snapshotRun, 0, n)}
	ids := slices.Collect(maps.Keys(s.runs))
	ids = append(ids, slices.Collect(maps.Keys(s.cold))...)
	ord := func(id string) int {
		if r := s.runs[id]; r != nil {
			return r.ord
		}
		return s.cold[id].ord
	}
	slices.SortFunc(ids, func(a, b string) int { return ord(a) - ord(b) })
	if s.store != nil && s.store.ViewsMissing() > 0 {
		snap.MissingViews = s.store.missingIDs()
	}
	for _, id := range ids {
		snap.Ords = append(snap.Ords, ord(id))
		if r := s.runs[id]; r != nil {
			snap.Runs = append(snap.Runs, hot(r))
			continue
		}
		cr := s.cold[id]
		sr := snapshotRun{Run: &cr.run, Last: cr.last, Cold: true, NoView: s.store != nil && s.store.viewMissing(id)}
		if cr.orch != nil {
			sr.Credentials = []*Credential{cr.orch}
		}
		snap.Runs = append(snap.Runs, sr)
	}
	return snap
}

// requireSnapshotAsSorted requires both encodings of s's snapshot (EncodeSnapshot, NewSnapshotEncoder) to be the
// bytes of sortedSnapshotOf's.
func requireSnapshotAsSorted(t *testing.T, s *State, what string) {
	t.Helper()
	snap := sortedSnapshotOf(s, snapshotRunOf)
	want, err := appendSnapshot(msgpackappend.Uint16(nil, SnapshotFormat), &snap, nil)
	require.NoError(t, err)
	got, err := EncodeSnapshot(s)
	require.NoError(t, err)
	require.Equal(t, want, got, "%s: EncodeSnapshot", what)
	var written bytes.Buffer
	_, err = NewSnapshotEncoder(s).WriteTo(&written)
	require.NoError(t, err)
	require.Equal(t, want, written.Bytes(), "%s: NewSnapshotEncoder", what)
}

// A snapshot lists the runs in memory by walking s.order, skipping the entries of the runs that left memory, where
// it sorted them all: its bytes are those of the sort for a state whose runs were created, made cold (their
// summaries to the index, or kept in memory) and read back, before and after the entries are compacted.
func TestASnapshotListsTheRunsInMemoryAsSortedByCreation(t *testing.T) {
	const runs = 150
	h := comeAndGoHistory(runs, func(i int) int { return i * 7 % runs })
	now := h.evs[len(h.evs)-1].UnixMilli() + 1
	for _, index := range []bool{true, false} {
		l := appendHistory(t, h.evs)
		s, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: index, Index: index})
		require.NoError(t, err)
		requireSnapshotAsSorted(t, s, fmt.Sprintf("cold, index %v", index))
		back := s.Clone()
		for r := runs - 1; r >= 0; r -= 3 {
			thawed, err := back.FaultIn(comeAndGoRun(r))
			require.NoError(t, err)
			s.ThawFrom(thawed)
		}
		requireSnapshotAsSorted(t, back, fmt.Sprintf("read back, index %v", index))
		requireSnapshotAsSorted(t, s, fmt.Sprintf("thawed from the other copy, index %v", index))
		back.EvictAll(now+1000, 0, 0)
		requireSnapshotAsSorted(t, back, fmt.Sprintf("cold again, index %v", index))
		if index {
			require.Greater(t, len(back.order), back.HotRuns()+back.ColdInMemory(),
				"entries of runs that left memory to skip")
		}
		for r := 0; r < runs; r += 2 { // entries compacted on the way
			thawed, err := back.FaultIn(comeAndGoRun(r))
			require.NoError(t, err)
			s.ThawFrom(thawed)
			if r%10 == 0 {
				back.EvictAll(now+2000, 0, 0)
			}
		}
		requireSnapshotAsSorted(t, back, fmt.Sprintf("come and gone, index %v", index))
		requireSnapshotAsSorted(t, s, fmt.Sprintf("thawed again, index %v", index))
	}
}

// coldThenHot is a log of cold runs runs that completed, created first, then hot runs still running, and the state
// LoadTiered folds from it, the completed runs' summaries written to the index: the oldest runs cold, as a daemon
// holds them.
func coldThenHot(tb testing.TB, cold, hot int) (*eventlog.Log, *State) {
	tb.Helper()
	var h history
	for r := range cold + hot {
		h.add(comeAndGoRun(r), events.TypeRunCreated,
			&events.RunCreated{Team: "t", Workflow: "w", Goal: "g", Cwd: "/w"})
		h.add(comeAndGoRun(r), events.TypeRunRunning, &events.RunRunning{})
		if r < cold {
			h.add(comeAndGoRun(r), events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
		}
	}
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(tb, err)
	tb.Cleanup(func() { l.Close() })
	for evs := range slices.Chunk(h.evs, 1000) { // one append a thousand events: the log is only read
		ws := make([]eventlog.Write, len(evs))
		for i, ev := range evs {
			ws[i] = logWrite(tb, ev)
		}
		_, err := l.Append(ws...)
		require.NoError(tb, err)
	}
	s, _, err := LoadTiered(l, Tiering{Now: h.evs[len(h.evs)-1].UnixMilli() + 1, Index: true})
	require.NoError(tb, err)
	require.Equal(tb, cold, s.ColdRuns())
	require.Equal(tb, hot, s.HotRuns())
	return l, s
}

// BenchmarkWhole reads every cold run back with Whole: 10,000 cold runs created before 0, 1,000 and 10,000 hot ones.
//
//	go test ./projections -run '^$' -bench Whole -benchmem
func BenchmarkWhole(b *testing.B) {
	for _, hot := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("cold=10000/hot=%d", hot), func(b *testing.B) {
			_, s := coldThenHot(b, 10000, hot)
			b.ReportAllocs()
			for b.Loop() {
				if w, err := s.Whole(); err != nil || w.HotRuns() != 10000+hot {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWholeOrder enters 10,000 cold runs read back in s.order, as Whole does, before 0, 1,000 and 10,000 hot
// runs created after them: one at a time (ordered, as ThawFrom enters one) or merged at once (orderedAll).
//
//	go test ./projections -run '^$' -bench WholeOrder -benchmem
func BenchmarkWholeOrder(b *testing.B) {
	const cold = 10000
	thawed := make([]orderedRun, cold)
	for r := range thawed {
		thawed[r] = orderedRun{r, comeAndGoRun(r)}
	}
	for _, hot := range []int{0, 1000, 10000} {
		order := make([]orderedRun, hot)
		for r := range order {
			order[r] = orderedRun{cold + r, comeAndGoRun(cold + r)}
		}
		for _, how := range []string{"one-at-a-time", "merged"} {
			b.Run(fmt.Sprintf("cold=%d/hot=%d/%s", cold, hot, how), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					s := &State{order: slices.Clone(order)}
					if how == "merged" {
						s.orderedAll(slices.Clone(thawed))
					} else {
						for _, e := range thawed {
							s.ordered(e.ord, e.id)
						}
					}
					if len(s.order) != cold+hot {
						b.Fatal(len(s.order))
					}
				}
			})
		}
	}
}

// orderedAll merges the entries it is given into s.order once each, in creation order, whatever their order and
// whether s.order holds them already (a run kept cold in memory, or one that left memory and whose entry stays).
func TestOrderedAllMergesEachEntryOnce(t *testing.T) {
	e := func(ords ...int) []orderedRun {
		out := make([]orderedRun, len(ords))
		for i, ord := range ords {
			out[i] = orderedRun{ord, comeAndGoRun(ord)}
		}
		return out
	}
	for _, c := range []struct {
		name           string
		order, entries []orderedRun
		want           []orderedRun
	}{
		{"none", e(1, 3), nil, e(1, 3)},
		{"into none", nil, e(0, 2), e(0, 2)},
		{"before", e(5, 6), e(1, 2), e(1, 2, 5, 6)},
		{"after", e(1, 2), e(5, 6), e(1, 2, 5, 6)},
		{"between", e(0, 4, 9), e(1, 5, 6, 10), e(0, 1, 4, 5, 6, 9, 10)},
		{"held already", e(0, 2, 4), e(2, 3, 4), e(0, 2, 3, 4)},
		{"out of order", e(0, 4), e(5, 1, 3), e(0, 1, 3, 4, 5)},
	} {
		s := &State{order: c.order}
		s.orderedAll(c.entries)
		require.Equal(t, c.want, s.order, c.name)
	}
}
