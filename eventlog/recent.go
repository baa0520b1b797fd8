package eventlog

// recentOutcomes is a bounded index of the outcomes the log itself recorded
// most recently, in front of the outcome table: a retry of a recent command
// (the client lost its answer to a timeout or a crash of its own) is
// answered from memory instead of from Pebble, and the duplicate check of an
// append refuses it without a read.
//
// It only ever holds outcomes whose append has synced, under their outcome
// key, exactly as the table holds them (outcomes are never rewritten or
// deleted under an 'o' key, but by the fixture rewind, which resets the
// index), so a hit answers what Pebble would; a miss says
// nothing and the caller reads Pebble. It is filled by appends only: after a
// reopen it starts empty.
//
// Eviction is first in, first out, by count and by bytes, so that neither
// many small outcomes nor a few large results can grow it past its bounds.
//
// Not safe for concurrent use: the Log guards it with its mutex.
type recentOutcomes struct {
	maxEntries int
	maxBytes   int
	bytes      int
	byKey      map[string]Outcome
	order      []string // keys, oldest at head; a ring of len(order) slots
	head, n    int
}

// recentOverhead approximates the fixed bytes an entry costs besides its
// key and variable fields: the map slot, the ring slot and the Outcome.
const recentOverhead = 160

func newRecentOutcomes(maxEntries, maxBytes int) *recentOutcomes {
	if maxEntries <= 0 || maxBytes <= 0 {
		return nil
	}
	return &recentOutcomes{maxEntries: maxEntries, maxBytes: maxBytes, byKey: make(map[string]Outcome)}
}

// entrySize is what one entry is charged against maxBytes.
func entrySize(key string, o *Outcome) int {
	return recentOverhead + 2*len(key) + len(o.Code) + len(o.Reason) + len(o.Result) + len(o.Fingerprint)
}

// get returns key's outcome as stored: its slices are shared with the
// index and never change, so the caller may clone them after releasing the
// lock, and must clone them before handing them out.
func (r *recentOutcomes) get(key string) (Outcome, bool) {
	if r == nil {
		return Outcome{}, false
	}
	o, ok := r.byKey[key]
	return o, ok
}

// contains reports whether key's outcome is indexed.
func (r *recentOutcomes) contains(key string) bool {
	if r == nil {
		return false
	}
	_, ok := r.byKey[key]
	return ok
}

// add indexes o under key, evicting the oldest entries past the bounds. An
// outcome larger than the whole byte bound is not indexed. The index keeps
// its own copy of o's slices.
func (r *recentOutcomes) add(key string, o *Outcome) {
	if r == nil {
		return
	}
	size := entrySize(key, o)
	if size > r.maxBytes {
		return
	}
	if _, dup := r.byKey[key]; dup {
		return // cannot happen (an id is recorded once); keep the first
	}
	for r.n > 0 && (r.n >= r.maxEntries || r.bytes+size > r.maxBytes) {
		r.evictOldest()
	}
	if r.n == len(r.order) {
		r.grow()
	}
	r.order[(r.head+r.n)%len(r.order)] = key
	r.n++
	c := o.clone()
	c.Principal, c.CommandID = "", "" // the key holds them; get's caller knows them
	r.byKey[key] = c
	r.bytes += size
}

// reset empties the index.
func (r *recentOutcomes) reset() {
	if r == nil {
		return
	}
	*r = recentOutcomes{maxEntries: r.maxEntries, maxBytes: r.maxBytes, byKey: make(map[string]Outcome)}
}

// grow doubles the ring (up to maxEntries), so an idle log costs nothing.
// Only called while the ring is full and below maxEntries.
func (r *recentOutcomes) grow() {
	order := make([]string, min(max(2*len(r.order), 64), r.maxEntries))
	for i := 0; i < r.n; i++ {
		order[i] = r.order[(r.head+i)%len(r.order)]
	}
	r.order, r.head = order, 0
}

func (r *recentOutcomes) evictOldest() {
	key := r.order[r.head]
	r.order[r.head] = ""
	r.head = (r.head + 1) % len(r.order)
	r.n--
	o := r.byKey[key]
	r.bytes -= entrySize(key, &o)
	delete(r.byKey, key)
}

// clone returns o with its own copy of Result and Fingerprint, in one
// allocation, shaped as the decoder of the outcome table shapes them
// (Result never nil, Fingerprint nil when empty), so that an answer from
// the index and one from Pebble are equal, not merely alike.
func (o Outcome) clone() Outcome {
	buf := make([]byte, len(o.Result)+len(o.Fingerprint))
	n := copy(buf, o.Result)
	o.Result = buf[:n:n]
	if len(o.Fingerprint) > 0 {
		copy(buf[n:], o.Fingerprint)
		o.Fingerprint = buf[n:]
	} else {
		o.Fingerprint = nil
	}
	return o
}
