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
// Not safe for concurrent use: the Log guards it with outcomesMu.
type recentOutcomes struct {
	maxEntries int
	maxBytes   int
	bytes      int
	// NB: the map holds a slot number, not the outcome: a map's growth
	// and rehashing move its values, and an Outcome is 128 bytes. The
	// entries sit in slots allocated a block at a time and never moved; a
	// slot an eviction frees is reused before a new one is allocated, so
	// the slots never outnumber the most entries the index held at once.
	byKey  map[string]int32
	blocks [][]recentEntry // slot i is blocks[i/recentBlock][i%recentBlock]
	free   []int32         // slots evictions freed
	order  []int32         // slots, oldest at head; a ring of len(order)
	head   int
	n      int // entries held
}

// recentEntry is one indexed outcome and its key.
type recentEntry struct {
	key string
	o   Outcome
}

// recentBlock is how many slots are allocated at once.
const recentBlock = 1024

// recentOverhead approximates the fixed bytes an entry costs besides its
// key and variable fields: the map slot, the entry's slot and the ring's.
const recentOverhead = 160

func newRecentOutcomes(maxEntries, maxBytes int) *recentOutcomes {
	if maxEntries <= 0 || maxBytes <= 0 {
		return nil
	}
	// NB: no more entries than the byte bound can hold, and a slot
	// number is an int32.
	maxEntries = min(maxEntries, maxBytes/recentOverhead+1, 1<<31-1)
	return &recentOutcomes{maxEntries: maxEntries, maxBytes: maxBytes, byKey: make(map[string]int32)}
}

// entrySize is what one entry is charged against maxBytes.
func entrySize(key string, o *Outcome) int {
	return recentOverhead + 2*len(key) + len(o.Code) + len(o.Reason) + len(o.Result) + len(o.Fingerprint)
}

// entry returns slot i.
func (r *recentOutcomes) entry(i int32) *recentEntry {
	return &r.blocks[i/recentBlock][i%recentBlock]
}

// slots is how many slots are allocated: each holds an entry or is free.
func (r *recentOutcomes) slots() int { return r.n + len(r.free) }

// takeSlot returns a free slot, allocating one (and its block, when it
// starts one) when none is.
func (r *recentOutcomes) takeSlot() int32 {
	if n := len(r.free); n > 0 {
		i := r.free[n-1]
		r.free = r.free[:n-1]
		return i
	}
	i := r.slots()
	if i == len(r.blocks)*recentBlock {
		r.blocks = append(r.blocks, make([]recentEntry, recentBlock))
	}
	return int32(i)
}

// get returns key's outcome as stored: its slices are shared with the
// index and never change, so the caller may clone them after releasing the
// lock, and must clone them before handing them out. key is in bytes: the
// lookup converts it without copying.
func (r *recentOutcomes) get(key []byte) (Outcome, bool) {
	if r == nil {
		return Outcome{}, false
	}
	i, ok := r.byKey[string(key)]
	if !ok {
		return Outcome{}, false
	}
	return r.entry(i).o, true
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
	i := r.takeSlot()
	e := r.entry(i)
	e.key, e.o = key, o.clone()
	e.o.Principal, e.o.CommandID = "", "" // the key holds them; get's caller knows them
	r.byKey[key] = i
	r.order[(r.head+r.n)%len(r.order)] = i
	r.n++
	r.bytes += size
}

// reset empties the index.
func (r *recentOutcomes) reset() {
	if r == nil {
		return
	}
	*r = recentOutcomes{maxEntries: r.maxEntries, maxBytes: r.maxBytes, byKey: make(map[string]int32)}
}

// grow doubles the ring of slot numbers (up to maxEntries), so an idle log
// costs nothing. Only called while the ring is full and below maxEntries.
func (r *recentOutcomes) grow() {
	order := make([]int32, min(max(2*len(r.order), 64), r.maxEntries))
	for i := 0; i < r.n; i++ {
		order[i] = r.order[(r.head+i)%len(r.order)]
	}
	r.order, r.head = order, 0
}

func (r *recentOutcomes) evictOldest() {
	i := r.order[r.head]
	r.head = (r.head + 1) % len(r.order)
	r.n--
	e := r.entry(i)
	r.bytes -= entrySize(e.key, &e.o)
	delete(r.byKey, e.key)
	*e = recentEntry{}
	r.free = append(r.free, i)
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
