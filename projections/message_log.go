package projections

import "github.com/crewlog/crewlog/events"

// messageChunk is how many messages one chunk of a messageLog holds.
const messageChunk = 256

// messageLog is a run's messages in append order, held in chunks of
// messageChunk: an append moves no message of a full chunk. A run that
// keeps every message (a long run delegates thousands of times, each
// settlement a message) would otherwise copy its whole log each time a
// single slice outgrew its capacity — about four times the log over its
// growth, in each copy of the state, and every old array left to the
// collector.
type messageLog struct {
	// chunks hold messageChunk messages each but the last; the first grows
	// as a slice does, so that a run with few messages holds no more, and
	// the next are allocated whole.
	chunks [][]Message
	n      int
}

// Len is the number of messages.
func (l *messageLog) Len() int { return l.n }

// At is the i'th message, 0 ≤ i < Len().
func (l *messageLog) At(i int) *Message { return &l.chunks[i/messageChunk][i%messageChunk] }

// Append adds m at the end.
func (l *messageLog) Append(m Message) {
	switch {
	case l.n == 0:
		l.chunks = append(l.chunks[:0], nil)
	case l.n%messageChunk == 0:
		l.chunks = append(l.chunks, make([]Message, 0, messageChunk))
	}
	last := len(l.chunks) - 1
	l.chunks[last] = append(l.chunks[last], m)
	l.n++
}

// All is the log as one slice, to be read only: the log's own array when
// its chunks lie one after another in one (a clone's), else a copy.
func (l *messageLog) All() []Message {
	if l.n == 0 {
		return nil
	}
	if first := l.chunks[0]; cap(first) >= l.n {
		whole := first[:l.n]
		contiguous := true
		for k := 1; k < len(l.chunks) && contiguous; k++ {
			contiguous = &whole[k*messageChunk] == &l.chunks[k][0]
		}
		if contiguous {
			return whole
		}
	}
	out := make([]Message, 0, l.n)
	for _, c := range l.chunks {
		out = append(out, c...)
	}
	return out
}

// clone copies the log and every message's data, in one allocation for the
// messages and one for their data. The copy's chunks are slices of that
// one array (All returns it without a copy); only the last is appended to,
// and the first append moves it out of the array.
func (l *messageLog) clone() messageLog {
	if l.n == 0 {
		return messageLog{}
	}
	chunks := len(l.chunks)
	flat := make([]Message, l.n)
	at, withData := 0, 0
	for _, c := range l.chunks {
		at += copy(flat[at:], c)
		for i := range c {
			if c[i].Data != nil {
				withData++
			}
		}
	}
	data := make([]events.MessageData, 0, withData)
	for i := range flat {
		if flat[i].Data != nil {
			data = append(data, *flat[i].Data)
			flat[i].Data = &data[len(data)-1]
		}
	}
	c := messageLog{chunks: make([][]Message, chunks), n: l.n}
	for k := range c.chunks {
		c.chunks[k] = flat[k*messageChunk : min((k+1)*messageChunk, l.n)]
	}
	return c
}
