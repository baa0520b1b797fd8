package eventlog

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// ReadTransient returns what Read returns, event for event, and makes the
// same checks: a missing record and a damaged one end it with the position.
func TestReadTransientMatchesRead(t *testing.T) {
	l := buildSample(t)
	defer l.Close()
	var got []Event
	it := l.ReadTransient(3)
	for it.Next() {
		got = append(got, cloneEvent(it.Event()))
	}
	require.NoError(t, it.Close())
	require.Equal(t, readAll(t, l)[2:], got)

	bad := rawGet(t, l, eventKey(6))
	bad[len(bad)-1] ^= 0x01
	require.NoError(t, l.db.Set(eventKey(6), bad, pebble.Sync))
	require.NoError(t, l.db.Delete(eventKey(4), pebble.Sync))
	for from, pos := range map[uint64]uint64{1: 4, 5: 6} {
		it := l.ReadTransient(from)
		for it.Next() {
		}
		var ce *CorruptError
		require.ErrorAs(t, it.Close(), &ce)
		require.Equal(t, pos, ce.Position, "from %d", from)
	}
}

// ReadStreamTransient returns what ReadStream returns, event for event, and
// makes the same checks: a record the index points to that is missing, and
// a damaged one, end it with the position.
func TestReadStreamTransientMatchesReadStream(t *testing.T) {
	l := buildSample(t)
	defer l.Close()
	for _, stream := range []string{"run-1", "run-2"} {
		var want, got []Event
		it := l.ReadStream(stream, 2)
		for it.Next() {
			want = append(want, *it.Event())
		}
		require.NoError(t, it.Close())
		it = l.ReadStreamTransient(stream, 2)
		for it.Next() {
			got = append(got, cloneEvent(it.Event()))
		}
		require.NoError(t, it.Close())
		require.Len(t, want, 3, stream)
		require.Equal(t, want, got, stream)
	}

	// run-1 is at positions 1, 3, 5 and 7.
	bad := rawGet(t, l, eventKey(5))
	bad[len(bad)-1] ^= 0x01
	require.NoError(t, l.db.Set(eventKey(5), bad, pebble.Sync))
	require.NoError(t, l.db.Delete(eventKey(3), pebble.Sync))
	for from, pos := range map[uint64]uint64{1: 3, 3: 5} {
		it := l.ReadStreamTransient("run-1", from)
		for it.Next() {
		}
		var ce *CorruptError
		require.ErrorAs(t, it.Close(), &ce)
		require.Equal(t, pos, ce.Position, "from version %d", from)
	}
}

// A record missing below the durable head is a gap, damage, whether the
// iterator meets it, Event is asked for it or a chained read starts after
// it: Event answered ErrNotFound, as for a position past the head, which
// crewctl replay took for something other than damage.
func TestAGapBelowTheHeadIsDamage(t *testing.T) {
	l := buildSample(t)
	defer l.Close()
	require.NoError(t, l.db.Delete(eventKey(4), pebble.Sync))
	var ce *CorruptError
	_, err := l.Event(4)
	require.ErrorAs(t, err, &ce)
	require.EqualValues(t, 4, ce.Position)
	require.NotErrorIs(t, err, ErrNotFound)
	for _, it := range []*Iterator{l.ReadChained(5), l.ReadChainedTransient(5)} {
		for it.Next() {
		}
		require.ErrorAs(t, it.Close(), &ce)
		require.EqualValues(t, 4, ce.Position)
	}
	_, err = l.Event(1000)
	require.ErrorIs(t, err, ErrNotFound, "past the head: not found, not damage")
}
