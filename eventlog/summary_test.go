package eventlog

import (
	"testing"

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
		require.NoError(t, l.Summaries(from, desc, upTo, func(s Summary) bool {
			out = append(out, string(s.Data))
			return len(out) < max
		}))
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
