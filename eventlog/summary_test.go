package eventlog

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// Stream summaries are read back by stream as the newest version at or
// before a position, and in ordinal order (either way) with one version
// per ordinal, the newest at or before that position; a flipped byte or a
// copy that disagrees with the other is corruption for Verify.
func TestStreamSummaries(t *testing.T) {
	l, _ := openMem(t)
	// Positions: a 1, b 2, a 3, c 4, a 5.
	_, err := l.Append(Write{Events: []Event{ev("a", "x"), ev("b", "x"), ev("a", "y"), ev("c", "x"), ev("a", "z")}})
	require.NoError(t, err)

	_, err = l.LatestSummary("a", 5)
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, l.SaveSummaries([]Summary{
		{Stream: "a", Ord: 0, Position: 1, Data: []byte("a@1")},
		{Stream: "b", Ord: 1, Position: 2, Data: []byte("b@2")},
		{Stream: "c", Ord: 2, Position: 4, Data: []byte("c@4")},
	}))
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 0, Position: 5, Data: []byte("a@5")}}))
	require.ErrorIs(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 0, Position: 6}}), ErrInvalid, "beyond the head")

	for _, c := range []struct {
		upTo uint64
		want string
	}{{1, "a@1"}, {4, "a@1"}, {5, "a@5"}, {100, "a@5"}} {
		s, err := l.LatestSummary("a", c.upTo)
		require.NoError(t, err)
		require.Equal(t, c.want, string(s.Data), "up to %d", c.upTo)
		require.Zero(t, s.Ord)
	}
	_, err = l.LatestSummary("a", 0)
	require.ErrorIs(t, err, ErrNotFound, "no version at or before 0")
	_, err = l.LatestSummary("ab", 100)
	require.ErrorIs(t, err, ErrNotFound, "a stream that another's name prefixes")

	list := func(from uint64, desc bool, upTo uint64, max int) []string {
		var out []string
		_, err := l.Summaries(from, desc, upTo, func(s Summary) bool {
			out = append(out, string(s.Data))
			return len(out) < max
		})
		require.NoError(t, err)
		return out
	}
	require.Equal(t, []string{"a@5", "b@2", "c@4"}, list(0, false, 100, 10))
	require.Equal(t, []string{"a@1", "b@2", "c@4"}, list(0, false, 4, 10))
	require.Equal(t, []string{"a@1", "b@2"}, list(0, false, 3, 10), "c is not summarised at 3")
	require.Equal(t, []string{"b@2", "c@4"}, list(1, false, 100, 10))
	require.Equal(t, []string{"a@5", "b@2"}, list(0, false, 100, 2))
	require.Equal(t, []string{"c@4", "b@2", "a@5"}, list(2, true, 100, 10))
	require.Equal(t, []string{"c@4", "b@2", "a@1"}, list(^uint64(0), true, 4, 10))
	require.Equal(t, []string{"b@2", "a@1"}, list(1, true, 4, 10))
	require.Equal(t, []string{"a@5"}, list(0, true, 100, 10))
	require.Equal(t, []string{"c@4"}, list(9, true, 100, 1))

	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.Equal(t, 4, rep.Summaries)

	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "b", Ord: 1, Position: 3, Data: []byte("b@3")}}))
	_, err = l.Verify(nil)
	require.ErrorIs(t, err, ErrCorrupt, "a summary stamped with another stream's position")
}

func TestStreamSummaryCorruption(t *testing.T) {
	for _, key := range [][]byte{summaryKey("a", 1), summaryOrdKey(0, 1)} {
		l, _ := openMem(t)
		_, err := l.Append(Write{Events: []Event{ev("a", "x")}})
		require.NoError(t, err)
		require.NoError(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 0, Position: 1, Data: []byte("a@1")}}))
		_, err = l.Verify(nil)
		require.NoError(t, err)
		flipLastByte(t, l, key)
		_, err = l.Verify(nil)
		require.ErrorIs(t, err, ErrCorrupt, "%q", key)
		require.NoError(t, l.Close())
	}
	l, _ := openMem(t)
	_, err := l.Append(Write{Events: []Event{ev("a", "x")}})
	require.NoError(t, err)
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 0, Position: 1, Data: []byte("a@1")}}))
	flipLastByte(t, l, summaryKey("a", 1))
	_, err = l.LatestSummary("a", 1)
	require.ErrorIs(t, err, ErrCorrupt)
}

