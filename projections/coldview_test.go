package projections

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// appendHistory writes evs to a new in-memory log, one append each.
func appendHistory(t testing.TB, evs []events.Event) *eventlog.Log {
	t.Helper()
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	appendEvents(t, l, evs)
	return l
}

// appendEvents appends evs to l, one append each.
func appendEvents(t testing.TB, l *eventlog.Log, evs []events.Event) {
	t.Helper()
	for _, ev := range evs {
		_, err := l.Append(logWrite(t, ev))
		require.NoError(t, err)
	}
}

// logWrite is ev as a write of its own.
func logWrite(t testing.TB, ev events.Event) eventlog.Write {
	t.Helper()
	p, err := events.EncodePayload(ev.Payload)
	require.NoError(t, err)
	return eventlog.Write{Events: []eventlog.Event{{Stream: ev.Stream, Type: ev.Type,
		SchemaVersion: ev.SchemaVersion, Time: ev.Time, ActorRole: ev.Actor.Role, ActorTask: ev.Actor.TaskID,
		Payload: p}}}
}

// The runs a fold makes cold are written as views; a store reading them
// back decodes each from its view, exactly the run the re-fold gives. A
// view stamped with another position, or whose bytes do not decode, is
// ignored and the run re-folded (and its view written again).
func TestColdRunsAreReadFromTheirViews(t *testing.T) {
	evs := realisticHistory(1500)
	l := appendHistory(t, evs)
	now := evs[len(evs)-1].UnixMilli() + 1
	s, info, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	require.Positive(t, info.Evicted)
	require.True(t, s.store.ViewsQueued())
	saved, err := s.store.SaveViews()
	require.NoError(t, err)
	require.Equal(t, s.ColdRuns(), saved, "one view per run made cold")
	require.False(t, s.store.ViewsQueued())

	refolded := s.Clone()
	refolded.store = NewColdStore(l, 0)
	refolded.store.RefoldOnly()
	want, err := refolded.Whole()
	require.NoError(t, err)
	require.Zero(t, refolded.store.ViewReads())

	viewed := s.Clone()
	viewed.store = NewColdStore(l, 0)
	got, err := viewed.Whole()
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.EqualValues(t, s.ColdRuns(), viewed.store.ViewReads(), "every cold run read from its view")
	require.Equal(t, viewed.store.Refolds(), viewed.store.ViewReads())

	var ids []string
	for _, id := range runIDs(t, s) {
		if s.IsCold(id) {
			ids = append(ids, id)
		}
	}
	require.GreaterOrEqual(t, len(ids), 2)
	stale, garbled := ids[0], ids[1]
	require.NoError(t, l.SaveView(stale, s.coldRun(stale).last-1, []byte{0x05}),
		"a position that is not the summary's")
	require.NoError(t, l.SaveView(garbled, s.coldRun(garbled).last, []byte{0xcd, 0x00}))
	again := s.Clone()
	again.store = NewColdStore(l, 0)
	again.store.SaveViewsOnEvict()
	got, err = again.Whole()
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.EqualValues(t, 2, again.store.Refolds()-again.store.ViewReads(),
		"the stale and the garbled view were re-folded")
	require.EqualValues(t, 2, again.store.ViewsSaved(), "and their views written again")
	for _, id := range []string{stale, garbled} {
		pos, _, err := l.View(id)
		require.NoError(t, err)
		require.Equal(t, s.coldRun(id).last, pos)
	}
}

