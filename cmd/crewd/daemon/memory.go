package daemon

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultMemoryMiB is --memory-mib's default: the resident memory crewd aims
// to stay within, below the 300 MB a store of 10M events in 10,000 finished
// runs and 10 active ones must fit in while it writes through a snapshot.
const DefaultMemoryMiB = 256

// maxMemoryMiB bounds --memory-mib (1 TiB).
const maxMemoryMiB = 1 << 20

// memoryOverhead is the part of crewd's resident memory that is neither the
// Go heap nor Pebble's cache and memtables: the binary's resident pages
// (≈ 25 MiB) and malloc's own bookkeeping.
const memoryOverhead = 32 << 20

// minGoMemoryLimit is the lowest soft limit --memory-mib sets on the Go
// heap, however little the flags leave it: below it the collector would run
// all the time for an engine holding only a few active runs.
const minGoMemoryLimit = 64 << 20

// goMemoryLimit is the Go heap's target for c (0: none), as goHeapTarget
// for how this build's Pebble allocates.
func goMemoryLimit(c Config) int64 { return goHeapTarget(c, pebbleOffHeap) }

// goHeapTarget is the Go heap's target for c (0: none): what --memory-mib
// leaves once memoryOverhead is taken out and, when Pebble allocates off the
// Go heap (offHeap: built with cgo), the store's cache and its memtables (the
// two Pebble reserves in the cache and one being flushed); at least
// minGoMemoryLimit. Without cgo the cache and memtables are on the Go heap,
// so the target holds them too.
//
// Why a target: with GOGC=100 the heap may grow to twice what was live at
// the last collection, and a snapshot (a copy of the active runs' records,
// its encoding) is live when the collector measures it, so the heap's goal
// doubles that too. Under a soft limit the collector runs earlier as the
// heap nears it, rather than let the heap double.
func goHeapTarget(c Config, offHeap bool) int64 {
	if c.MemoryBytes == 0 {
		return 0
	}
	limit := c.MemoryBytes - memoryOverhead
	if offHeap {
		limit -= c.CacheBytes + 3*int64(c.MemTableBytes)
	}
	return max(limit, minGoMemoryLimit)
}

// liveHeadroom is how far above the live heap the soft limit stays when the
// live heap outgrows the target: a quarter of it (a GOGC of 25).
//
// Why: a limit below the live heap makes the collector run back to back
// (the runtime caps it at about half the CPU), for as long as the live heap
// stays above it. A snapshot of a large active state is such a moment:
// measured on crewbench history at 10M events with a fixed limit of 144 MiB,
// the snapshot's clone and encoding took the live heap to 159 MB and ten
// collections ran back to back, 3 s of CPU for one snapshot. Following the
// live heap at a quarter above it bounds the collector's work to one
// collection per quarter of growth, and the heap to 1.25 × the live one
// instead of twice.
const liveHeadroom = 4 // live/liveHeadroom above the live heap

// memoryLimitFor is the soft limit for target when the last collection
// found live bytes live and the runtime holds overhead bytes beside the
// heap's spans (stacks, metadata, what the limit counts and no heap goal
// can use): the target, or enough for a heap goal a quarter above the live
// heap when that is more.
func memoryLimitFor(target int64, live, overhead uint64) int64 {
	return max(target, int64(live+live/liveHeadroom+overhead))
}

// applyMemoryLimit sets the Go runtime's soft memory limit from c, unless
// GOMEMLIMIT (read by the runtime at start) says otherwise, and keeps it at
// memoryLimitFor the live heap until ctx ends.
func applyMemoryLimit(ctx context.Context, c Config, getenv func(string) string, lg *slog.Logger) {
	if getenv("GOMEMLIMIT") != "" {
		lg.Info("Go memory limit from GOMEMLIMIT; --memory-mib not applied", "GOMEMLIMIT", getenv("GOMEMLIMIT"))
		return
	}
	target := goMemoryLimit(c)
	if target == 0 {
		return
	}
	debug.SetMemoryLimit(target)
	lg.Info("Go memory limit", "mib", target>>20, "memoryMiB", c.MemoryBytes>>20)
	followLive(ctx, target, c.MemoryBytes, lg)
}

