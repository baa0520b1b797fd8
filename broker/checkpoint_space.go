package broker

import (
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// checkpointRoom refuses (commands.ErrNoSpace, answered disk-full) a checkpoint to dir that the disk has no room for,
// before anything is written. A checkpoint on the store's file system hard-links the tables and copies the rest (the
// write-ahead logs and MANIFEST, up to the memtable's size and more): that copy must leave the store's disk above the
// engine's minimum (Engine.CheckSpaceFor, crewd's --min-free-mib), or the log's next write fails and stops the
// engine, crewd with it; on another mount of that file system (a bind mount) no hard link is made, and the whole copy
// must. On another file system it copies the whole store, which must fit in what is free there; one that did not fit
// failed after it had filled that disk. NB: the engine keeps committing meanwhile, so the copy may come out a little
// larger than measured; the minimum is the margin for that on the store's disk.
//
// A dir inside the store is refused as the checkpoint refuses it (eventlog.ErrInsideStore), whatever the disk holds.
func (s *Server) checkpointRoom(dir string) error {
	needs, err := s.log.CheckpointNeeds(dir)
	if err != nil {
		return err
	}
	free, err := freeSpace(filepath.Dir(dir))
	if err != nil {
		return fmt.Errorf("free space of %s: %w", filepath.Dir(dir), err)
	}
	if free < needs.Bytes {
		const mib = 1 << 20
		return fmt.Errorf("%w: %s: %d MiB free on the file system of %s, too little for the checkpoint's %d MiB",
			commands.ErrNoSpace, methodAdminCheckpoint, free/mib, filepath.Dir(dir), (needs.Bytes+mib-1)/mib)
	}
	if needs.StoreFS {
		if err := s.eng.CheckSpaceFor(needs.Bytes); err != nil {
			return fmt.Errorf("%w (%s on the store's file system)", err, methodAdminCheckpoint)
		}
	}
	return nil
}

// freeSpace is the space of dir's file system available to an unprivileged user (statfs f_bavail), or what a test
// put in its place (replaceFreeSpace) to read as a full disk does.
func freeSpace(dir string) (uint64, error) {
	if f := freeSpaceStub.Load(); f != nil {
		return (*f)(dir)
	}
	return eventlog.FreeSpace(dir)
}

// freeSpaceStub is freeSpace's answer in tests. NB: atomic: a test puts it back as it ends, while the goroutine of
// its last connection, which read it, has not ended in the memory model's sense (its answer came through a socket).
var freeSpaceStub atomic.Pointer[func(dir string) (uint64, error)]
