package eventlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Checkpoint writes a consistent copy of the store to destDir (which must
// not exist) while the log stays online. The copy is a complete store that
// Open accepts; it holds at least every append acknowledged before the call.
// On the same file system most files are hard links, so it is cheap. A log
// that failed stop is refused (ErrFailed), and a failed sync of the WAL
// before the copy fails it stop. A read-only log is refused (ErrReadOnly).
//
// destDir must not lie inside the store (ErrInsideStore), even through a
// symbolic link: Pebble's directory holds nothing but its files, and a copy
// there goes when the store is removed.
//
// On the operating system's file system the copy is private whatever the
// umask: it is built in a 0700 staging directory next to destDir (a
// StagingDir named CheckpointStaging and digits), its directories are made
// 0700 and its files 0600 (hard-linked files are the store's own, which are
// private too), and only then is it renamed to destDir. A checkpoint killed
// before that leaves its staging directory, which the next checkpoint beside
// it removes. Whatever is made at destDir meanwhile (an empty directory, a
// file) is refused (fs.ErrExist) and left as it is: the move is
// RenameNoReplace's, where a rename replaces an empty directory or a file.
func (l *Log) Checkpoint(destDir string) error {
	if err := l.readable(); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return ErrReadOnly // NB: Pebble cannot checkpoint a read-only open; refused before any directory is made
	}
	if l.opts.FS != vfs.Default {
		// In-memory and fault-injecting test file systems have no modes.
		return l.checkpoint(destDir)
	}
	if _, err := os.Lstat(destDir); err == nil {
		return fmt.Errorf("eventlog: checkpoint to %s: %w", destDir, fs.ErrExist)
	}
	if Inside(destDir, l.dir) {
		return fmt.Errorf("%w: checkpoint to %s", ErrInsideStore, destDir)
	}
	stage, err := NewStagingDir(filepath.Dir(destDir), CheckpointStaging, checkpointStore)
	if err != nil {
		return fmt.Errorf("eventlog: checkpoint to %s: %w", destDir, err)
	}
	defer stage.Remove()
	tmp := filepath.Join(stage.Dir, checkpointStore)
	if err := l.checkpoint(tmp); err != nil {
		return err
	}
	checkpointStaged(stage.Dir)
	if err := restrictTree(tmp); err != nil {
		return fmt.Errorf("eventlog: checkpoint to %s: %w", destDir, err)
	}
	if err := RenameNoReplace(tmp, destDir); err != nil {
		return fmt.Errorf("eventlog: checkpoint to %s: %w", destDir, err)
	}
	return syncDir(filepath.Dir(destDir))
}

// Inside reports whether path, which need not exist, lies in the directory dir (or is dir), the symbolic links of
// both resolved as far as they exist.
func Inside(path, dir string) bool {
	rel, err := filepath.Rel(resolved(dir), resolved(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolved is the absolute path p (p cleaned when it cannot be made absolute) with the symbolic links of its longest
// existing prefix resolved.
func resolved(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	p = abs
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// RemoveStaleCheckpoints removes the staging directories a checkpoint killed part-way left in parent
// (RemoveStaleStagingDirs with the checkpoint's prefix and the one entry it holds), and reports how many.
func RemoveStaleCheckpoints(parent string) (removed int, err error) {
	return RemoveStaleStagingDirs(parent, CheckpointStaging, checkpointStore)
}

// checkpointStore is the copy's name in its staging directory, the only entry one holds.
const checkpointStore = "store"

// checkpointStaged is called with the staging directory once the copy in it is whole, before it is moved into place;
// a test kills the process there, as a crash or kill -9 would.
var checkpointStaged = func(string) {}

// checkpoint copies the store to destDir once every write handed to Pebble is synced. NB: the sync is syncWAL's,
// not Pebble's WithFlushedWAL (a synced LogData, which panics on a failed sync), and a log that failed stop is
// refused: its WAL keeps the error.
func (l *Log) checkpoint(destDir string) error {
	if err := l.refusal(); err != nil {
		return err
	}
	if err := l.syncWAL(); err != nil {
		return fmt.Errorf("eventlog: checkpoint to %s: %w", destDir, err)
	}
	if err := l.db.Checkpoint(destDir); err != nil {
		return fmt.Errorf("eventlog: checkpoint to %s: %w", destDir, err)
	}
	return nil
}

// restrictTree makes every directory under root 0700 and every file 0600.
func restrictTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o600)
		if d.IsDir() {
			mode = 0o700
		}
		return os.Chmod(p, mode)
	})
}

// syncDir makes a new directory entry in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("eventlog: sync %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("eventlog: sync %s: %w", dir, err)
	}
	return nil
}
