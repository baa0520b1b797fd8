package projections

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// mixedRuns is the number of runs of mixedHistory: coprime with 7, the
// stride its runs change status in; mixedEnded of them end (r mod 6 in
// 1..3).
const (
	mixedRuns  = 40
	mixedEnded = 21
)

// mixedHistory creates mixedRuns runs, then moves them, in an order other
// than their creation's, to every status: running, completed, failed,
// cancelled, left queued, blocked (by run index mod 6), so that the ended
// ones (half of them) go cold out of creation order. The admin issues each
// run's orchestrator credential, and revokes it before it cancels the run:
// a cold run's summary holds who did and why.
func mixedHistory() []events.Event {
	var h history
	h.add(events.EngineStream, events.TypeEngineConfigured,
		&events.EngineConfigured{MaxSlots: 8, UnmeteredDelegates: events.UnmeteredAllow})
	id := func(r int) string { return fmt.Sprintf("team_20261001000000_%016x", r) }
	for r := range mixedRuns {
		h.add(id(r), events.TypeRunCreated, &events.RunCreated{Team: "t", Workflow: "w",
			Goal: fmt.Sprintf("goal %d", r), Cwd: "/w"})
		h.addBy(byAdmin, id(r), events.TypeCredentialIssued,
			&events.CredentialIssued{TaskID: events.OrchestratorKey, Role: events.RoleOrchestrator, Digest: "d"})
		h.add(id(r), events.TypeTaskCreated, &events.TaskCreated{TaskID: "00_step", Role: "executor",
			Agent: "executor", Title: "step", Cwd: "/w"})
	}
	for i := range mixedRuns {
		r := i * 7 % mixedRuns
		run := id(r)
		if r%6 != 4 {
			h.add(run, events.TypeRunRunning, &events.RunRunning{})
		}
		switch r % 6 {
		case 1:
			h.add(run, events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
		case 2:
			h.add(run, events.TypeRunFailed, &events.RunFailed{Reason: "broke"})
		case 3:
			h.addBy(byAdmin, run, events.TypeCredentialRevoked,
				&events.CredentialRevoked{TaskID: events.OrchestratorKey, Reason: "stop"})
			h.addBy(byAdmin, run, events.TypeRunCancelled, &events.RunCancelled{Reason: "stop"})
		case 5:
			h.add(run, events.TypeRunBlocked, &events.RunBlocked{Reason: "wait"})
		}
	}
	return h.evs
}

// snapshotAndRestart saves s as the log's snapshot and loads the state
// again from it, as the engine does (views and summaries written).
func snapshotAndRestart(t *testing.T, l *eventlog.Log, s *State, now int64) *State {
	t.Helper()
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(s.Position, b))
	restarted, info, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	require.Equal(t, s.Position, info.SnapshotPosition)
	return restarted
}

// requireRunsAlike asks s and want every page of runs any filter, limit
// and cursor can ask for (and cursors no page gave) and requires the same
// answers: a run missing from the index, or out of order, or a cursor
// pointing elsewhere, fails it.
func requireRunsAlike(t *testing.T, want, s *State, what string) {
	t.Helper()
	statusSets := [][]RunStatus{nil, {RunCompleted}, {RunFailed, RunCancelled}, {RunRunning}, {RunQueued, RunBlocked},
		{RunRunning, RunCompleted}, {RunCancelled}}
	n := want.nruns
	cursors := []string{"", strconv.FormatUint(uint64(n), 36), "zz", "-1", "!"}
	for c := range n {
		cursors = append(cursors, strconv.FormatUint(uint64(c), 36))
	}
	asked := 0
	for _, st := range statusSets {
		for _, newest := range []bool{false, true} {
			for _, limit := range []int{0, 1, 2, 7} {
				for _, scan := range []int{0, 1, 3} {
					for _, cursor := range cursors {
						f := RunFilter{Statuses: st, Limit: limit, Newest: newest, Cursor: cursor, MaxScan: scan}
						wantPage, wantErr := want.Runs(f)
						page, err := s.Runs(f)
						if wantErr != nil {
							require.ErrorIs(t, err, ErrBadCursor, "%s: %+v", what, f)
							continue
						}
						require.NoError(t, err, "%s: %+v", what, f)
						if !s.indexedRuns() {
							require.Zero(t, page.IndexRead,
								"%s: %+v: a page of the runs in memory reads no index", what, f)
						}
						// NB: what the page answers, not what it read: the index, or memory, or both.
						wantPage.IndexRead, page.IndexRead = 0, 0
						require.Equal(t, wantPage, page, "%s: %+v", what, f)
						asked++
					}
				}
			}
		}
	}
	require.Greater(t, asked, 1000, what)
}

