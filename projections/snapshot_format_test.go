package projections

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	m "github.com/crewlog/crewlog/events/msgpackappend"
)

// olderFormat is the snapshot format before the credentials named who issued and revoked them.
const olderFormat uint16 = 8

// withoutActors is c as a build of olderFormat kept it.
func withoutActors(c *Credential) *Credential {
	if c == nil {
		return nil
	}
	cc := *c
	cc.IssuedBy, cc.RevokedBy, cc.RevokedReason = "", "", ""
	return &cc
}

// olderRunRecord is hot run r's record as a build of olderFormat wrote it, its credentials without their actors.
func olderRunRecord(r *runState) snapshotRun {
	sr := snapshotRunOf(r)
	for i, c := range sr.Credentials {
		sr.Credentials[i] = withoutActors(c)
	}
	return sr
}

// saveOlderView replaces the view of s's cold run id with the one a build of olderFormat wrote: the same stamp, its
// credentials without their actors.
func saveOlderView(t *testing.T, l *eventlog.Log, s *State, id string) {
	t.Helper()
	cr := s.coldRun(id)
	r, err := s.store.load(id, cr)
	require.NoError(t, err)
	sr := olderRunRecord(r)
	b, err := appendSnapshotRun(m.Uint16(nil, olderFormat), &sr, nil)
	require.NoError(t, err)
	require.NoError(t, l.SaveView(id, cr.last, b))
}

// saveOlderSummary replaces the summary of s's cold run id with the one a build of olderFormat wrote: the same
// version, its orchestrator credential without its actors.
func saveOlderSummary(t *testing.T, l *eventlog.Log, s *State, id string) {
	t.Helper()
	cr := *s.coldRun(id)
	sum, err := l.LatestSummary(id, cr.last)
	require.NoError(t, err)
	cr.orch = withoutActors(cr.orch)
	b, err := encodeSummary(&cr)
	require.NoError(t, err)
	require.NoError(t, l.SaveSummaries([]eventlog.Summary{{Stream: id, Ord: sum.Ord,
		Position: sum.Position, Data: b}}))
}

// mixedStore is a log of mixedHistory and the full fold of it, with the state a daemon loads from it (the index
// written) once every cold run's view is written; now is the clock reading after the last event.
func mixedStore(t *testing.T) (l *eventlog.Log, want, s *State, now int64) {
	t.Helper()
	evs := mixedHistory()
	l = appendHistory(t, evs)
	now = evs[len(evs)-1].UnixMilli() + 1
	s, _, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	_, err = s.store.SaveViews()
	require.NoError(t, err)
	return l, fold(evs), s, now
}

// readBack is s whole, its cold runs read back by a store of its own over l (nothing cached, the views used when
// readable), with what that store did: the cold runs it read from their views and the views it wrote (with
// writeViews, the view of each run it re-folded).
func readBack(t *testing.T, l *eventlog.Log, s *State, writeViews bool) (whole *State, viewReads, viewsSaved int64) {
	t.Helper()
	c := s.Clone()
	c.store = NewColdStore(l, 0)
	if writeViews {
		c.store.SaveViewsOnEvict()
	}
	whole, err := c.Whole()
	require.NoError(t, err)
	return whole, c.store.ViewReads(), c.store.ViewsSaved()
}

// coldIDsOf is s's cold runs, in creation order.
func coldIDsOf(t *testing.T, s *State) []string {
	t.Helper()
	var ids []string
	for _, id := range runIDs(t, s) {
		if s.IsCold(id) {
			ids = append(ids, id)
		}
	}
	require.NotEmpty(t, ids)
	return ids
}

// A snapshot or a view of an older format lacks the credentials' actors (format 9 has them, but not the delegations'
// parent attempts): decoded, it would answer without them. So neither is read, format 7 (which format 8 read) no
// more than formats 8 to 13; this format is. An older one is refused by
// its header, not after msgpack's reflection has walked its whole record.
func TestOlderSnapshotAndViewFormatsAreRefused(t *testing.T) {
	s := fold(mixedHistory())
	for _, tc := range []struct {
		format   uint16
		readable bool
	}{{7, false}, {olderFormat, false}, {9, false}, {10, false}, {11, false}, {12, false},
		{13, false}, {SnapshotFormat, true}} {
		snap := toSnapshot(s)
		b, err := appendSnapshot(m.Uint16(nil, tc.format), &snap, nil)
		require.NoError(t, err)
		reflected := reflectionDecodes.Load()
		decoded, err := DecodeSnapshot(b)
		if tc.readable {
			require.NoError(t, err)
			require.Equal(t, s, decoded)
		} else {
			require.ErrorIs(t, err, ErrBadSnapshot, "snapshot of format %d", tc.format)
		}

		id := runIDs(t, s)[0]
		r := s.runs[id]
		sr := snapshotRunOf(r)
		b, err = appendSnapshotRun(m.Uint16(nil, tc.format), &sr, nil)
		require.NoError(t, err)
		_, err = decodeRunView(b, id, r.last)
		if tc.readable {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ErrBadSnapshot, "view of format %d", tc.format)
		}
		require.Equal(t, reflected, reflectionDecodes.Load(), "format %d: no decode by reflection", tc.format)
	}
}

