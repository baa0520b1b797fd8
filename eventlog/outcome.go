package eventlog

import (
	"errors"
	"fmt"
)

// Outcome is what the command-id table records for a decided command: the
// positions of its events and, for a rejection, the code and reason. Result
// is an opaque blob the caller stores so that a retry can be answered with
// exactly the response the first attempt got.
type Outcome struct {
	CommandID string
	First     uint64 // position of the command's first event; 0 when Count is 0
	Count     uint64 // number of events the command wrote (a rejection may write some)
	Code      string // "" means accepted
	Reason    string
	Result    []byte
}

// Accepted reports whether the command was accepted.
func (o *Outcome) Accepted() bool { return o.Code == "" }

const outcomeFields = 5

func (o *Outcome) encode() []byte {
	b := make([]byte, 0, 32+len(o.Code)+len(o.Reason)+len(o.Result))
	b = appendArrayHeader(b, outcomeFields)
	b = appendUint(b, o.First)
	b = appendUint(b, o.Count)
	b = appendStr(b, o.Code)
	b = appendStr(b, o.Reason)
	b = appendBin(b, o.Result)
	return seal(b)
}

func decodeOutcome(key, value []byte) (Outcome, error) {
	p, err := unseal(key, value)
	if err != nil {
		return Outcome{}, err
	}
	owned := append([]byte(nil), p...)
	r := reader{b: owned}
	if n := r.arrayLen(); r.err == nil && n != outcomeFields {
		return Outcome{}, corruptf(0, key, "outcome has %d fields, want %d", n, outcomeFields)
	}
	o := Outcome{CommandID: string(key[1:])}
	o.First = r.uint()
	o.Count = r.uint()
	o.Code = r.str()
	o.Reason = r.str()
	o.Result = r.bin()
	if r.err == nil && r.off != len(r.b) {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return Outcome{}, corruptf(0, key, "outcome: %v", r.err)
	}
	if (o.Count == 0) != (o.First == 0) {
		return Outcome{}, corruptf(0, key, "outcome positions first=%d count=%d", o.First, o.Count)
	}
	return o, nil
}

// Outcome returns the recorded outcome of a command id, or an error wrapping
// ErrNotFound. Only durable outcomes are returned: an outcome whose append
// has not finished syncing is reported as not found.
func (l *Log) Outcome(commandID string) (Outcome, error) {
	if err := l.readable(); err != nil {
		return Outcome{}, err
	}
	l.mu.Lock()
	_, pending := l.pending[commandID]
	gen := l.gen
	l.mu.Unlock()
	if pending {
		return Outcome{}, fmt.Errorf("%w: command %q is being recorded", ErrNotFound, commandID)
	}
	key := commandKey(commandID)
	v, closer, err := l.db.Get(key)
	if err != nil {
		if isNotFound(err) {
			l.noteAbsent(commandID, gen)
			return Outcome{}, fmt.Errorf("%w: command %q", ErrNotFound, commandID)
		}
		return Outcome{}, fmt.Errorf("eventlog: read outcome: %w", err)
	}
	defer closer.Close()
	return decodeOutcome(key, v)
}

// maxAbsent bounds the ids remembered as absent between two appends.
const maxAbsent = 1 << 16

// noteAbsent remembers that id had no outcome when no append had been
// staged since gen. If one was staged meanwhile, the observation may be
// stale and is dropped.
func (l *Log) noteAbsent(id string, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen == gen && len(l.absent) < maxAbsent {
		l.absent[id] = gen
	}
}
