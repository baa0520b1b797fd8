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
	// head is the first chunk, inline and grown as a slice grows, so that
	// a run of at most messageChunk messages holds and costs what one
	// slice would; rest are the next chunks, messageChunk messages each
	// but the last, each allocated whole.
	head []Message
	rest [][]Message
	n    int
}

// Len is the number of messages.
func (l *messageLog) Len() int { return l.n }

// At is the i'th message, 0 ≤ i < Len().
func (l *messageLog) At(i int) *Message {
	if i < messageChunk {
		return &l.head[i]
	}
	i -= messageChunk
	return &l.rest[i/messageChunk][i%messageChunk]
}

// Append adds m at the end.
func (l *messageLog) Append(m Message) {
	if l.n < messageChunk {
		l.head = append(l.head, m)
		l.n++
		return
	}
	if (l.n-messageChunk)%messageChunk == 0 {
		l.rest = append(l.rest, make([]Message, 0, messageChunk))
	}
	last := len(l.rest) - 1
	l.rest[last] = append(l.rest[last], m)
	l.n++
}

// clone copies the log and every message's data, in one allocation for the
// messages and one for their data (and one for the chunk list of a log
// longer than a chunk). The copy's chunks are slices of that one array,
// each capped at its length: only the last is appended to, and the first
// append moves it out of the array.
func (l *messageLog) clone() messageLog {
	if l.n == 0 {
		return messageLog{}
	}
	flat := make([]Message, l.n)
	at := copy(flat, l.head)
	for _, c := range l.rest {
		at += copy(flat[at:], c)
	}
	withData := 0
	for i := range flat {
		if flat[i].Data != nil {
			withData++
		}
	}
	data := make([]events.MessageData, 0, withData)
	for i := range flat {
		if flat[i].Data != nil {
			data = append(data, *flat[i].Data)
			flat[i].Data = &data[len(data)-1]
		}
	}
	return messageLogOver(flat)
}

// messageLogOver returns the log of the messages of flat, which it takes
// over: its chunks are slices of flat, each capped at its length, as in
// clone's copy.
func messageLogOver(flat []Message) messageLog {
	n := len(flat)
	if n == 0 {
		return messageLog{}
	}
	headLen := min(n, messageChunk)
	c := messageLog{head: flat[:headLen:headLen], n: n}
	if n > messageChunk {
		c.rest = make([][]Message, (n-1)/messageChunk)
		for k := range c.rest {
			lo := (k + 1) * messageChunk
			hi := min(lo+messageChunk, n)
			c.rest[k] = flat[lo:hi:hi]
		}
	}
	return c
}