// A store a build of the older format left — its snapshot, its cold runs' views and summaries, none naming the
// credentials' actors — is not trusted with them: the snapshot is refused and the state folded from position 1,
// which writes every cold run's summary again at the version already there; the older views are not read (a cold
// run is re-folded until its view is written again), and the views the rebuild queues or finds missing are written
// in this format. Every answer is then the full fold's, actors included.
func TestStoreOfAnOlderFormatIsRebuiltWithCredentialActors(t *testing.T) {
	defer func(n int) { maxQueuedViews = n }(maxQueuedViews)
	maxQueuedViews = 4 // some views queued by the rebuild, the others missing
	l, want, old, now := mixedStore(t)
	cold := coldIDsOf(t, old)
	for _, id := range cold {
		saveOlderView(t, l, old, id)
		saveOlderSummary(t, l, old, id)
	}
	hot := old.Clone()
	for _, r := range hot.runs {
		for k, c := range r.creds {
			r.creds[k] = withoutActors(c)
		}
	}
	snap := toSnapshot(hot)
	b, err := appendSnapshot(m.Uint16(nil, olderFormat), &snap, nil)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(old.Position, b))

	s, info, err := LoadTiered(l, Tiering{Now: now, SaveViews: true, Index: true})
	require.NoError(t, err)
	require.ErrorIs(t, info.SnapshotError, ErrBadSnapshot, "the older snapshot is refused")
	require.Zero(t, info.SnapshotPosition, "and the state folded from position 1")
	require.Equal(t, len(cold), s.ColdRuns())
	require.Empty(t, s.cold, "the summaries are in the index")
	for _, id := range cold {
		got, ok := s.Credential(id, events.OrchestratorKey)
		require.True(t, ok, id)
		wantCred, _ := want.Credential(id, events.OrchestratorKey)
		require.Equal(t, wantCred, got, "%s: the summary was written again", id)
		require.Equal(t, "admin", got.IssuedBy, id)
	}
	requireRunsAlike(t, want, s, "rebuilt")

	whole, viewReads, _ := readBack(t, l, s, false)
	require.Equal(t, want, whole, "the cold runs re-folded")
	require.Zero(t, viewReads, "no view of the older format was read")

	queued, err := s.store.SaveViews()
	require.NoError(t, err)
	require.Equal(t, maxQueuedViews, queued)
	missing := missingViewsOf(t, s, len(cold))
	require.Len(t, missing, len(cold)-queued)
	for _, v := range missing {
		require.NoError(t, s.store.WriteMissingView(v), v.ID())
	}
	require.Zero(t, s.store.ViewsMissing())
	for _, id := range cold {
		pos, view, err := l.View(id)
		require.NoError(t, err)
		require.Equal(t, s.coldRun(id).last, pos, id)
		require.Equal(t, m.Uint16(nil, SnapshotFormat), view[:3], "%s: the view is written again in this format", id)
	}
	whole, viewReads, _ = readBack(t, l, s, false)
	require.Equal(t, want, whole)
	require.EqualValues(t, len(cold), viewReads, "every cold run read from its view")
}

// A view of the older format met by a state of this format (the rebuild has not written it again yet) is ignored:
// the run is re-folded, answers with its credentials' actors, and its view is written again, after which it is read.
func TestOlderViewIsNotReadWithoutTheActors(t *testing.T) {
	l, want, s, _ := mixedStore(t)
	cold := coldIDsOf(t, s)
	for _, id := range cold {
		saveOlderView(t, l, s, id)
	}

	whole, viewReads, viewsSaved := readBack(t, l, s, true)
	require.Equal(t, want, whole, "the cold runs re-folded, actors included")
	require.Zero(t, viewReads, "no view of the older format was read")
	require.EqualValues(t, len(cold), viewsSaved, "each view written again")

	whole, viewReads, _ = readBack(t, l, s, false)
	require.Equal(t, want, whole)
	require.EqualValues(t, len(cold), viewReads, "every cold run read from its view")
}