// liveSamples are what followLive reads: the live heap, and what the
// runtime maps beside the heap's spans (total less released, free, objects
// and unused).
var liveSamples = []string{"/gc/heap/live:bytes", "/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes"}

// followLive sets the soft limit to memoryLimitFor(target, …) after each
// garbage collection (when the runtime updates the live heap) until ctx
// ends, and warns on lg when the live heap outgrows the target (outgrowth),
// naming --memory-mib's value memoryBytes.
func followLive(ctx context.Context, target, memoryBytes int64, lg *slog.Logger) {
	samples := make([]metrics.Sample, len(liveSamples))
	for i, name := range liveSamples {
		samples[i].Name = name
	}
	limit := target
	var grown outgrowth
	afterEachGC(ctx, func() bool {
		metrics.Read(samples)
		var v [6]uint64
		for i := range samples {
			if samples[i].Value.Kind() != metrics.KindUint64 {
				return false // not reported by this runtime: the target stays
			}
			v[i] = samples[i].Value.Uint64()
		}
		live, overhead := liveAndOverhead(v)
		if l := memoryLimitFor(target, live, overhead); l != limit {
			limit = l
			debug.SetMemoryLimit(limit)
		}
		if grown.step(limit > target, time.Now()) {
			lg.Warn("the live Go heap outgrew what --memory-mib leaves it: the collector now keeps the heap a quarter "+
				"above the live one and runs more often, so each command costs more CPU; give crewd more memory "+
				"with --memory-mib if its active runs need it", "liveMiB", live>>20, "targetMiB", target>>20,
				"memoryMiB", memoryBytes>>20)
		}
		return true
	})
}

// outgrowthWarnEvery is the least time between two of followLive's
// warnings: a live heap about the target crosses it at every other
// collection, and one warning says what there is to say.
const outgrowthWarnEvery = time.Hour

// outgrowth follows whether the soft limit is above the target, i.e. the
// live heap outgrew it, so that an operator learns why crewd's collector
// runs more and its commands cost more (docs/benchmarks.md, "The socket
// cell is crewd": a fifth of the rate at 64 clients on one large run).
type outgrowth struct {
	above    bool
	warnedAt time.Time // zero: never
}

// step records whether the limit is above the target at now and reports
// whether a warning is due: it just went above, and no warning was given in
// the last outgrowthWarnEvery.
func (o *outgrowth) step(above bool, now time.Time) (warn bool) {
	if above && !o.above && (o.warnedAt.IsZero() || now.Sub(o.warnedAt) >= outgrowthWarnEvery) {
		o.warnedAt, warn = now, true
	}
	o.above = above
	return warn
}

// liveAndOverhead are the live heap and what the runtime maps beside the
// heap's spans, from liveSamples' values v.
func liveAndOverhead(v [6]uint64) (live, overhead uint64) {
	live, mapped := v[0], v[1]-min(v[2], v[1])
	if heap := v[3] + v[4] + v[5]; mapped > heap {
		overhead = mapped - heap
	}
	return live, overhead
}

// gcSentinel is the object whose finalizer afterEachGC sets; it holds a
// pointer so that it is never a tiny allocation (whose finalizer may not
// run).
type gcSentinel struct{ _ *byte }

// afterEachGC calls f after each garbage collection, on the runtime's
// finalizer goroutine, until ctx ends or f returns false: a finalizer on an
// unreachable sentinel runs once the collection that found it ends, and
// sets itself on a new one.
//
// Why not a ticker: the live heap changes only at the end of a collection,
// and an idle crewd would wake to read it for nothing.
func afterEachGC(ctx context.Context, f func() bool) {
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
			if ctx.Err() == nil && f() {
				arm()
			}
		})
	}
	arm()
}
