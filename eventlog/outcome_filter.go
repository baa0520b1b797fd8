package eventlog

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// outcomeFilter is an in-memory filter over every outcome key the store
// holds: a key it has not seen is certainly not recorded, so the lookup of
// a new command id — what almost every command with an id does — is
// answered without reading Pebble. A key it has seen may or may not be
// recorded (a false positive, about 0.2 % of new keys per full part), and
// the caller reads Pebble as before.
//
// It is never persisted. Open starts it empty and adds the key of every
// outcome staged from then on; a background scan (buildOutcomeFilter),
// started by the first append, adds the keys already in the store. Until
// the scan has finished it proves nothing. Because appends add their keys
// from the moment the log opens and the scan reads a consistent view taken
// after that, every outcome key in the store is in the filter once it is
// ready.
//
// Cost: 2 bytes per outcome key, up to twice that while the newest part
// fills (≈ 16 MiB for 4 million outcomes), at least 128 KiB once a key is
// added, and one read of the outcome
// table in the background after the first append (it passes through the
// block cache like any scan). Deleting an outcome key (the
// fixture rewind, the step to format 3) only leaves a false positive.
//
// It is a chain of blocked Bloom filters, each twice the size of the one
// before, so it grows with the store without knowing its size up front:
// 16 bits per key (2 bytes), 8 bits set in one 64-byte block per key, so a
// probe touches one cache line per part. Every part adds its false
// positives, so the first is sized for 65,536 keys, not a few thousand:
// 150,000 outcomes take two parts (0.23 % of new keys called present)
// instead of six (0.9 %), and 4 million six instead of ten (1.1 %
// instead of 1.8 %).
//
// Not safe for concurrent use, but bytes: the Log guards it with outcomesMu.
type outcomeFilter struct {
	seed  maphash.Seed
	parts []filterPart
	ready bool         // the scan of the keys already stored has finished
	size  atomic.Int64 // the parts' bytes, read without outcomesMu (StorageStats)
}

type filterPart struct {
	blocks [][filterBlockWords]uint64
	keys   int // added so far
	cap    int // keys it is sized for
}

const (
	filterBlockWords = 8 // 512 bits: one cache line
	filterBitsPerKey = 16
	filterProbes     = 8
	filterFirstCap   = 1 << 16
)

func newOutcomeFilter() *outcomeFilter {
	return &outcomeFilter{seed: maphash.MakeSeed()}
}

// hash is the key's hash; add and mayContain take it so that a caller can
// hash outside outcomesMu.
func (f *outcomeFilter) hash(key []byte) uint64 {
	if f == nil {
		return 0
	}
	return maphash.Bytes(f.seed, key)
}

// hashString is hash of a key held as a string: the same hash.
func (f *outcomeFilter) hashString(key string) uint64 {
	if f == nil {
		return 0
	}
	return maphash.String(f.seed, key)
}

// add records a key's hash.
func (f *outcomeFilter) add(h uint64) {
	if f == nil {
		return
	}
	if n := len(f.parts); n == 0 || f.parts[n-1].keys >= f.parts[n-1].cap {
		c := filterFirstCap
		if n > 0 {
			c = 2 * f.parts[n-1].cap
		}
		f.parts = append(f.parts, filterPart{blocks: make([][filterBlockWords]uint64, c*filterBitsPerKey/512), cap: c})
		f.size.Add(int64(len(f.parts[n].blocks)) * filterBlockWords * 8)
	}
	p := &f.parts[len(f.parts)-1]
	p.set(h)
	p.keys++
}

// bytes is the memory the filter's parts take.
func (f *outcomeFilter) bytes() int64 {
	if f == nil {
		return 0
	}
	return f.size.Load()
}

// provesAbsent reports whether the key of hash h is certainly not stored.
// It is false while the filter is being built.
func (f *outcomeFilter) provesAbsent(h uint64) bool {
	if f == nil || !f.ready {
		return false
	}
	for i := range f.parts {
		if f.parts[i].has(h) {
			return false
		}
	}
	return true
}

// block picks the key's block from the hash's high bits (a multiply-shift
// range reduction); probe i sets bit (a + i·b) mod 512 of it, with a and b
// from the low bits.
func (p *filterPart) block(h uint64) *[filterBlockWords]uint64 {
	hi, _ := bits.Mul64(h^(h>>29)*0xbf58476d1ce4e5b9, uint64(len(p.blocks)))
	return &p.blocks[hi]
}

func (p *filterPart) set(h uint64) {
	b := p.block(h)
	a, step := uint32(h), uint32(h>>32)|1
	for i := 0; i < filterProbes; i++ {
		bit := a & 511
		b[bit>>6] |= 1 << (bit & 63)
		a += step
	}
}

func (p *filterPart) has(h uint64) bool {
	b := p.block(h)
	a, step := uint32(h), uint32(h>>32)|1
	for i := 0; i < filterProbes; i++ {
		bit := a & 511
		if b[bit>>6]&(1<<(bit&63)) == 0 {
			return false
		}
		a += step
	}
	return true
}

// filterScanChunk is how many stored keys the scan hashes between two
// acquisitions of outcomesMu (which appends and lookups take).
const filterScanChunk = 4096

// buildOutcomeFilter adds every outcome key already stored to l.filter and
// then makes it ready. It runs in the background from the first append and
// stops early
// when the log closes (the filter then stays unready: lookups read Pebble).
// A read error leaves it unready too; it is only a shortcut.
func (l *Log) buildOutcomeFilter() {
	defer close(l.filterDone)
	// NB: the iterator is a consistent view taken now, after Open made
	// appends add their keys: a key is either in this view or added by the
	// append that staged it (or both). Close waits for this goroutine, so
	// the store is open for as long as it reads.
	it, err := prefixIter(l.db, prefixOutcome)
	if err != nil {
		return
	}
	defer it.Close()
	if l.opts.afterFilterView != nil {
		l.opts.afterFilterView()
	}
	hashes := make([]uint64, 0, filterScanChunk)
	flush := func() {
		l.outcomesMu.Lock()
		for _, h := range hashes {
			l.filter.add(h)
		}
		l.outcomesMu.Unlock()
		hashes = hashes[:0]
	}
	for ok := it.First(); ok; ok = it.Next() {
		hashes = append(hashes, l.filter.hash(it.Key()))
		if len(hashes) == filterScanChunk {
			if l.closed.Load() {
				return
			}
			flush()
		}
	}
	if it.Error() != nil {
		l.opts.Logger.Warn("eventlog: the outcome filter could not be built; command ids are looked up in the store",
			"err", it.Error())
		return
	}
	flush()
	l.outcomesMu.Lock()
	l.filter.ready = true
	l.outcomesMu.Unlock()
}
