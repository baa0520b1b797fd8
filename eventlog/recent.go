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
	// NB: the map holds a slot number, not the outcome: a map's growth
	// and rehashing move its values, and an Outcome is 128 bytes. The
	// entries sit in a ring of maxEntries slots, allocated a block at a
	// time as first reached and never moved, so filling the index copies
	// nothing it already holds.
	byKey   map[string]int32
	blocks  [][]recentEntry // slot i is blocks[i/recentBlock][i%recentBlock]
	head, n int             // the oldest slot and how many are held
}

// recentEntry is one indexed outcome and its key.
type recentEntry struct {
	key string
	o   Outcome
}

// recentBlock is how many slots of the ring are allocated at once.
const recentBlock = 1024

// recentOverhead approximates the fixed bytes an entry costs besides its
// key and variable fields: the map slot, the ring slot and the Outcome.
const recentOverhead = 160

func newRecentOutcomes(maxEntries, maxBytes int) *recentOutcomes {
	if maxEntries <= 0 || maxBytes <= 0 {
		return nil
	}
	maxEntries = min(maxEntries, 1<<31-1) // a slot number is an int32
	return &recentOutcomes{maxEntries: maxEntries, maxBytes: maxBytes, byKey: make(map[string]int32),
		blocks: make([][]recentEntry, (maxEntries+recentBlock-1)/recentBlock)}
}

// entrySize is what one entry is charged against maxBytes.
func entrySize(key string, o *Outcome) int {
	return recentOverhead + 2*len(key) + len(o.Code) + len(o.Reason) + len(o.Result) + len(o.Fingerprint)
}

// slot returns the ring's slot i, allocating its block when first reached.
func (r *recentOutcomes) slot(i int) *recentEntry {
	b := r.blocks[i/recentBlock]
	if b == nil {
		b = make([]recentEntry, min(recentBlock, r.maxEntries-i/recentBlock*recentBlock))
		r.blocks[i/recentBlock] = b
	}
	return &b[i%recentBlock]
}

// get returns key's outcome as stored: its slices are shared with the
// index and never change, so the caller may clone them after releasing the
// lock, and must clone them before handing them out.
func (r *recentOutcomes) get(key string) (Outcome, bool) {
	if r == nil {
		return Outcome{}, false
	}
	i, ok := r.byKey[key]
	if !ok {
		return Outcome{}, false
	}
	return r.slot(int(i)).o, true
}

// getBytes is get for a key in bytes, without converting it to a string.
func (r *recentOutcomes) getBytes(key []byte) (Outcome, bool) {
	if r == nil {
		return Outcome{}, false
	}
	i, ok := r.byKey[string(key)]
	if !ok {
		return Outcome{}, false
	}
	return r.slot(int(i)).o, true
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
	i := (r.head + r.n) % r.maxEntries
	e := r.slot(i)
	e.key, e.o = key, o.clone()
	e.o.Principal, e.o.CommandID = "", "" // the key holds them; get's caller knows them
	r.byKey[key] = int32(i)
	r.n++
	r.bytes += size
}

// reset empties the index.
func (r *recentOutcomes) reset() {
	if r == nil {
		return
	}
	*r = *newRecentOutcomes(r.maxEntries, r.maxBytes)
}

func (r *recentOutcomes) evictOldest() {
	e := r.slot(r.head)
	r.bytes -= entrySize(e.key, &e.o)
	delete(r.byKey, e.key)
	*e = recentEntry{}
	r.head = (r.head + 1) % r.maxEntries
	r.n--
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