// More runs going cold at once than the queue of views holds (a fold from
// position 1, as after a change of the snapshot format) leaves the rest
// without a view; the store knows which, the snapshot keeps the set across
// a restart, and WriteMissingView writes them (keeping a view already
// current), after which every cold run is read from its view. Writing them
// is not a read back: no re-fold or view read is counted, nothing cached.
func TestMissingViewsAreKnownKeptBySnapshotsAndWritten(t *testing.T) {
	defer func(n int) { maxQueuedViews = n }(maxQueuedViews)
	maxQueuedViews = 2
	evs := realisticHistory(1500)
	l := appendHistory(t, evs)
	now := evs[len(evs)-1].UnixMilli() + 1
	s, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	cold := s.ColdRuns()
	require.Greater(t, cold, 3)
	require.Equal(t, cold-2, s.store.ViewsMissing(), "the runs beyond the queue have no view")
	saved, err := s.store.SaveViews()
	require.NoError(t, err)
	require.Equal(t, 2, saved)
	require.Equal(t, cold-2, s.store.ViewsMissing())

	restarted := snapshotAndRestart(t, l, s, now)
	require.Equal(t, cold-2, restarted.store.ViewsMissing(), "the snapshot keeps the missing views")
	offline, _, err := LoadTiered(l, Tiering{Now: now})
	require.NoError(t, err)
	require.Zero(t, offline.store.ViewsMissing(), "a reader that writes no views tracks none")

	c := restarted.store
	written := 0
	for batch := missingViewsOf(t, restarted, 3); len(batch) > 0; batch = missingViewsOf(t, restarted, 3) {
		require.LessOrEqual(t, len(batch), 3)
		for _, v := range batch {
			require.NoError(t, c.WriteMissingView(v))
			written++
		}
	}
	require.Equal(t, cold-2, written)
	require.Zero(t, c.ViewsMissing())
	require.EqualValues(t, cold-2, c.ViewsSaved())
	require.Zero(t, c.Refolds(), "writing a missing view is not a read back")
	require.Zero(t, c.ViewReads())
	require.Zero(t, c.CachedBytes(), "nor cached")

	// A run marked missing whose view is current keeps it.
	require.Empty(t, restarted.cold, "the summaries are in the index, not in memory")
	var any string
	for _, id := range runIDs(t, restarted) {
		if restarted.IsCold(id) {
			any = id
			break
		}
	}
	c.markViewMissing(any)
	v := missingViewsOf(t, restarted, 1)
	require.Len(t, v, 1)
	require.NoError(t, c.WriteMissingView(v[0]))
	require.EqualValues(t, cold-2, c.ViewsSaved(), "a current view is not written again")
	require.Zero(t, c.ViewsMissing())

	refolded := restarted.Clone()
	refolded.store = NewColdStore(l, 0)
	refolded.store.RefoldOnly()
	want, err := refolded.Whole()
	require.NoError(t, err)
	viewed := restarted.Clone()
	viewed.store = NewColdStore(l, 0)
	got, err := viewed.Whole()
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.EqualValues(t, cold, viewed.store.ViewReads(), "every cold run read from its view")
	require.Equal(t, viewed.store.Refolds(), viewed.store.ViewReads())

	// A run no longer cold leaves the set.
	c.markViewMissing("no-such-run")
	require.Empty(t, missingViewsOf(t, restarted, 5))
	require.Zero(t, c.ViewsMissing())
}

// A run read back and made cold again with no event of it since is not queued for its view again (EvictAll): its
// view is written already or among the missing ones. So a run whose view is missing stays in the set while it is hot,
// and gets its view written once it is cold again.
func TestAMissingViewOfARunReadBackStaysMissing(t *testing.T) {
	queue := maxQueuedViews
	defer func() { maxQueuedViews = queue }()
	maxQueuedViews = 0 // every run made cold in the fold goes without a view
	evs := realisticHistory(1500)
	l := appendHistory(t, evs)
	now := evs[len(evs)-1].UnixMilli() + 1
	s, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	maxQueuedViews = queue // a run made cold from now on is queued, but for one read back unchanged
	id := firstColdRun(t, s)
	require.True(t, s.store.viewMissing(id))
	missing := s.store.ViewsMissing()

	_, err = s.FaultIn(id)
	require.NoError(t, err)
	require.False(t, s.IsCold(id))
	require.Equal(t, missing-1, s.store.ViewsMissing(), "a hot run is no cold run missing its view")
	for _, v := range missingViewsOf(t, s, s.ColdRuns()+1) {
		require.NotEqual(t, id, v.ID(), "a hot run has no view to write")
	}
	require.True(t, s.store.viewMissing(id), "the run read back is still missing its view")

	require.Equal(t, []string{id}, s.EvictAll(now, 0, 0))
	require.False(t, s.store.ViewsQueued(), "the unchanged run is not queued again")
	require.Equal(t, missing, s.store.ViewsMissing())
	for batch := missingViewsOf(t, s, 16); len(batch) > 0; batch = missingViewsOf(t, s, 16) {
		for _, v := range batch {
			require.NoError(t, s.store.WriteMissingView(v))
		}
	}
	pos, _, err := l.View(id)
	require.NoError(t, err)
	require.Equal(t, s.coldRun(id).last, pos)
}

