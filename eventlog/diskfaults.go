//go:build crewlog_faults

package eventlog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// DiskFaults is a fault-injecting file system for a store, compiled only into test builds tagged crewlog_faults:
// a test makes the disk full, makes one WAL fsync fail, or stalls every write, while crewd runs. No real build has
// it. The faults:
//
//   - Full: every write, preallocation and file creation fails with ENOSPC, as on a full disk. Free reports no
//     space once a write has failed (or at once if the disk was full when the process started): the disk filled
//     up between two readings of crewd's space guard, so the guard cannot have refused that write.
//   - Low: nothing fails, but Free reports no space: the state a disk is in just before it is full, where crewd's
//     space guard refuses writes (disk-full) before Pebble fails.
//   - Stall: every write and sync waits until the stall is lifted (a disk that hangs for seconds).
//   - A failing sync (ArmSyncFailure): the next sync of a WAL file fails with EIO, once, and the file loses what
//     was written to it since its last successful sync, as when the kernel drops the dirty pages of a failed
//     fsync. What was not synced is then gone whatever Pebble believes.
//
// Concurrency: every method is safe from any goroutine.
type DiskFaults struct {
	lg *slog.Logger

	mu       sync.Mutex
	full     bool
	fullSeen bool // a write has failed on the full disk, or it was full from the start: Free shows it
	low      bool
	stalled  chan struct{} // non-nil while stalled; closed when the stall is lifted
	period   int           // counts Set calls, so each injected fault is logged once per period
	logged   map[string]int

	// consume, when set, is the armed sync failure: it reports whether this process is the one to inject it (the
	// arming may outlive a process; only one injects it).
	consume atomic.Pointer[func() bool]
}

// NewDiskFaults returns a file system with no fault; lg receives one warning per fault injected.
func NewDiskFaults(lg *slog.Logger) *DiskFaults {
	return &DiskFaults{lg: lg, logged: map[string]int{}}
}

// Set makes the disk full, low, or stalled (or none of them, all false). The first Set is the state the process
// starts in: a disk full then shows no space at once.
func (d *DiskFaults) Set(full, low, stall bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.period++
	switch {
	case !full:
		d.fullSeen = false
	case !d.full:
		d.fullSeen = d.period == 1 // full when the process started
	}
	d.full, d.low = full, low
	switch {
	case stall && d.stalled == nil:
		d.stalled = make(chan struct{})
	case !stall && d.stalled != nil:
		close(d.stalled)
		d.stalled = nil
	}
}

// ArmSyncFailure makes the next sync of a WAL file fail if consume, called then, returns true.
func (d *DiskFaults) ArmSyncFailure(consume func() bool) { d.consume.Store(&consume) }

// Free reports zero free bytes while the disk is low, or full and seen so; ok is false otherwise (ask the real file
// system).
func (d *DiskFaults) Free() (free uint64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return 0, d.low || d.full && d.fullSeen
}

// Wrap sets o.FS to the fault-injecting file system over o.FS (or the operating system's).
func (d *DiskFaults) Wrap(o *Options) {
	inner := o.FS
	if inner == nil {
		inner = vfs.Default
	}
	o.FS = &faultFS{FS: inner, d: d}
}

// injected logs the first injection of kind in the current period.
func (d *DiskFaults) injected(kind, path string) {
	d.mu.Lock()
	first := d.logged[kind] != d.period || kind == "fsync"
	d.logged[kind] = d.period
	d.mu.Unlock()
	if first {
		d.lg.Warn("disk fault injected", "fault", kind, "path", path)
	}
}

// beforeWrite waits out a stall, then fails on a full disk.
func (d *DiskFaults) beforeWrite(op, path string) error {
	d.awaitStall(path)
	d.mu.Lock()
	full := d.full
	d.fullSeen = d.fullSeen || full
	d.mu.Unlock()
	if full {
		d.injected("enospc", path)
		return &os.PathError{Op: op, Path: path, Err: syscall.ENOSPC}
	}
	return nil
}