// The runs list answers alike from memory and from the index of cold
// runs' summaries, whichever mix of the two holds them: every filter,
// limit and cursor.
func TestRunsFromTheIndexAnswerAsFromMemory(t *testing.T) {
	evs := mixedHistory()
	l := appendHistory(t, evs)
	now := evs[len(evs)-1].UnixMilli() + 1
	want := fold(evs)
	require.Equal(t, mixedRuns, want.HotRuns())

	indexed, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	require.Empty(t, indexed.cold, "every cold run's summary is in the index")
	require.Equal(t, mixedEnded, indexed.ColdRuns())
	require.Equal(t, mixedRuns-mixedEnded, indexed.HotRuns())
	requireRunsAlike(t, want, indexed, "index")

	// no index, and writes none: summaries in memory
	offline, _, err := LoadTiered(appendHistory(t, evs), Tiering{Now: now})
	require.NoError(t, err)
	require.Len(t, offline.cold, mixedEnded)
	requireRunsAlike(t, want, offline, "memory")

	// Some cold runs hot again, one summary in memory and in the index.
	mixed := indexed.Clone()
	var cold []string
	for _, id := range runIDs(t, indexed) {
		if indexed.IsCold(id) {
			cold = append(cold, id)
		}
	}
	for _, id := range cold[:3] {
		_, err := mixed.FaultIn(id)
		require.NoError(t, err)
	}
	mixed.cold[cold[5]] = mixed.coldRun(cold[5])
	requireRunsAlike(t, want, mixed, "mixed")

	restarted := snapshotAndRestart(t, l, indexed, now)
	require.Empty(t, restarted.cold)
	requireRunsAlike(t, want, restarted, "snapshot")

	// Every other query too, run by run.
	whole, err := restarted.Whole()
	require.NoError(t, err)
	require.Equal(t, want, whole)
	for _, id := range cold {
		for _, s := range []*State{indexed, restarted} {
			run, ok := s.Run(id)
			require.True(t, ok)
			wantRun, _ := want.Run(id)
			require.Equal(t, wantRun, run)
			st, _ := s.RunStatus(id)
			require.Equal(t, wantRun.Status, st)
			cred, ok := s.Credential(id, events.OrchestratorKey)
			require.True(t, ok)
			wantCred, _ := want.Credential(id, events.OrchestratorKey)
			require.Equal(t, wantCred, cred)
		}
	}
	_, ok := restarted.Run("team_20261001000000_ffffffffffffffff")
	require.False(t, ok)
	require.False(t, restarted.IsCold(events.EngineStream))
}