// versionsOf lists the positions of stream's versions, as both keys hold
// them.
func versionsOf(t *testing.T, l *Log, stream string) []uint64 {
	t.Helper()
	pos, ords, err := summaryVersions(l.db, stream)
	require.NoError(t, err)
	if len(pos) == 0 {
		return nil
	}
	var byOrd []uint64
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: summaryOrdKey(ords[0], 0), UpperBound: summaryOrdKey(ords[0]+1, 0)})
	require.NoError(t, err)
	for ok := it.First(); ok; ok = it.Next() {
		byOrd = append(byOrd, binary.BigEndian.Uint64(it.Key()[9:]))
	}
	require.NoError(t, it.Close())
	require.Equal(t, pos, byOrd, "both copies")
	return pos
}

// A stream's versions that no state can read any more are deleted with
// the write of a new one: those older than the newest at or before the
// newest snapshot. The one that snapshot needs stays until a later
// snapshot passes the new version, which prunes it then. Without a
// snapshot nothing is pruned (a snapshot being encoded may need any).
func TestSummaryVersionsArePruned(t *testing.T) {
	l, _ := openMem(t)
	_, err := l.Append(Write{Events: evs("a", 9)})
	require.NoError(t, err)
	save := func(pos uint64) {
		require.NoError(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 3, Position: pos, Data: fmt.Appendf(nil, "a@%d", pos)}}))
	}
	save(1)
	save(2)
	require.Equal(t, []uint64{1, 2}, versionsOf(t, l, "a"), "no snapshot: every version may be needed")
	require.NoError(t, l.SaveSnapshot(3, []byte("s3")))
	require.Equal(t, []uint64{2}, versionsOf(t, l, "a"), "the snapshot at 3 prunes what it does not need")
	save(5)
	require.Equal(t, []uint64{2, 5}, versionsOf(t, l, "a"), "the snapshot at 3 needs 2")
	save(6)
	require.Equal(t, []uint64{2, 5, 6}, versionsOf(t, l, "a"), "a snapshot encoded at 5 may need 5")
	require.NoError(t, l.SaveSnapshot(7, []byte("s7")))
	require.Equal(t, []uint64{6}, versionsOf(t, l, "a"))
	require.NoError(t, l.SaveSnapshot(8, []byte("s8")))
	save(8)
	require.Equal(t, []uint64{8}, versionsOf(t, l, "a"), "pruned in the batch that writes 8")
	// A fold from position 1 writes an older version again: it reads it
	// back, so it stays beside the newer one.
	save(4)
	require.Equal(t, []uint64{4, 8}, versionsOf(t, l, "a"))
	n, err := l.SummaryStreams()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Summaries)

	// One batch that names a stream twice sees its own first write: a new
	// stream is counted once, and a version the batch wrote, superseded
	// by the next one it writes, goes in the same batch.
	_, err = l.Append(Write{Events: evs("b", 2)}) // b 10-11
	require.NoError(t, err)
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "b", Ord: 4, Position: 10, Data: []byte("b@10")},
		{Stream: "a", Ord: 3, Position: 5, Data: []byte("a@5")}, {Stream: "b", Ord: 4, Position: 11, Data: []byte("b@11")},
		{Stream: "a", Ord: 3, Position: 9, Data: []byte("a@9")}}))
	require.Equal(t, []uint64{10, 11}, versionsOf(t, l, "b"), "the snapshot at 8 may need neither")
	require.Equal(t, []uint64{8, 9}, versionsOf(t, l, "a"), "4 and then 5 superseded by 8 for the snapshot at 8")
	n, err = l.SummaryStreams()
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	rep, err = l.Verify(nil)
	require.NoError(t, err)
	require.Equal(t, 4, rep.Summaries)
}