// restartedMissingViews is a state restarted from a snapshot whose cold runs all miss their view, on a store whose
// reads of its tables fail while faults is on, with a block cache too small to keep a block: reading a cold run's
// summary or records then fails.
func restartedMissingViews(t *testing.T, faults errorfs.Injector) (*State, int64) {
	t.Helper()
	defer func(n int) { maxQueuedViews = n }(maxQueuedViews)
	maxQueuedViews = 0 // every run made cold in the fold goes without a view
	evs := realisticHistory(1500)
	fs := vfs.NewMem()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	appendEvents(t, l, evs)
	now := evs[len(evs)-1].UnixMilli() + 1
	s, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(s.Position, b))
	require.NoError(t, l.Close()) // NB: a reopened store holds every record in its tables, none in a memtable

	l, err = eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(fs, faults), CacheSize: 1, MemTableSize: 1 << 12})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	restarted, info, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	require.Equal(t, s.Position, info.SnapshotPosition)
	require.Greater(t, restarted.store.ViewsMissing(), 3, "the snapshot keeps the missing views")
	return restarted, now
}

// A cold run missing its view whose summary cannot be read from the index (a read that failed) stays among the
// missing views, and MissingViews says why it returns none, where it dropped every such run as unknown: a pass met
// by a passing read error wrote nothing, reported every view written, and the snapshot after it recorded none
// missing, so those runs went without a view for good, each re-folded by its first query.
func TestMissingViewsKeepTheRunsWhoseSummaryIsNotReadBack(t *testing.T) {
	faults := sstReadFaults()
	s, _ := restartedMissingViews(t, faults)
	missing := s.store.ViewsMissing()

	faults.On()
	views, err := s.MissingViews("", 3)
	faults.Off()
	require.ErrorIs(t, err, ErrNotReadBack)
	require.ErrorIs(t, err, errorfs.ErrInjected)
	require.Empty(t, views)
	require.Equal(t, missing, s.store.ViewsMissing(), "runs whose summary was not read back left the missing views")
	require.Len(t, missingViewsOf(t, s, 3), 3, "read again once the reads succeed")
}

// A pass of the missing views, batch after batch from the cursor of the last, looks at each run of the set about
// once, where every batch copied and sorted the whole set and walked it from its first run: a pass of M missing
// views (every cold run, after the views' format changes) cost O(M²/16 · log M).
func TestAPassOfTheMissingViewsLooksAtEachRunOnce(t *testing.T) {
	s, _ := restartedMissingViews(t, sstReadFaults())
	missing := s.store.ViewsMissing()
	written := 0
	after := ""
	for batch := missingViewsAfter(t, s, after, 2); len(batch) > 0; batch = missingViewsAfter(t, s, after, 2) {
		for _, v := range batch {
			require.Greater(t, v.ID(), after, "in run-id order, after the cursor")
			require.NoError(t, s.store.WriteMissingView(v))
			written++
			after = v.ID()
		}
	}
	require.Equal(t, missing, written, "every missing view written")
	require.Zero(t, s.store.ViewsMissing())
	require.LessOrEqual(t, s.store.missingLooks.Load(), int64(2*missing+2),
		"runs of the set looked at in a pass of %d batches of 2 over %d missing views", (missing+1)/2, missing)
}