// A snapshot older than the index: a run cold in the snapshot that was
// read back, written to and made cold again (a newer version of its
// summary), and a run created after it and made cold, are seen by the
// state the snapshot gives as they were at its position, so the tail
// folds onto the right records; the state then answers as the full fold.
func TestRunsIndexVersionsHoldForAnOlderSnapshot(t *testing.T) {
	evs := mixedHistory()
	l := appendHistory(t, evs)
	now := evs[len(evs)-1].UnixMilli() + 1
	first, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	b, err := EncodeSnapshot(first)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(first.Position, b))

	reopened := firstColdRun(t, first)
	before, _ := first.Run(reopened)
	h := history{evs: append([]events.Event(nil), evs...), versions: map[string]uint64{}}
	for _, ev := range evs {
		h.versions[ev.Stream] = ev.StreamVersion
	}
	late := "team_20261001000000_00000000000000aa"
	tail := []events.Event{
		h.add(reopened, events.TypeTaskUsage, &events.TaskUsage{TaskID: "00_step", Input: 10, Output: 5}),
		h.add(reopened, events.TypeRunFailed, &events.RunFailed{Reason: "again"}),
		h.add(late, events.TypeRunCreated, &events.RunCreated{Team: "t", Workflow: "w", Goal: "late", Cwd: "/w"}),
		h.add(late, events.TypeRunCancelled, &events.RunCancelled{Reason: "late"}),
	}
	appendEvents(t, l, tail)
	all := append(append([]events.Event(nil), evs...), tail...)
	want := fold(all)
	later := all[len(all)-1].UnixMilli() + 1

	// The daemon folds the tail and makes both runs cold (newer versions
	// of their summaries), then stops before its next snapshot.
	second, info, err := LoadTiered(l, Tiering{Now: later, SaveViews: true, Index: true})
	require.NoError(t, err)
	require.Equal(t, first.Position, info.SnapshotPosition)
	require.True(t, second.IsCold(reopened))
	require.True(t, second.IsCold(late))
	require.Empty(t, second.cold)
	requireRunsAlike(t, want, second, "after the tail")
	// Either way a page of every run reads every version in the index once, and counts it (RunPage.IndexRead): the
	// newest first read the older version of the reopened run, the first cold one, after the last run it reported.
	oldest, err := second.Runs(RunFilter{})
	require.NoError(t, err)
	newest, err := second.Runs(RunFilter{Newest: true})
	require.NoError(t, err)
	require.Positive(t, oldest.IndexRead)
	require.Equal(t, oldest.IndexRead, newest.IndexRead, "the bytes of the index a page of every run read")

	// The snapshot's state, before its tail: the versions written since
	// are not its own.
	snap, err := l.LatestSnapshot()
	require.NoError(t, err)
	atSnapshot, err := DecodeSnapshot(snap.Data)
	require.NoError(t, err)
	atSnapshot.SetColdStore(NewColdStore(l, 0))
	got, ok := atSnapshot.Run(reopened)
	require.True(t, ok)
	require.Equal(t, before, got, "the summary at the snapshot's position")
	_, ok = atSnapshot.Run(late)
	require.False(t, ok, "a run created after the snapshot")
	requireRunsAlike(t, first, atSnapshot, "at the snapshot")

	// Restarted from the same snapshot: the tail is folded onto the
	// records of the snapshot's moment, not counted twice.
	third, _, err := LoadTiered(l, Tiering{Now: later, SaveViews: true, Index: true})
	require.NoError(t, err)
	whole, err := third.Whole()
	require.NoError(t, err)
	require.Equal(t, want, whole)
	requireRunsAlike(t, want, third, "restarted")
}

// A store whose newest snapshot lists cold runs (their summaries kept in
// memory: taken by a reader that writes no index) and has no index: the
// state loads it, writes its cold runs' summaries to the index and keeps
// none in memory; a reader that writes nothing keeps them in memory. Both
// answer as the full fold, and so does a rebuild from position 1.
func TestSnapshotSummariesInMemoryGoToTheIndex(t *testing.T) {
	evs := mixedHistory()
	l := appendHistory(t, evs)
	now := evs[len(evs)-1].UnixMilli() + 1
	want := fold(evs)
	old, _, err := LoadTiered(l, Tiering{Now: now}) // no index written
	require.NoError(t, err)
	require.Len(t, old.cold, mixedEnded)
	b, err := EncodeSnapshot(old)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(old.Position, b))
	decoded, records, err := decodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, decoded.SnapshotRecords(), records, "the decoder counts the cold runs listed")
	require.Equal(t, old.SnapshotRecords(), records)
	_, err = l.LatestSummary(runIDs(t, old)[1], old.Position)
	require.ErrorIs(t, err, eventlog.ErrNotFound, "no index yet")

	reader, info, err := LoadTiered(l, Tiering{Now: now})
	require.NoError(t, err)
	require.Equal(t, old.Position, info.SnapshotPosition, "the snapshot is read")
	require.Len(t, reader.cold, mixedEnded, "a reader that writes nothing keeps the summaries")
	requireRunsAlike(t, want, reader, "read only")

	daemon, info, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	require.Equal(t, old.Position, info.SnapshotPosition)
	require.Equal(t, mixedEnded, info.Indexed)
	require.Empty(t, daemon.cold, "the summaries went to the index")
	require.Equal(t, mixedEnded, daemon.ColdRuns())
	requireRunsAlike(t, want, daemon, "index written")
	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.Equal(t, mixedEnded, rep.Summaries)

	rebuilt, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true, NoSnapshot: true})
	require.NoError(t, err)
	requireRunsAlike(t, want, rebuilt, "rebuilt from position 1")
	whole, err := rebuilt.Whole()
	require.NoError(t, err)
	require.Equal(t, want, whole)
}

// A state whose cold runs' summaries are in the index holds nothing of
// them in memory and snapshots only its hot runs: the snapshot does not
// grow with the runs that ended.
func TestSnapshotListsOnlyRunsInMemory(t *testing.T) {
	evs := mixedHistory()
	l := appendHistory(t, evs)
	s, _, err := LoadTiered(l, Tiering{Now: evs[len(evs)-1].UnixMilli() + 1, SaveViews: true, Index: true})
	require.NoError(t, err)
	snap := toSnapshot(s)
	require.Len(t, snap.Runs, mixedRuns-mixedEnded)
	require.Equal(t, mixedRuns, snap.RunCount)
	for _, sr := range snap.Runs {
		require.False(t, sr.Cold)
	}
}