// The pruning is atomic with the write of the new version: a crash before
// any file-system operation of the writes and snapshots that prune leaves
// the stream with the version its recovered snapshot needs and the newest
// the recovered log holds, and the store verifies.
func TestCrashWhilePruningSummaries(t *testing.T) {
	mem := vfs.NewCrashableMem()
	crashes := &crashRecorder{mem: mem, seed: 5}
	l, err := Open("db", &Options{FS: errorfs.Wrap(mem, crashes)})
	require.NoError(t, err)
	_, err = l.Append(Write{Events: append(evs("a", 4), evs("b", 4)...)}) // a 1-4, b 5-8
	require.NoError(t, err)
	sum := func(stream string, ord, pos uint64) Summary {
		return Summary{Stream: stream, Ord: ord, Position: pos, Data: fmt.Appendf(nil, "%s@%d", stream, pos)}
	}
	require.NoError(t, l.SaveSummaries([]Summary{sum("a", 0, 1), sum("b", 1, 5)}))
	require.NoError(t, l.SaveSnapshot(6, []byte("s6")))

	crashes.armed.Store(true)
	require.NoError(t, l.SaveSummaries([]Summary{sum("a", 0, 2), sum("b", 1, 7)}))
	require.NoError(t, l.SaveSnapshot(7, []byte("s7")))
	require.NoError(t, l.SaveSummaries([]Summary{sum("a", 0, 4), sum("b", 1, 8)}))
	require.NoError(t, l.SaveSnapshot(8, []byte("s8")))
	crashes.armed.Store(false)
	final := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
	require.NoError(t, l.Close()) // Pebble's background work ends: the clones are the test's alone
	clones := append(crashes.clones, final)
	require.Greater(t, len(clones), 6)

	for i, fs := range clones {
		r, err := Open("db", &Options{FS: fs})
		require.NoError(t, err, "crash %d", i)
		_, err = r.Verify(nil)
		require.NoError(t, err, "crash %d", i)
		snap, err := r.LatestSnapshot()
		require.NoError(t, err, "crash %d", i)
		for _, stream := range []string{"a", "b"} {
			s, err := r.LatestSummary(stream, snap.Position)
			require.NoError(t, err, "crash %d: %s has the version the snapshot at %d needs", i, stream, snap.Position)
			require.Equal(t, fmt.Sprintf("%s@%d", stream, s.Position), string(s.Data))
		}
		n, err := r.SummaryStreams()
		require.NoError(t, err, "crash %d", i)
		require.EqualValues(t, 2, n, "crash %d", i)
		require.NoError(t, r.Close())
	}
	r, err := Open("db", &Options{FS: mem}) // closed cleanly: the last pruning is in
	require.NoError(t, err)
	require.Equal(t, []uint64{4}, versionsOf(t, r, "a"))
	require.Equal(t, []uint64{8}, versionsOf(t, r, "b"))
	require.NoError(t, r.Close())
}

// The count of summarised streams is kept with the index and checked by
// Verify: a store whose summaries were removed by hand while the count
// stayed, or whose count disagrees, is corrupt; one written before the
// count was kept is counted once.
func TestSummaryCountIsKeptWithTheIndex(t *testing.T) {
	l, _ := openMem(t)
	_, err := l.Append(Write{Events: append(evs("a", 2), evs("b", 2)...)})
	require.NoError(t, err)
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 0, Position: 1}, {Stream: "b", Ord: 1, Position: 3}}))
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 0, Position: 2}}))
	n, err := l.SummaryStreams()
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	// Written before the count was kept: counted once.
	require.NoError(t, l.db.Delete(summaryCountKey, pebble.Sync))
	require.NoError(t, l.db.Delete(summaryOrdCountKey, pebble.Sync))
	_, err = l.Verify(nil)
	require.NoError(t, err)
	l.summaries.loaded = false
	n, err = l.SummaryStreams()
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	// ... and the count is kept then, so the next open does not walk the
	// index again.
	for _, k := range [][]byte{summaryCountKey, summaryOrdCountKey} {
		kept, found, err := readSummaryCount(l.db, k)
		require.NoError(t, err)
		require.True(t, found, "the count is kept once counted")
		require.EqualValues(t, 2, kept)
	}
	_, err = l.Verify(nil)
	require.NoError(t, err)
	n, err = l.SummaryStreamsAt(2)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only a has a version at or before 2")

	// One stream's versions removed by hand, the count left.
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "b", Ord: 1, Position: 4}}))
	for _, k := range [][]byte{summaryKey("b", 3), summaryOrdKey(1, 3), summaryKey("b", 4), summaryOrdKey(1, 4)} {
		require.NoError(t, l.db.Delete(k, pebble.Sync))
	}
	_, err = l.Verify(nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "records 2 streams and holds 1")

	// The whole index removed: the count says so.
	require.NoError(t, l.DropSummaries(false))
	n, err = l.SummaryStreams()
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = l.Verify(nil)
	require.NoError(t, err)
}

