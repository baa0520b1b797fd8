package projections

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestSnapshotEncoderWritesTheStateItCopied: an encoder made from a state
// writes the bytes EncodeSnapshot gave for that state, however the state
// changes after the copy (delegations settled, questions answered, jobs
// leased and called, accounts charged, messages appended, credentials
// revoked), so the engine may copy under its read lock and encode after
// releasing it. The later events must change what a snapshot of the state
// holds, or the test proves nothing.
func TestSnapshotEncoderWritesTheStateItCopied(t *testing.T) {
	check := func(t *testing.T, evs []events.Event, at int, where string) {
		t.Helper()
		s := fold(evs[:at])
		want, err := EncodeSnapshot(s)
		require.NoError(t, err)
		enc := NewSnapshotEncoder(s)
		require.Equal(t, s.Position, enc.Position(), where)
		require.Equal(t, s.SnapshotRecords(), enc.Records(), where)
		for _, ev := range evs[at:] {
			Apply(s, ev)
		}
		now, err := EncodeSnapshot(s)
		require.NoError(t, err)
		require.NotEqual(t, want, now, "%s: the events after the copy changed nothing", where)
		var buf bytes.Buffer
		n, err := enc.WriteTo(&buf)
		require.NoError(t, err)
		require.Equal(t, int64(len(want)), n, where)
		require.Equal(t, want, buf.Bytes(), "%s: the encoder wrote the state as it changed after the copy", where)
	}
	t.Run("realistic", func(t *testing.T) {
		for _, evs := range [][]events.Event{realisticHistory(3_000), longRunHistory(3_000)} {
			for _, at := range []int{len(evs) / 3, len(evs) / 2, len(evs) - 7} {
				check(t, evs, at, fmt.Sprintf("split at %d of %d", at, len(evs)))
			}
		}
	})
	t.Run("any event", func(t *testing.T) {
		for seed := range uint64(60) {
			evs := randomHistory(rand.New(rand.NewPCG(seed, 8)), 600)
			check(t, evs, 300, fmt.Sprintf("seed %d", seed))
		}
	})
	t.Run("dispatcher and questions", func(t *testing.T) {
		for seed := range uint64(60) {
			rng := rand.New(rand.NewPCG(seed, 7))
			evs := indexHistory(rng, 200+rng.IntN(300))
			at := 2 + rng.IntN(len(evs)-60)
			check(t, evs, at, fmt.Sprintf("seed %d split at %d of %d", seed, at, len(evs)))
		}
	})
}

// TestSnapshotEncoderWritesInPieces: whether a run's records spill the
// encoder's buffer at every record, now and then or never, the writer
// receives the same bytes in order; a writer's error stops the encoding and
// is returned.
func TestSnapshotEncoderWritesInPieces(t *testing.T) {
	defer func(n int) { snapshotSpill = n }(snapshotSpill)
	for _, s := range []*State{New(), fold(realisticHistory(3_000)), fold(longRunHistory(3_000)), coldState(t)} {
		want, err := EncodeSnapshot(s)
		require.NoError(t, err)
		for _, spill := range []int{1, 4096, 1 << 30} {
			snapshotSpill = spill
			w := &pieces{}
			n, err := NewSnapshotEncoder(s).WriteTo(w)
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), n)
			require.Equal(t, want, w.Bytes(), "spill at %d", spill)
			if spill == 1 && len(s.runs) > 0 {
				require.Greater(t, w.writes, len(s.runs), "a spill at every record writes more than once a run")
			}
		}
	}
	snapshotSpill = 4096
	s := fold(longRunHistory(3_000))
	full, err := EncodeSnapshot(s)
	require.NoError(t, err)
	boom := errors.New("disk on fire")
	w := &pieces{failAfter: 2, err: boom}
	n, err := NewSnapshotEncoder(s).WriteTo(w)
	require.ErrorIs(t, err, boom)
	require.Equal(t, int64(w.Len()), n, "what it wrote before the error")
	require.Less(t, w.Len(), len(full))
	require.Equal(t, 3, w.writes, "no write after the one that failed")
}

// pieces is a writer that keeps what it is given and counts the writes; the
// write after failAfter (when err is set) fails.
type pieces struct {
	bytes.Buffer
	writes    int
	failAfter int
	err       error
}

func (p *pieces) Write(b []byte) (int, error) {
	p.writes++
	if p.err != nil && p.writes > p.failAfter {
		return 0, p.err
	}
	return p.Buffer.Write(b)
}
