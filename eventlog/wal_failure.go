package eventlog

import (
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFailure is the first write or sync of a WAL file that failed, which the log learns from its file system
// (walWatchFS) in the goroutine that writes Pebble's WAL, before Pebble does.
//
// Pebble's WAL writes its blocks and syncs them in the background, keeps the first error, takes it up at the next
// record that starts a new block and panics on the record after that. The writers learn of the error from the sync
// they await, and a synced append awaits its own only after the next one is handed off (Stage), a derived write never
// at once (derivedSync): two records can reach the WAL between its error and the failure recorded, the second
// panicking, such as a view (its record, then the sync it requests) written after an append whose bytes a full disk
// refused. Every hand-off to Pebble is made with the lock of derivedSync held and checks walFailure first (refusal,
// requestSyncLocked), and walFailure is set before Pebble's WAL keeps the error: a record that passed the check
// before the failure may still take the error up, but the next is refused, whatever Staged.Wait and the pending sync
// after a derived write have recorded yet. (Pebble panics still where the error meets a WAL it closes, at a
// memtable's rotation: crewd exits 2, Not guaranteed in its doc.)
type walFailure struct {
	err atomic.Pointer[error]
	log atomic.Pointer[Log] // set once Open has built the log, which the failure then fails stop
}

// walWriteCategory is the category Pebble opens its WAL files with.
const walWriteCategory vfs.DiskWriteCategory = "pebble-wal"

// record keeps err, the first failure, and fails the log stop.
func (w *walFailure) record(err error) {
	err = fmt.Errorf("WAL: %w", err)
	if !w.err.CompareAndSwap(nil, &err) {
		return
	}
	if l := w.log.Load(); l != nil {
		l.fail(err) // NB: takes no lock of the log's: an append may wait for this goroutine holding l.mu
	}
}

// failed is the first failure of a WAL file, nil while none failed.
func (w *walFailure) failed() error {
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

// walWatchFS is the store's file system, watching the WAL files Pebble writes for a failed write or sync.
type walWatchFS struct {
	vfs.FS
	wal *walFailure
}

func (fs *walWatchFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.watch(f, category, err)
}

func (fs *walWatchFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.watch(f, category, err)
}

func (fs *walWatchFS) Unwrap() vfs.FS { return fs.FS }

func (fs *walWatchFS) watch(f vfs.File, category vfs.DiskWriteCategory, err error) (vfs.File, error) {
	if err != nil || category != walWriteCategory {
		return f, err
	}
	return &walFile{File: f, wal: fs.wal}, nil
}

// walFile is a WAL file whose failed writes and syncs are recorded in wal.
type walFile struct {
	vfs.File
	wal *walFailure
}

func (f *walFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.failed(err)
}

func (f *walFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.failed(err)
}

func (f *walFile) Sync() error { return f.syncFailed(f.File.Sync()) }

func (f *walFile) SyncData() error { return f.syncFailed(f.File.SyncData()) }

func (f *walFile) SyncTo(length int64) (fullSync bool, err error) {
	fullSync, err = f.File.SyncTo(length)
	return fullSync, f.syncFailed(err)
}

// syncFailed records err, a sync's error, if any and not ignored (syncOutcome: a build with a planted bug ignores it,
// here too, for the linearizability checker to find), and returns it as Pebble's to handle.
func (f *walFile) syncFailed(err error) error {
	if syncOutcome(err) != nil {
		f.wal.record(err)
	}
	return err
}

// failed records err, if any, and returns it.
func (f *walFile) failed(err error) error {
	if err != nil {
		f.wal.record(err)
	}
	return err
}