// missingViewsAfter is s.MissingViews(after, n), which must return no error.
func missingViewsAfter(t *testing.T, s *State, after string, n int) []MissingView {
	t.Helper()
	views, err := s.MissingViews(after, n)
	require.NoError(t, err)
	return views
}

// missingViewsOf is s.MissingViews("", n), which must return no error.
func missingViewsOf(t *testing.T, s *State, n int) []MissingView {
	t.Helper()
	return missingViewsAfter(t, s, "", n)
}

// A cold run missing its view that the log cannot give back as recorded (here its summary names a position its
// stream never reaches: ErrCorrupt) leaves the missing views when WriteMissingView meets the damage, where it stayed
// first in the set for good: every pass of the missing views stopped at it, so the runs after it never had a view
// written. Its queries report the damage (ErrNotReadBack) whatever the set says.
func TestAMissingViewOfADamagedRunLeavesTheSet(t *testing.T) {
	s, cold := coldRunNotReadBack(t)
	s.store.SaveViewsOnEvict()
	s.store.markViewMissing(cold)
	views := missingViewsOf(t, s, 1)
	require.Len(t, views, 1)
	require.ErrorIs(t, s.store.WriteMissingView(views[0]), eventlog.ErrCorrupt)
	require.Zero(t, s.store.ViewsMissing(), "a damaged run stays among the missing views")
	require.Empty(t, missingViewsOf(t, s, 1))
}

// A cold run missing its view whose summary in the index is damaged (a version that does not decode, or fails its
// checksum) leaves the missing views and the list goes on with the runs after it, where MissingViews returned the
// damage as a failed read: the run stayed first in the set for good, every pass of the missing views stopped at it
// and the runs after it never had a view written. Its queries report the damage (ErrNotReadBack) whatever the set
// says.
func TestMissingViewsPassOverARunWhoseSummaryIsDamaged(t *testing.T) {
	s, _ := restartedMissingViews(t, sstReadFaults())
	missing := s.store.ViewsMissing()
	damaged := s.store.missingIDs()[0]
	require.Nil(t, s.cold[damaged], "the run's summary is in the index alone")
	require.NoError(t, s.store.log.SaveSummaries([]eventlog.Summary{{Stream: damaged, Position: s.Position,
		Data: []byte{summaryFormat}}}))

	views, err := s.MissingViews("", 3)
	require.NoError(t, err)
	require.Len(t, views, 3, "the runs after the damaged one")
	for _, v := range views {
		require.NotEqual(t, damaged, v.ID())
	}
	require.Equal(t, missing-1, s.store.ViewsMissing(), "the damaged run left the missing views")
	_, _, err = s.LookupRun(damaged)
	require.ErrorIs(t, err, ErrNotReadBack, "its queries report the damage")
}

// The runs gone cold whose view waits to be written are bounded in bytes too (maxQueuedViewBytes, as approxBytes
// estimates them), not only in number: a few large runs ending together must not hold their records in memory
// until the background pass writes them. A run past the bound is left without a view (written later by
// WriteMissingView), and a smaller one that still fits is queued.
func TestTheQueueOfViewsIsBoundedInBytes(t *testing.T) {
	c := NewColdStore(nil, 0)
	c.SaveViewsOnEvict()
	body := strings.Repeat("x", maxQueuedViewBytes/2)
	run := func(id, body string) *runState {
		r := newRunState(Run{RunID: id})
		r.addMessage(Message{ID: "m", To: "t", Body: body})
		return r
	}
	c.queueView("large-1", 1, run("large-1", body))
	c.queueView("large-2", 2, run("large-2", body))
	c.queueView("small", 3, run("small", "x"))
	var queued []string
	for _, v := range c.queued {
		queued = append(queued, v.id)
	}
	require.Equal(t, []string{"large-1", "small"}, queued, "the queue holds more than its bytes allow")
	require.LessOrEqual(t, c.queuedBytes, int64(maxQueuedViewBytes))
	require.Equal(t, 1, c.ViewsMissing(), "the run past the bound is known to have no view")
}