// BenchmarkRunsPage pages the runs list as a dashboard does (completed,
// newest first, 100 a page, from the middle of the history) over 2,000
// ended runs: from the index of their summaries (the first page decodes
// them, the next ones find them decoded; first-read decodes every page),
// and from memory, as before the index.
//
//	go test ./projections -run '^$' -bench RunsPage -benchmem
func BenchmarkRunsPage(b *testing.B) {
	const runs = 2000
	var h history
	for r := range runs {
		run := fmt.Sprintf("team_20261001000000_%016x", r)
		h.add(run, events.TypeRunCreated, &events.RunCreated{Team: "t", Workflow: "w",
			Goal: "a goal of a few words", Cwd: "/w"})
		h.add(run, events.TypeCredentialIssued, &events.CredentialIssued{TaskID: events.OrchestratorKey,
			Role: events.RoleOrchestrator, Digest: "d"})
		h.add(run, events.TypeRunRunning, &events.RunRunning{})
		h.add(run, events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
	}
	now := h.evs[len(h.evs)-1].UnixMilli() + 1
	f := RunFilter{Statuses: []RunStatus{RunCompleted}, Newest: true, Limit: 100,
		Cursor: strconv.FormatUint(runs/2, 36)}
	for _, c := range []struct {
		name         string
		index, first bool
	}{{"index", true, false}, {"index-first-read", true, true}, {"memory", false, false}} {
		b.Run(c.name, func(b *testing.B) {
			l := appendHistory(b, h.evs)
			s, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: c.index, Index: c.index})
			require.NoError(b, err)
			require.Equal(b, runs, s.ColdRuns())
			require.Equal(b, !c.index, s.ColdInMemory() == runs)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if c.first {
					clear(s.store.summaries.m) // every summary decoded again
				}
				page, err := s.Runs(f)
				if err != nil || len(page.Runs) != 100 {
					b.Fatal(err, len(page.Runs))
				}
			}
		})
	}
}

