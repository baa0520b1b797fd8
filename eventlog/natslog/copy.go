package natslog

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
)

// maxManifestEvents bounds the events a manifest may announce (a batch
// of 1000 chunks of 512 KiB holds far fewer).
const maxManifestEvents = 1 << 30

// assembly is a group being reassembled from its messages (batch.go): its
// manifest and the events of the chunks read so far.
type assembly struct {
	m      wireManifest
	void   bool // the batch it follows is not the one the copy ends with
	want   int  // events the manifest's writes hold
	events []eventlog.Event
	got    int // messages read, manifest included
}

// copied is a group read whole from the stream: its writes, the position
// they follow and its batch; or a void batch, which a copy skips.
type copied struct {
	after uint64
	ws    []eventlog.Write
	batch string
	void  bool
}

// copyMessage takes the message at stream sequence seq, on subject, into
// the group being reassembled, and returns the group once its last message
// is in (nil before); prev is the message's Crewlog-Prev-Batch header. A
// batch whose manifest names a previous batch other than the one the copy
// ends with is void: a deposed writer's batch stored behind
// another writer's by a fence that matched by chance (stage.go); it is
// read whole, checked as any batch is, and skipped. Anything that is not the next message
// of a whole group — a chunk without its manifest, a manifest before the
// previous group ended, a chunk of another batch, at another index, or
// whose events do not add up — is ErrDiverged: the stream holds only whole
// batches, so such a message is not crewlog's or not this copy's.
func (l *Log) copyMessage(seq uint64, subject, prev string, data []byte) (*copied, error) {
	if subject == l.cfg.Subject() {
		if l.pending != nil {
			return nil, fmt.Errorf("%w: sequence %d starts a group while the group of batch %s (%d of %d messages) "+
				"is incomplete", ErrDiverged, seq, l.pending.m.Batch, l.pending.got, l.pending.m.Messages)
		}
		if len(data) > 0 && data[0] == groupVersion {
			after, ws, err := decodeGroup(data) // the first layout: the whole group
			if err != nil {
				return nil, err
			}
			return &copied{after: after, ws: ws}, nil
		}
		a := &assembly{got: 1}
		if err := decodeWire(data, &a.m); err != nil {
			return nil, err
		}
		a.void = prev != "" && prev != l.lastBatch
		for _, h := range a.m.Writes {
			if h.Events < 0 || h.Events > maxManifestEvents-a.want {
				return nil, fmt.Errorf("%w: natslog: a manifest of more than %d events", eventlog.ErrCorrupt, maxManifestEvents)
			}
			a.want += h.Events
		}
		if a.m.Messages < 1 || (a.m.Messages == 1) != (a.want == 0) || a.want < a.m.Messages-1 {
			return nil, fmt.Errorf("%w: batch %s of %d messages holds %d events", ErrDiverged, a.m.Batch, a.m.Messages, a.want)
		}
		if a.m.Messages == 1 {
			return a.group(nil), nil
		}
		a.events = make([]eventlog.Event, 0, min(a.want, 1024)) // a count read, not yet seen
		l.pending = a
		return nil, nil
	}
	a := l.pending
	if a == nil {
		return nil, fmt.Errorf("%w: sequence %d on %s follows no manifest", ErrDiverged, seq, subject)
	}
	stream, err := l.cfg.subjectStream(subject)
	if err != nil {
		return nil, fmt.Errorf("%w: sequence %d: %v", ErrDiverged, seq, err)
	}
	var k wireChunk
	if err := decodeWire(data, &k); err != nil {
		return nil, err
	}
	a.got++
	if k.Batch != a.m.Batch || k.Index != a.got || len(k.Events) == 0 || len(a.events)+len(k.Events) > a.want {
		return nil, fmt.Errorf("%w: sequence %d is message %d of batch %s with %d events; expected message %d of batch %s",
			ErrDiverged, seq, k.Index, k.Batch, len(k.Events), a.got, a.m.Batch)
	}
	if k.Stream != stream {
		return nil, fmt.Errorf("%w: sequence %d holds events of crewlog stream %q on the subject of %q", ErrDiverged,
			seq, k.Stream, stream)
	}
	for i := range k.Events {
		a.events = append(a.events, k.Events[i].event(stream, ""))
	}
	if a.got < a.m.Messages {
		return nil, nil
	}
	l.pending = nil
	if len(a.events) != a.want {
		return nil, fmt.Errorf("%w: batch %s ends with %d of its %d events", ErrDiverged, a.m.Batch, len(a.events), a.want)
	}
	return a.group(a.events), nil
}

// group is the assembled group, its events evs.
func (a *assembly) group(evs []eventlog.Event) *copied {
	if a.void {
		return &copied{batch: a.m.Batch, void: true}
	}
	return &copied{after: a.m.After, ws: writesOf(&a.m, evs), batch: a.m.Batch}
}

// writesOf gives each write of m its events, in order, and its command id.
func writesOf(m *wireManifest, evs []eventlog.Event) []eventlog.Write {
	ws := make([]eventlog.Write, len(m.Writes))
	for i := range m.Writes {
		h := &m.Writes[i]
		w := h.Outcome.outcome()
		w.Events = evs[:h.Events:h.Events]
		evs = evs[h.Events:]
		for j := range w.Events {
			w.Events[j].CommandID = w.CommandID
		}
		if len(w.Events) == 0 {
			w.Events = nil
		}
		ws[i] = w
	}
	return ws
}
