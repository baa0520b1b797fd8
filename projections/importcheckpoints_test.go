package projections

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// checkpointEvents are n checkpoints of 2 sources' files (paths reused, so
// later ones supersede earlier ones, and new paths appear as n grows),
// with a run's events between them.
func checkpointEvents(from, n int) []events.Event {
	var evs []events.Event
	for i := from; i < from+n; i++ {
		ck := &events.ImportCheckpoint{Source: []string{"picrew", "other"}[i%2],
			Path: fmt.Sprintf("state/runs/R%03d/events.jsonl", i%(7+i/40)), Inode: 7, Size: int64(10 * i),
			Offset: int64(10 * i), Lines: int64(i), Gone: i%11 == 0}
		evs = append(evs, events.Event{Stream: events.ImportStream, Type: events.TypeImportCheckpoint,
			SchemaVersion: 1, Time: int64(i), Payload: ck})
		if i%9 == 0 {
			evs = append(evs, events.Event{Stream: fmt.Sprintf("R%d", i), Type: events.TypeRunCreated,
				SchemaVersion: 1, Time: int64(i), Payload: &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}})
		}
	}
	return evs
}

// requireAnswersAsTheFold: every source's checkpoints after every cursor are
// what folding the whole stream gives.
func requireAnswersAsTheFold(t *testing.T, l *eventlog.Log, got *ImportCheckpoints) {
	t.Helper()
	want, err := foldImportStream(context.Background(), l)
	require.NoError(t, err)
	for _, source := range []string{"picrew", "other", "none", ""} {
		all := want.Of(source, "")
		require.Equal(t, all, got.Of(source, ""), "source %q", source)
		for _, c := range all {
			require.Equal(t, want.Of(source, c.Path), got.Of(source, c.Path), "source %q after %q", source, c.Path)
		}
	}
}

// TestImportCheckpointsReadTheViewAndTheTail: once a view is saved, a read
// folds only the checkpoints recorded after it, and answers exactly as a
// fold of the whole stream; a view that is garbled, of another format or
// claims more of the stream than the stream has is ignored.
func TestImportCheckpointsReadTheViewAndTheTail(t *testing.T) {
	ctx := context.Background()
	l := appendHistory(t, checkpointEvents(0, 300))
	c, err := LoadImportCheckpoints(ctx, l)
	require.NoError(t, err)
	require.Equal(t, 300, c.Folded, "no view: the whole stream")
	require.False(t, c.SaveDue())
	requireAnswersAsTheFold(t, l, c)
	require.NoError(t, c.Save(l))

	appendEvents(t, l, checkpointEvents(300, 50))
	c, err = LoadImportCheckpoints(ctx, l)
	require.NoError(t, err)
	require.Equal(t, 50, c.Folded, "the view, then only what came after it")
	requireAnswersAsTheFold(t, l, c)
	viewPos, _, err := l.View(events.ImportStream)
	require.NoError(t, err)

	// The view's position is one of the stream's, so Verify accepts it.
	_, err = l.Verify(nil)
	require.NoError(t, err)

	for name, data := range map[string][]byte{
		"garbled":        {importViewFormat, 1, 0xc1},
		"another format": {importViewFormat + 1, 1, 0x90},
		"no version":     {importViewFormat, 0, 0x90},
		// msgpack makes the slice its array header claims before it reads an element: 2.7 billion checkpoints
		// asked the runtime for hundreds of gigabytes, a fatal error no recover catches, at every start.
		"an array longer than its bytes": {importViewFormat, 1, 0xdd, 0xa1, 0x2b, 0x3e, 0x38, 0x90},
		"ahead of the stream": func() []byte { // claims version 2 ends at the position of a later version
			return append([]byte{importViewFormat, 2}, 0x90)
		}(),
	} {
		require.NoError(t, l.SaveView(events.ImportStream, viewPos, data), name)
		c, err = LoadImportCheckpoints(ctx, l)
		require.NoError(t, err, name)
		require.Equal(t, 350, c.Folded, "%s: the whole stream", name)
		requireAnswersAsTheFold(t, l, c)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = LoadImportCheckpoints(cancelled, l)
	require.ErrorIs(t, err, context.Canceled)
}

// BenchmarkImportCheckpoints: what a follower's start reads, on a stream of
// 200,000 checkpoints of 300 files (a few files followed for days): the
// fold of the whole stream (no view: before views, and a store whose view
// is lost), and the view with the longest tail a refresh leaves.
func BenchmarkImportCheckpoints(b *testing.B) {
	const total, files = 200_000, 300
	l := appendHistory(b, nil)
	ck := func(i int) eventlog.Write {
		return logWrite(b, events.Event{Stream: events.ImportStream, Type: events.TypeImportCheckpoint,
			SchemaVersion: 1, Time: int64(i), Payload: &events.ImportCheckpoint{Source: "picrew",
				Path: fmt.Sprintf("state/runs/team_20261201120000_%016x/events.jsonl", i%files), Inode: 1234567,
				Size: int64(100 * i), Offset: int64(100 * i), Lines: int64(i),
				LastLineHash: fmt.Sprintf("%064x", i)}})
	}
	appendN := func(from, n int) {
		for i := from; i < from+n; i += 1000 {
			ws := make([]eventlog.Write, 0, 1000)
			for j := i; j < min(i+1000, from+n); j++ {
				ws = append(ws, ck(j))
			}
			_, err := l.Append(ws...)
			require.NoError(b, err)
		}
	}
	appendN(0, total-ImportViewEvery+1)
	ctx := context.Background()
	b.Run("fold", func(b *testing.B) {
		for b.Loop() {
			c, err := foldImportStream(ctx, l)
			require.NoError(b, err)
			require.Len(b, c.Of("picrew", ""), files)
		}
	})
	c, err := foldImportStream(ctx, l)
	require.NoError(b, err)
	require.NoError(b, c.Save(l))
	appendN(total-ImportViewEvery+1, ImportViewEvery-1)
	b.Run("view", func(b *testing.B) {
		for b.Loop() {
			c, err := LoadImportCheckpoints(ctx, l)
			require.NoError(b, err)
			require.Equal(b, ImportViewEvery-1, c.Folded)
			require.Len(b, c.Of("picrew", ""), files)
		}
	})
}

// FuzzImportCheckpointsView: whatever bytes the view holds, a read never
// panics and answers as the fold of the whole stream (a view it cannot use
// is ignored; one that decodes is taken as what it says, so the fuzzer's
// views that decode are compared only for not failing). The view seeded is
// of one checkpoint: the fuzzer minimises every input that finds new code,
// removing each of its bytes and each of its ranges in turn, and a view of
// 40 (2,832 bytes) kept it minimising for all of a run;
// TestImportCheckpointsReadTheViewAndTheTail reads a view of hundreds.
func FuzzImportCheckpointsView(f *testing.F) {
	l := appendHistory(f, checkpointEvents(0, 1))
	c, err := LoadImportCheckpoints(context.Background(), l)
	require.NoError(f, err)
	require.NoError(f, c.Save(l))
	pos, good, err := l.View(events.ImportStream)
	require.NoError(f, err)
	require.Less(f, len(good), 128, "a seed the fuzzer is not kept minimising")
	f.Add(good)
	f.Add([]byte{importViewFormat, 1, 0x90})
	f.Add([]byte{importViewFormat, 40, 0x91, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, l.SaveView(events.ImportStream, pos, data))
		got, err := LoadImportCheckpoints(context.Background(), l)
		require.NoError(t, err)
		if got.Folded > 0 {
			requireAnswersAsTheFold(t, l, got)
		}
	})
}