func (d *DiskFaults) awaitStall(path string) {
	d.mu.Lock()
	gate := d.stalled
	d.mu.Unlock()
	if gate != nil {
		d.injected("stall", path)
		<-gate
	}
}

// syncFails reports whether this sync of path is the armed failure.
func (d *DiskFaults) syncFails(path string) bool {
	if !strings.HasSuffix(path, ".log") {
		return false
	}
	p := d.consume.Load()
	if p == nil || !d.consume.CompareAndSwap(p, nil) {
		return false
	}
	return (*p)()
}

// faultFS wraps the files opened for writing.
type faultFS struct {
	vfs.FS
	d *DiskFaults
}

func (fs *faultFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.d.beforeWrite("create", name); err != nil {
		return nil, err
	}
	f, err := fs.FS.Create(name, category)
	return fs.wrap(name, f, 0, err)
}

func (fs *faultFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.d.beforeWrite("create", newname); err != nil {
		return nil, err
	}
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(newname, f, 0, err)
}

func (fs *faultFS) OpenReadWrite(name string, category vfs.DiskWriteCategory,
	opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return fs.wrap(name, f, st.Size(), nil)
}

func (fs *faultFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	u, err := fs.FS.GetDiskUsage(path)
	if _, faked := fs.d.Free(); faked && err == nil {
		u.AvailBytes = 0
	}
	return u, err
}

func (fs *faultFS) Unwrap() vfs.FS { return fs.FS }

func (fs *faultFS) wrap(name string, f vfs.File, size int64, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, d: fs.d, path: name, written: size, synced: size}, nil
}

// faultFile is a file open for writing: it knows how much of it was synced, to lose the rest on a failed sync.
type faultFile struct {
	vfs.File
	d    *DiskFaults
	path string

	mu              sync.Mutex
	written, synced int64 // NB: the end of the written data; writes to a reused file start at 0
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.d.beforeWrite("write", f.path); err != nil {
		return 0, err
	}
	n, err := f.File.Write(p)
	f.mu.Lock()
	f.written += int64(n)
	f.mu.Unlock()
	return n, err
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.d.beforeWrite("write", f.path); err != nil {
		return 0, err
	}
	n, err := f.File.WriteAt(p, off)
	f.mu.Lock()
	f.written = max(f.written, off+int64(n))
	f.mu.Unlock()
	return n, err
}

func (f *faultFile) Preallocate(off, length int64) error {
	if err := f.d.beforeWrite("preallocate", f.path); err != nil {
		return err
	}
	return f.File.Preallocate(off, length)
}

func (f *faultFile) Sync() error { return f.sync(func() (bool, error) { return true, f.File.Sync() }) }

func (f *faultFile) SyncData() error {
	return f.sync(func() (bool, error) { return true, f.File.SyncData() })
}

func (f *faultFile) SyncTo(length int64) (fullSync bool, err error) {
	err = f.sync(func() (bool, error) {
		fullSync, err = f.File.SyncTo(length)
		return fullSync, err
	})
	return fullSync, err
}

// sync runs do unless it is the armed failure; a full sync that succeeds marks everything written so far synced.
func (f *faultFile) sync(do func() (full bool, err error)) error {
	f.d.awaitStall(f.path)
	f.mu.Lock()
	written, synced := f.written, f.synced
	f.mu.Unlock()
	if f.d.syncFails(f.path) {
		f.d.injected("fsync", f.path)
		// The kernel dropped the dirty pages: what was written since the last sync is gone.
		if err := os.Truncate(f.path, synced); err != nil {
			return fmt.Errorf("%w (and losing the unsynced tail: %v)",
				&os.PathError{Op: "sync", Path: f.path, Err: syscall.EIO}, err)
		}
		return &os.PathError{Op: "sync", Path: f.path, Err: syscall.EIO}
	}
	full, err := do()
	if err == nil && full {
		f.mu.Lock()
		f.synced = max(f.synced, written)
		f.mu.Unlock()
	}
	return err
}
