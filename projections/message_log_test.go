package projections

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

func logOf(n int) messageLog {
	var l messageLog
	for i := range n {
		m := Message{ID: fmt.Sprint(i)}
		if i%3 == 0 {
			m.Data = &events.MessageData{SubID: fmt.Sprint("s", i), OK: true}
		}
		l.Append(m)
	}
	return l
}

// all is the log's messages as one slice, copied.
func (l *messageLog) all() []Message {
	if l.n == 0 {
		return nil
	}
	out := make([]Message, l.n)
	for i := range l.n {
		out[i] = *l.At(i)
	}
	return out
}

func idsOf(ms []Message) []string {
	ids := make([]string, len(ms))
	for i := range ms {
		ids[i] = ms[i].ID
	}
	return ids
}

func TestMessageLogKeepsOrderAcrossChunks(t *testing.T) {
	for _, n := range []int{0, 1, messageChunk - 1, messageChunk, messageChunk + 1, 3*messageChunk + 7} {
		l := logOf(n)
		require.Equal(t, n, l.Len())
		want := make([]string, n)
		for i := range n {
			want[i] = fmt.Sprint(i)
			require.Equal(t, want[i], l.At(i).ID)
		}
		require.Equal(t, want, idsOf(l.all()))
		c := l.clone()
		require.Equal(t, n, c.Len())
		require.Equal(t, want, idsOf(c.all()))
	}
}

func TestMessageLogAppendNeverMovesAFullChunk(t *testing.T) {
	l := logOf(messageChunk)
	first := l.At(0)
	for range 2 * messageChunk {
		l.Append(Message{})
	}
	require.Same(t, first, l.At(0), "the first chunk is not moved once full")
	at := l.At(messageChunk)
	for range messageChunk {
		l.Append(Message{})
	}
	require.Same(t, at, l.At(messageChunk), "nor a later one")
}

func TestMessageLogCloneSharesNothing(t *testing.T) {
	l := logOf(2*messageChunk + 5)
	c := l.clone()
	for i := range l.Len() {
		require.NotSame(t, l.At(i), c.At(i))
		if l.At(i).Data != nil {
			require.NotSame(t, l.At(i).Data, c.At(i).Data)
		}
	}
	// The clone's chunks are slices of one array; appends to either leave
	// the other as it was, and move no message of the clone's full chunks.
	before := c.At(c.Len() - 1)
	full := c.At(2*messageChunk - 1)
	c.Append(Message{ID: "clone"})
	l.Append(Message{ID: "original"})
	require.Equal(t, "clone", c.At(c.Len()-1).ID)
	require.Equal(t, "original", l.At(l.Len()-1).ID)
	require.Equal(t, fmt.Sprint(2*messageChunk+4), before.ID)
	require.Same(t, full, c.At(2*messageChunk-1))
	require.Equal(t, fmt.Sprint(2*messageChunk), c.At(2*messageChunk).ID,
		"the next chunk's first message stays after the full ones")
	require.Equal(t, idsOf(l.all())[:l.Len()-1], idsOf(c.all())[:c.Len()-1])
	c.At(0).Status = MessageAcknowledged
	require.NotEqual(t, MessageAcknowledged, l.At(0).Status)
}

// TestMessageLogOfOneChunkCostsOneSlice: a run of at most a chunk of
// messages allocates what one slice of them would, in appends and in a
// clone (its messages and their data).
func TestMessageLogOfOneChunkCostsOneSlice(t *testing.T) {
	require.EqualValues(t, 1, testing.AllocsPerRun(10, func() {
		var l messageLog
		l.Append(Message{ID: "1"})
	}), "the first message allocates its slice alone")
	l := logOf(messageChunk)
	require.EqualValues(t, 2, testing.AllocsPerRun(10, func() { l.clone() }),
		"a clone allocates the messages and their data")
}

// A log made over decoded messages (messageLogOver) is the log their
// appends make, at and around every chunk boundary, and stays so as it
// grows; it never writes into the slice it was made over.
func TestMessageLogOverIsTheAppendedLog(t *testing.T) {
	for _, n := range []int{0, 1, messageChunk - 1, messageChunk, messageChunk + 1, 2*messageChunk - 1,
		2 * messageChunk, 2*messageChunk + 1, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			want := logOf(n)
			// NB: flat is the start of a longer array, so a chunk left
			// with room past its messages would append into the rest.
			backing := make([]Message, n+messageChunk)
			flat := backing[:n]
			for i := range flat {
				flat[i] = *want.At(i)
			}
			kept := slices.Clone(backing)
			got := messageLogOver(flat)
			require.Equal(t, want, got)
			for i := range 300 {
				m := Message{ID: fmt.Sprint("more", i)}
				want.Append(m)
				got.Append(m)
				require.Equal(t, want, got)
			}
			for i := range got.Len() {
				require.Equal(t, want.At(i), got.At(i))
			}
			require.Equal(t, kept, backing, "an append wrote into the array the log was made over")
		})
	}
}