// BenchmarkHeapOfFinishedRuns reports the heap a state loaded from the log
// holds (heap-B) for 1,000 and for 10,000 finished runs besides the same
// two active ones: with the index of summaries it does not grow with the
// finished runs; with the summaries in memory (a log no index was written
// to, read by a reader that writes none) it does.
//
//	go test ./projections -run '^$' -bench HeapOfFinishedRuns -benchtime 1x
func BenchmarkHeapOfFinishedRuns(b *testing.B) {
	for _, finished := range []int{1000, 10000} {
		var h history
		for r := range finished + 2 {
			run := fmt.Sprintf("team_20261001000000_%016x", r)
			h.add(run, events.TypeRunCreated, &events.RunCreated{Team: "t", Workflow: "w",
				Goal: "a goal of a few words", Cwd: "/w"})
			h.add(run, events.TypeCredentialIssued,
				&events.CredentialIssued{TaskID: events.OrchestratorKey, Role: events.RoleOrchestrator, Digest: "d"})
			h.add(run, events.TypeRunRunning, &events.RunRunning{})
			if r < finished {
				h.add(run, events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
			}
		}
		writes := make([]eventlog.Write, 0, len(h.evs))
		for _, ev := range h.evs {
			writes = append(writes, logWrite(b, ev))
		}
		now := h.evs[len(h.evs)-1].UnixMilli() + 1
		for _, index := range []bool{true, false} {
			b.Run(fmt.Sprintf("finished=%d/index=%v", finished, index), func(b *testing.B) {
				l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
				require.NoError(b, err)
				defer l.Close()
				for i := 0; i < len(writes); i += 1000 {
					_, err := l.Append(writes[i:min(i+1000, len(writes))]...)
					require.NoError(b, err)
				}
				if index { // the index written, then a reader of it
					_, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
					require.NoError(b, err)
				}
				for b.Loop() {
					with := func() int64 {
						s, _, err := LoadTiered(l, Tiering{Now: now})
						require.NoError(b, err)
						require.Equal(b, finished, s.ColdRuns())
						defer runtime.KeepAlive(s)
						return heapInUse()
					}()
					b.ReportMetric(float64(with-heapInUse()), "heap-B") // what the state (and its store) holds
				}
			})
		}
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// A store whose index of summaries was removed by hand (or partly: a
// count that disagrees) while its snapshot stayed, which no longer lists
// the cold runs: the load notices before it folds the tail, drops the
// snapshot with the index, folds from position 1, writing the index again,
// and answers every runs query as before. Without the check, the cold runs
// would be missing from every answer.
func TestRemovedIndexIsRebuiltAtLoad(t *testing.T) {
	for _, damage := range []string{"removed", "count off by one"} {
		t.Run(damage, func(t *testing.T) {
			evs := mixedHistory()
			l := appendHistory(t, evs)
			now := evs[len(evs)-1].UnixMilli() + 1
			want := fold(evs)
			s, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
			require.NoError(t, err)
			restarted := snapshotAndRestart(t, l, s, now)
			requireRunsAlike(t, want, restarted, "before")

			switch damage {
			case "removed":
				require.NoError(t, l.DropSummaries(false))
			default:
				// One run's summary written again under another id: the
				// count says one run more than the state relies on.
				cr := restarted.coldRun(runIDs(t, restarted)[1])
				require.NotNil(t, cr)
				b, err := encodeSummary(cr)
				require.NoError(t, err)
				require.NoError(t, l.SaveSummaries([]eventlog.Summary{{Stream: events.EngineStream, Ord: 1 << 20,
					Position: 1, Data: b}}))
			}
			again, info, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
			require.NoError(t, err)
			requireRunsAlike(t, want, again, "rebuilt")
			require.ErrorIs(t, info.IndexRebuilt, ErrIndexWanting)
			require.Zero(t, info.SnapshotPosition, "folded from position 1")
			require.Empty(t, again.cold, "the summaries are in the index again")
			whole, err := again.Whole()
			require.NoError(t, err)
			require.Equal(t, want, whole)

			// Once rebuilt, the next load finds it whole.
			_, info, err = LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
			require.NoError(t, err)
			require.NoError(t, info.IndexRebuilt)
		})
	}
}

// A write of cold runs' summaries to the index that fails (errorfs fails
// every read of the store's tables, which the write does to find the
// versions it supersedes) keeps them in memory, in both copies of the
// state, and answers from there; it is counted and reported. The next
// pass writes them, and both copies then let go of them: the other copy
// is told through the ids EvictAll returns, so its memory does not keep
// them until a restart.
func TestAFailedWriteOfSummariesIsRetriedAndBothCopiesLetGo(t *testing.T) {
	evs := mixedHistory()
	fs := vfs.NewMem()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	appendEvents(t, l, evs)
	// A summary in the index, so that its keys are in a table once the
	// store is reopened (with an empty block cache).
	require.NoError(t, l.SaveSummaries([]eventlog.Summary{{Stream: evs[1].Stream, Ord: 0, Position: evs[1].Position,
		Data: []byte{summaryFormat}}}))
	require.NoError(t, l.Close())
	faults := sstReadFaults()
	l, err = eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(fs, faults)})
	require.NoError(t, err)
	defer l.Close()

	want := fold(evs)
	work := fold(evs)
	work.SetColdStore(NewColdStore(l, 0))
	work.store.WriteIndex()
	var reported []error
	work.store.ReportIndexErrors(func(inMemory int, err error) { reported = append(reported, err) })
	pub := work.Clone()
	now := evs[len(evs)-1].UnixMilli() + 1

	faults.On()
	ids := work.EvictAll(now, 0, 0)
	for _, id := range ids {
		pub.Evict(id)
	}
	faults.Off()
	require.Len(t, ids, mixedEnded)
	require.Len(t, reported, 1)
	require.ErrorIs(t, reported[0], errorfs.ErrInjected)
	require.EqualValues(t, 1, work.store.IndexWriteErrors())
	require.Equal(t, mixedEnded, work.ColdInMemory(), "kept in memory")
	require.Equal(t, mixedEnded, pub.ColdInMemory())
	requireRunsAlike(t, want, pub, "answered from memory")

	retried := work.EvictAll(now+1000, 0, 0)
	require.ElementsMatch(t, ids, retried, "the runs whose summaries were written now")
	for _, id := range retried {
		pub.Evict(id)
	}
	require.Zero(t, work.ColdInMemory(), "written at the next pass")
	require.Zero(t, pub.ColdInMemory(), "and the other copy let go of them")
	requireRunsAlike(t, want, pub, "answered from the index")
	require.Len(t, reported, 1)
}

// The copy of the state that writes the summaries (EvictAll) reads none of
// them from the index to make its runs cold: it writes each, a run read
// back and made cold again with no event since alike. The other copy
// (Evict) reads each once, to learn that the first one wrote it, and keeps
// nothing in memory.
func TestEvictionWritesSummariesWithoutReadingThemFirst(t *testing.T) {
	evs := mixedHistory()
	l := appendHistory(t, evs)
	want := fold(evs)
	work := fold(evs)
	work.SetColdStore(NewColdStore(l, 0))
	work.store.WriteIndex()
	pub := work.Clone()
	now := evs[len(evs)-1].UnixMilli() + 1

	ids := work.EvictAll(now, 0, 0)
	require.Len(t, ids, mixedEnded)
	require.Zero(t, work.store.SummaryReads(), "the writer read no summary")
	for _, id := range ids {
		pub.Evict(id)
	}
	require.EqualValues(t, mixedEnded, work.store.SummaryReads(), "the other copy read each once")
	require.Zero(t, work.ColdInMemory())
	require.Zero(t, pub.ColdInMemory())
	requireRunsAlike(t, want, pub, "after eviction")

	// Read back (one read of its summary) and made cold again, unchanged.
	th, err := work.FaultIn(ids[0])
	require.NoError(t, err)
	pub.ThawFrom(th)
	reads := work.store.SummaryReads()
	again := work.EvictAll(now+1000, 0, 0)
	require.Equal(t, ids[:1], again)
	require.Equal(t, reads, work.store.SummaryReads())
	pub.Evict(ids[0])
	require.Zero(t, work.ColdInMemory())
	require.Zero(t, pub.ColdInMemory(), "the version written again is the one the other copy finds")
	requireRunsAlike(t, want, pub, "after the second eviction")
	requireRunsAlike(t, want, work, "the writer's copy")
}

// BenchmarkEvictAllWritesSummaries measures one eviction pass that makes
// mixedEnded runs cold and writes their summaries to the index, on a new
// log each time (no summary there yet); the log's writes and the state's
// copy are outside the timer.
func BenchmarkEvictAllWritesSummaries(b *testing.B) {
	evs := mixedHistory()
	now := evs[len(evs)-1].UnixMilli() + 1
	folded := fold(evs)
	b.ReportAllocs()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
		require.NoError(b, err)
		appendEvents(b, l, evs)
		work := folded.Clone()
		work.SetColdStore(NewColdStore(l, 0))
		work.store.WriteIndex()
		b.StartTimer()
		ids := work.EvictAll(now, 0, 0)
		b.StopTimer()
		require.Len(b, ids, mixedEnded)
		require.NoError(b, l.Close())
	}
}