// After a write error the log fails stop, and writes no summary either:
// the caller keeps it (in memory) until the store is reopened.
func TestNoSummaryIsWrittenAfterTheLogFailed(t *testing.T) {
	toggle := walFaults(walSyncOps...)
	l := openTenAcked(t, vfs.NewMem(), toggle)
	defer l.Close()
	toggle.On()
	_, err := l.Append(Write{Events: evs("run", 1)})
	require.ErrorIs(t, err, ErrFailed)
	toggle.Off()
	err = l.SaveSummaries([]Summary{{Stream: "run", Ord: 0, Position: 1, Data: []byte("x")}})
	require.ErrorIs(t, err, ErrFailed)
	_, err = l.LatestSummary("run", 20)
	require.ErrorIs(t, err, ErrNotFound)
}

// TestSummariesCountTheVersionsTheyPassOver: Summaries steps over the versions of an ordinal it does not report
// (older ones, and those later than its position), reading them from the index, ascending the value of each one at
// or before its position too, and reported only the version it keeps, so a reader that counts what it read from the
// index (projections.RunPage.IndexRead) missed them. Each summary it reports now carries the bytes of the stored
// versions it passed over since the one it reported before (PassedOver), and Summaries returns those of the versions
// it passed over after the last it reported, which it left out: descending, the older versions of the last ordinal
// it reached; ascending, the ordinals after the last it reported summarised only later than its position.
func TestSummariesCountTheVersionsTheyPassOver(t *testing.T) {
	l, _ := openMem(t)
	// Positions: a 1, b 2, a 3, a 4, a 5, c 6.
	_, err := l.Append(Write{Events: []Event{ev("a", "x"), ev("b", "x"), ev("a", "y"), ev("a", "z"), ev("a", "w"),
		ev("c", "x")}})
	require.NoError(t, err)
	data := func(s string) []byte { return append([]byte(s), make([]byte, 1000)...) }
	for _, pos := range []uint64{1, 3, 5} {
		require.NoError(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 0, Position: pos,
			Data: data(fmt.Sprint("a@", pos))}}))
	}
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "b", Ord: 1, Position: 2, Data: data("b@2")}}))
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "c", Ord: 2, Position: 6, Data: data("c@6")}}))
	stored := func(ord, pos uint64) int {
		v, closer, err := l.db.Get(summaryOrdKey(ord, pos))
		require.NoError(t, err)
		defer closer.Close()
		return len(v)
	}
	for _, tc := range []struct {
		name       string
		from       uint64
		desc       bool
		upTo       uint64
		max        int // summaries taken before fn returns false; 0: every one
		want       []string
		passedOver []int
		after      int // the bytes Summaries returns: passed over after the last summary reported
	}{
		{"ascending, the newest", 0, false, 100, 0, []string{"a@5", "b@2", "c@6"},
			[]int{stored(0, 1) + stored(0, 3), 0, 0}, 0},
		{"ascending, one between", 0, false, 4, 0, []string{"a@3", "b@2"},
			[]int{stored(0, 1) + stored(0, 5), 0}, stored(2, 6)},
		{"ascending, stopped", 0, false, 4, 1, []string{"a@3"}, []int{stored(0, 1) + stored(0, 5)}, 0},
		{"descending, the newest", 2, true, 100, 0, []string{"c@6", "b@2", "a@5"},
			[]int{0, 0, 0}, stored(0, 3) + stored(0, 1)},
		{"descending, one between", 2, true, 4, 0, []string{"b@2", "a@3"},
			[]int{stored(2, 6), stored(0, 5)}, stored(0, 1)},
		{"descending, stopped", 2, true, 4, 1, []string{"b@2"}, []int{stored(2, 6)}, 0},
		{"nothing at or before the position", 2, false, 5, 0, nil, nil, stored(2, 6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var passedOver []int
			after, err := l.Summaries(tc.from, tc.desc, tc.upTo, func(s Summary) bool {
				got = append(got, string(s.Data[:3]))
				passedOver = append(passedOver, s.PassedOver)
				return tc.max == 0 || len(got) < tc.max
			})
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.passedOver, passedOver)
			require.Equal(t, tc.after, after, "the versions passed over after the last summary reported")
		})
	}
}
