package projections

import (
	"fmt"
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
		if n == 0 {
			require.Nil(t, l.All(), "an empty log is nil, as the snapshot encodes it")
			continue
		}
		require.Equal(t, want, idsOf(l.All()))
		c := l.clone()
		require.Equal(t, want, idsOf(c.All()))
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
	// The clone's All is its own array, not a copy; appends to either
	// leave the other as it was.
	all := c.All()
	require.Same(t, c.At(0), &all[0])
	require.Same(t, c.At(c.Len()-1), &all[len(all)-1])
	c.Append(Message{ID: "clone"})
	l.Append(Message{ID: "original"})
	require.Equal(t, "clone", c.At(c.Len()-1).ID)
	require.Equal(t, "original", l.At(l.Len()-1).ID)
	require.Equal(t, fmt.Sprint(2*messageChunk+4), all[len(all)-1].ID)
	require.Equal(t, idsOf(l.All())[:l.Len()-1], idsOf(c.All())[:c.Len()-1])
	c.At(0).Status = MessageAcknowledged
	require.NotEqual(t, MessageAcknowledged, l.At(0).Status)
}
