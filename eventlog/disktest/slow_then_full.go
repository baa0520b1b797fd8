// Package disktest holds the disk faults that the tests of the event log, and of what runs over it (the commands
// engine, crewd), share: a slow disk that then fills up, under which Pebble holds a store's writes back and its
// flush then fails, and the signal that the store is held back.
//
// NB: it imports no Pebble, which only package eventlog may import outside tests (the import rules' test reads
// every package's non-test imports): a test wraps Fault in its errorfs injector.
package disktest

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// SlowThenFull is a disk that is slow and then fills up, as seen by the writes to a store's table files (a flush's):
// each waits until the disk is released (Fill, Free), and fails with ENOSPC while the disk is full, which it is from
// the start. A store on it whose appends fill its next memtable while the flush's table waits has Pebble hold them
// back; Fill then fails the flush, the append held for good, and Free lets it land.
//
// Concurrency: every method is safe from any goroutine.
type SlowThenFull struct {
	full     atomic.Bool
	release  chan struct{} // closed once the table writes may go on
	released sync.Once
}

// NewSlowThenFull returns a full disk whose table writes wait for Fill or Free.
func NewSlowThenFull() *SlowThenFull {
	d := &SlowThenFull{release: make(chan struct{})}
	d.full.Store(true)
	return d
}

// Fault is the error of an operation on path, a write when write is set: none but for a write to a table file, which
// waits for the disk's release and then fails with ENOSPC while the disk is full.
func (d *SlowThenFull) Fault(path string, write bool) error {
	if !write || !strings.HasSuffix(path, ".sst") {
		return nil
	}
	<-d.release // NB: a slow disk: the flush's table waits while the writes fill the next memtable
	if d.full.Load() {
		return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	}
	return nil
}

// Fill lets the table writes go on, and the disk refuse them: the flush fails.
func (d *SlowThenFull) Fill() { d.released.Do(func() { close(d.release) }) }

// Free gives the disk its space back and lets the table writes go on, so that the flush, the writes it held back and
// the closes that wait for them end: a test's cleanup calls it, whether or not it filled the disk.
func (d *SlowThenFull) Free() {
	d.full.Store(false)
	d.released.Do(func() { close(d.release) })
}