// sstReadFaults fails every read of a table while it is on.
func sstReadFaults() *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && (op.Kind == errorfs.OpFileReadAt || op.Kind == errorfs.OpFileRead) {
			return errorfs.ErrInjected
		}
		return nil
	})}
}

// The decoded summaries a ColdStore keeps are bounded (summaryCacheSize): paging a long history of finished runs
// decodes every summary it passes, and a cache that kept them all would hold the history in memory again. The
// oldest go first; the ones decoded last are answered from the cache, the same decoded value again.
func TestSummaryCacheIsBounded(t *testing.T) {
	c := NewColdStore(nil, 0)
	summary := func(i int) eventlog.Summary {
		id := fmt.Sprintf("run-%05d", i)
		b, err := encodeSummary(&coldRun{run: Run{RunID: id, Status: "completed"}})
		require.NoError(t, err)
		return eventlog.Summary{Stream: id, Ord: uint64(i), Position: uint64(i + 1), Data: b}
	}
	const extra = 100
	for i := range summaryCacheSize + extra {
		cr, err := c.decoded(summary(i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("run-%05d", i), cr.run.RunID)
	}
	require.Equal(t, summaryCacheSize, len(c.summaries.m), "decoded summaries kept, against the cache's bound")
	for i := range extra {
		_, ok := c.summaries.m[summaryVersion{fmt.Sprintf("run-%05d", i), uint64(i + 1)}]
		require.False(t, ok, "summary %d, among the first decoded, is still cached", i)
	}
	last := summary(summaryCacheSize + extra - 1)
	first, err := c.decoded(last)
	require.NoError(t, err)
	again, err := c.decoded(last)
	require.NoError(t, err)
	require.Same(t, first, again, "a summary decoded last is decoded again")
}
