// Package plainpebble is the plain-Pebble baseline of crewbench: synced
// batches of raw keys and values, with the options crewlog's eventlog gives
// Pebble (newest format, its memtable and block cache sizes, bloom filters, block compression per level), and nothing
// else — no record format, hash chain, command table or head.
//
// NB: it is the one package besides eventlog that imports Pebble: a baseline
// has to (integration's import rules exempt it).
package plainpebble

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/crewlog/crewlog/eventlog"
)

// KV is one key and value of a batch.
type KV struct{ Key, Value []byte }

// DB is a Pebble store. Concurrency: Commit and Scan from any goroutine; Close once.
type DB struct{ db *pebble.DB }

// Open opens (creating) the store in dir.
func Open(dir string) (*DB, error) {
	// NB: the cache as eventlog sizes it: its block cache plus the two
	// memtables Pebble charges to it.
	o := &pebble.Options{FormatMajorVersion: pebble.FormatNewest, MemTableSize: eventlog.DefaultMemTableSize,
		CacheSize: eventlog.DefaultCacheSize + 2*eventlog.DefaultMemTableSize, Logger: quiet{}}
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	eventlog.SetCompression(o)
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, fmt.Errorf("plainpebble: open: %w", err)
	}
	return &DB{db: db}, nil
}

// Commit writes kvs in one batch committed with pebble.Sync.
func (d *DB) Commit(kvs []KV) error {
	b := d.db.NewBatchWithSize(len(kvs) * 64)
	defer b.Close()
	for _, kv := range kvs {
		if err := b.Set(kv.Key, kv.Value, nil); err != nil {
			return fmt.Errorf("plainpebble: batch: %w", err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("plainpebble: commit: %w", err)
	}
	return nil
}

// Scan calls fn for every key starting with prefix, in key order. fn must not
// keep k or v.
func (d *DB) Scan(prefix []byte, fn func(k, v []byte) error) (err error) {
	upper := append([]byte(nil), prefix...)
	upper[len(upper)-1]++
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("plainpebble: iterator: %w", err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("plainpebble: iterator: %w", cerr)
		}
	}()
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("plainpebble: value: %w", err)
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the store.
func (d *DB) Close() error { return d.db.Close() }

// quiet drops Pebble's informational logging, which would interleave with the
// benchmark's output.
type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("plainpebble: "+format, args...))
}

// Work is what the store's Pebble wrote and read since it opened: its WAL, its flushes and its compactions.
type Work struct{ WAL, Flushed, CompactionRead, CompactionWritten uint64 }

// Work reads Pebble's metrics.
func (d *DB) Work() Work {
	m := d.db.Metrics()
	w := Work{WAL: m.WAL.BytesWritten}
	for i := range m.Levels {
		w.Flushed += m.Levels[i].TableBytesFlushed
		w.CompactionRead += m.Levels[i].TableBytesRead
		w.CompactionWritten += m.Levels[i].TableBytesCompacted
	}
	return w
}
