package eventlog

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults applied by Open for zero-valued options.
//
// Pebble's memory is the block cache plus its memtables (one filling, one
// flushing): with these defaults ≈ 32 + 2 × 16 MiB = 64 MiB, against
// 192 MiB with the 64 MiB cache and memtables used before. The daemon's
// resident set is bounded by what it serves (docs/design-read-models.md),
// and Pebble was most of it: reading finished runs back filled the cache,
// writing filled the memtables. Measured A/B on the engine and on
// crewbench history's writer, the smaller sizes cost no throughput beyond
// the machine's noise (docs/benchmarks.md, "Pebble's memory").
const (
	DefaultCacheSize       = 32 << 20
	DefaultMaxPayloadBytes = 1 << 20
	DefaultMemTableSize    = 16 << 20
	DefaultRecentOutcomes  = 1 << 16
	DefaultRecentBytes     = 16 << 20
	maxMaxPayloadBytes     = 64 << 20
)

// Options configure Open. A nil *Options means all defaults; zero fields
// mean their default.
type Options struct {
	// FS is the file system the store lives on: vfs.Default in production,
	// vfs.NewCrashableMem or an errorfs wrapper in tests.
	FS vfs.FS
	// Logger receives Pebble's messages (info at debug level). Nil discards.
	Logger *slog.Logger
	// CacheSize is the block cache size in bytes (default 32 MiB), on top
	// of what Pebble reserves in its cache for memtables (2 × MemTableSize
	// in steady state).
	CacheSize int64
	// MemTableSize is Pebble's memtable size (default 16 MiB): a larger one
	// means fewer flushes and compactions competing with appends for CPU,
	// and more memory (two of them while one flushes).
	MemTableSize uint64
	// MaxPayloadBytes bounds one event's payload (default 1 MiB, at most
	// 64 MiB). Larger payloads are refused by Append with ErrInvalid.
	MaxPayloadBytes int
	// ReadOnly opens an existing store without writing to it. Append,
	// SaveSnapshot and Checkpoint-free writes return ErrReadOnly. A table
	// block that fails its checksum is the error of the read that met it
	// (a writable open, as Pebble does, treats it as fatal: it panics).
	ReadOnly bool
	// AllowOlderFormat opens a store whose format is older than
	// CurrentFormat for writing. Only the migrations set it: any other
	// writer would append to a store that lacks what the current format
	// guarantees (Open refuses with ErrFormatTooOld).
	AllowOlderFormat bool
	// RecentOutcomes and RecentOutcomeBytes bound the in-memory index of
	// the outcomes this log recorded most recently (default 65,536 entries
	// and 16 MiB), which answers Outcome and the duplicate check of Append
	// without a Pebble read. Negative disables the index; answers are the
	// same either way.
	RecentOutcomes     int
	RecentOutcomeBytes int
	// BeforeSync, when set, is called by every Append after its batch is
	// handed to Pebble and before its sync is awaited: a crash point for
	// tests (take a vfs.CrashableMem clone there). Nil in production.
	BeforeSync func()

	// afterFilterView, when set, is called by the outcome filter's build
	// once it has taken its view of the store and before it reads it: a
	// test forces appends into that gap. Nil in production.
	afterFilterView func()
	// beforeDerivedSyncOutcome, when set, is called by the background waiter of the sync after a write made without
	// one (derived_sync.go) once that sync is over and before its outcome is recorded: a test holds a failed sync's
	// record back to force writes into that gap. Nil in production.
	beforeDerivedSyncOutcome func()
	// beforeSyncedHandOff, when set, is called by a synced write (an append, applySynced's) before it checks for the
	// sync still pending after a write made without one and hands its batch to Pebble: a test forces such a write in
	// just before them. Nil in production.
	beforeSyncedHandOff func()
	// beforeOutcomeRead, when set, is called by Outcome once it has checked what it holds in memory and before it
	// reads the outcome table: a test forces an append's hand-off into that gap. Nil in production.
	beforeOutcomeRead func()
	// afterHandOff, when set, is called by an append once Pebble holds its batch, which Pebble shows to readers
	// before its sync, with the log's lock held: a test looks the append's outcome up in that gap. Nil in production.
	afterHandOff func()
	// derivedLockWaits, when set, is called by a write that finds the lock of the writes made without a sync held
	// (lockDerived), before it waits for it: a test learns that the write waits. Nil in production.
	derivedLockWaits func()
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	var errs []error
	if o.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("eventlog: CacheSize %d is negative", o.CacheSize))
	}
	if o.MemTableSize > 1<<30 {
		errs = append(errs, fmt.Errorf("eventlog: MemTableSize %d exceeds 1 GiB", o.MemTableSize))
	}
	if o.MaxPayloadBytes < 0 || o.MaxPayloadBytes > maxMaxPayloadBytes {
		errs = append(errs, fmt.Errorf("eventlog: MaxPayloadBytes %d is outside 0..%d", o.MaxPayloadBytes,
			maxMaxPayloadBytes))
	}
	return errors.Join(errs...)
}

// withDefaults returns a copy with every zero field set.
func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.MemTableSize == 0 {
		c.MemTableSize = DefaultMemTableSize
	}
	if c.RecentOutcomes == 0 {
		c.RecentOutcomes = DefaultRecentOutcomes
	}
	if c.RecentOutcomeBytes == 0 {
		c.RecentOutcomeBytes = DefaultRecentBytes
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	return c
}
