package eventlog

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// CheckpointNeeds is the space a Checkpoint takes on the file system it is written to.
type CheckpointNeeds struct {
	// Bytes is what the checkpoint writes there. On the store's mount of its file system Pebble hard-links the
	// tables and copies the rest (the write-ahead logs, MANIFEST and OPTIONS); elsewhere it copies every file. Read
	// from Pebble's metrics, it may be a little above the copy: files the store no longer needs and has not removed
	// yet count.
	Bytes uint64
	// StoreFS reports that the copy is on the store's file system, whose free space the log needs too; on another
	// mount of it (a bind mount) the copy holds every file.
	StoreFS bool
}

// CheckpointNeeds says what a Checkpoint to destDir would take on destDir's file system (that of its parent, which
// must exist), so that a caller can refuse one the disk has no room for before anything is written: a copy that fills
// the store's disk leaves the log a write that fails, which stops it. NB: it reads Pebble's metrics (a few locks, no
// I/O) and stats two directories; the store may grow before the checkpoint is taken, by what is appended meanwhile.
//
// A destDir inside the store is refused as Checkpoint refuses it (ErrInsideStore). On a file system that is not the
// operating system's (an in-memory one, in tests) the copy is the store's own file system's.
func (l *Log) CheckpointNeeds(destDir string) (CheckpointNeeds, error) {
	if err := l.readable(); err != nil {
		return CheckpointNeeds{}, err
	}
	m := l.db.Metrics()
	all := diskBytes(m)
	tables := m.Table.Local.LiveSize + m.Table.Local.ObsoleteSize + m.Table.Local.ZombieSize +
		m.BlobFiles.Local.LiveSize + m.BlobFiles.Local.ObsoleteSize + m.BlobFiles.Local.ZombieSize
	linked := CheckpointNeeds{Bytes: all - min(tables, all), StoreFS: true}
	if l.opts.FS != vfs.Default {
		return linked, nil
	}
	if Inside(destDir, l.dir) {
		return CheckpointNeeds{}, fmt.Errorf("%w: checkpoint to %s", ErrInsideStore, destDir)
	}
	store, err := os.Stat(l.dir)
	if err != nil {
		return CheckpointNeeds{}, fmt.Errorf("eventlog: checkpoint to %s: %w", destDir, err)
	}
	parent, err := os.Stat(filepath.Dir(destDir))
	if err != nil {
		return CheckpointNeeds{}, fmt.Errorf("eventlog: checkpoint to %s: %w", destDir, err)
	}
	switch {
	case !sameDevice(store, parent):
		return CheckpointNeeds{Bytes: all}, nil
	case !sameMount(l.dir, filepath.Dir(destDir)):
		// NB: another mount of the store's file system (a bind mount, a container's volume): no hard link crosses
		// mounts (EXDEV), and Pebble copies the tables too, on the store's disk.
		return CheckpointNeeds{Bytes: all, StoreFS: true}, nil
	}
	return linked, nil
}

// sameMount reports whether directories a and b are on one mount, across which a hard link can be made; false when
// that cannot be told (a kernel before Linux 5.8 has no mount id), so that a checkpoint is taken to copy every file.
func sameMount(a, b string) bool {
	ma, okA := mountID(a)
	mb, okB := mountID(b)
	return okA && okB && ma == mb
}

// mountID is the id of the mount path is on, and whether the kernel told it.
func mountID(path string) (uint64, bool) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_MNT_ID, &st); err != nil ||
		st.Mask&unix.STATX_MNT_ID == 0 {
		return 0, false
	}
	return st.Mnt_id, true
}

// sameDevice reports whether a and b are on one file system; false when that cannot be told, so that a checkpoint
// is taken to copy every file.
func sameDevice(a, b os.FileInfo) bool {
	sa, ok := a.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	sb, ok := b.Sys().(*syscall.Stat_t)
	return ok && sa.Dev == sb.Dev
}
