package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestReplayMatchesSequentialFold: the two-goroutine replay rebuilds, at
// every stopping point, exactly the state a plain loop folds, and its
// timeline is in log order.
func TestReplayMatchesSequentialFold(t *testing.T) {
	dir := t.TempDir()
	head := audittest.Scenario(t, dir)
	l, err := Open(dir)
	require.NoError(t, err)
	defer l.Close()
	for _, to := range []uint64{1, 2, batchSize - 1, batchSize, batchSize + 1, head / 2, head} {
		if to > head {
			continue
		}
		want := projections.New()
		require.NoError(t, projections.Replay(want, l, to))
		var last uint64
		res, err := Replay(l, ReplayOptions{To: to, Timeline: func(e Entry) {
			require.Equal(t, last+1, e.Position)
			last = e.Position
		}})
		require.NoError(t, err)
		require.Equal(t, to, last)
		require.Equal(t, snapshotOf(t, want), snapshotOf(t, res.State), "to %d", to)
	}
}

// TestReplayReportsUndecodablePayload: a payload that does not decode
// ends the replay with a corruption error, and the reader goroutine is done
// by then (the log can be closed at once).
func TestReplayReportsUndecodablePayload(t *testing.T) {
	dir := t.TempDir()
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	_, err = audittest.Large(l, 2*batchSize)
	require.NoError(t, err)
	_, err = l.Append(eventlog.Write{CommandID: "bad", Events: []eventlog.Event{{
		Stream: "run-x", Type: "delegate.admitted", SchemaVersion: 1, Payload: []byte{0xc1},
	}}})
	require.NoError(t, err)
	head, _ := l.Head()
	require.NoError(t, l.Close())
	l, err = Open(dir)
	require.NoError(t, err)
	_, err = Replay(l, ReplayOptions{})
	var ce *eventlog.CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, head, ce.Position)
	require.NoError(t, l.Close())
}

func snapshotOf(t *testing.T, s *projections.State) []byte {
	b, err := projections.EncodeSnapshot(s)
	require.NoError(t, err)
	return b
}

// TestVerifyReportsUndecodablePayload: Verify names the first record whose
// payload does not decode, after checking every event before it, and no
// stage is left running (the log can be closed at once).
func TestVerifyReportsUndecodablePayload(t *testing.T) {
	dir := t.TempDir()
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	_, err = audittest.Large(l, 2*batchSize+7)
	require.NoError(t, err)
	bad := func() eventlog.Write {
		return eventlog.Write{Events: []eventlog.Event{{Stream: "run-x", Type: "delegate.admitted", SchemaVersion: 1,
			Payload: []byte{0xc1}}}}
	}
	_, err = l.Append(bad())
	require.NoError(t, err)
	head, _ := l.Head()
	_, err = l.Append(bad())
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l, err = Open(dir)
	require.NoError(t, err)
	rep, err := Verify(l, nil)
	var ce *eventlog.CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, head, ce.Position)
	require.Equal(t, head-1, rep.Check.Events, "every event before it was checked")
	require.NoError(t, l.Close())
}

// TestReplayOwnsWhatItKeeps: the raw batches' buffers are reused from one
// batch to the next, so the state a replay builds and the timeline entries
// it hands out must hold copies: after many batches both are still what a
// plain loop over the log (whose events own their memory) gives.
func TestReplayOwnsWhatItKeeps(t *testing.T) {
	dir := t.TempDir()
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	_, err = audittest.Large(l, 4*batchesAhead*batchSize)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l, err = Open(dir)
	require.NoError(t, err)
	defer l.Close()

	want := projections.New()
	require.NoError(t, projections.Replay(want, l, 0))
	var wantEntries []Entry
	it := l.Read(1)
	for it.Next() {
		ev, err := projections.FromLog(it.Event())
		require.NoError(t, err)
		wantEntries = append(wantEntries, entryOf(ev))
	}
	require.NoError(t, it.Close())

	var entries []Entry
	res, err := Replay(l, ReplayOptions{Timeline: func(e Entry) { entries = append(entries, e) }})
	require.NoError(t, err)
	require.Equal(t, wantEntries, entries)
	require.Equal(t, snapshotOf(t, want), snapshotOf(t, res.State))

	rep, err := Verify(l, nil)
	require.NoError(t, err)
	check, err := Check(l, nil)
	require.NoError(t, err)
	require.Equal(t, check, rep.Check)
}
