package eventlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// CheckpointStaging prefixes the name of the staging directory Checkpoint builds its copy in, beside the
// destination.
const CheckpointStaging = ".crewlog-checkpoint-"

// StagingDir is a directory a copy is built in and moved out of into place only once whole, so that what is in place
// is whole or not there. A process killed while it builds one (kill -9, a crash, a power cut) leaves it behind, and
// the next staging directory made with the same prefix in the same directory removes it (RemoveStaleStagingDirs). Its
// maker holds an exclusive lock (flock) on it until Remove: the lock dies with the process, which tells a stale
// staging directory from one in use.
//
// Concurrency: used by one goroutine; many processes may make staging directories of one prefix in one directory at
// once. Errors: the file system's, wrapped (errors.Is(err, fs.ErrNotExist) and the like hold).
type StagingDir struct {
	// Dir is the staging directory: parent/prefix followed by digits, 0700.
	Dir  string
	lock *os.File
}

// NewStagingDir removes the stale staging directories of prefix in parent (RemoveStaleStagingDirs), then makes a new
// one there, locked. holds names the entries the caller builds in it: the only ones a stale one may hold to be
// removed.
func NewStagingDir(parent, prefix string, holds ...string) (*StagingDir, error) {
	return newStagingDir(parent, prefix, holds, false)
}

// ErrStagingInUse is NewSoleStagingDir's refusal: another staging directory of the prefix is in use in the parent.
var ErrStagingInUse = errors.New("eventlog: a staging directory of the prefix is in use")

// NewSoleStagingDir is NewStagingDir for a copy that must be the only one of its prefix in parent (crewctl restore:
// one store and server.key moved into a data directory): once the stale ones are removed, a staging directory of
// prefix still there is in use (or only looks like one), and it refuses with an error wrapping ErrStagingInUse that
// names it. NB: the check and the make are one step under parent's lock, so of the processes that race for parent
// exactly one gets its directory, and holds the claim until Remove or its death.
func NewSoleStagingDir(parent, prefix string, holds ...string) (*StagingDir, error) {
	return newStagingDir(parent, prefix, holds, true)
}

func newStagingDir(parent, prefix string, holds []string, sole bool) (*StagingDir, error) {
	parentLock, err := lockDir(parent, syscall.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer parentLock.Close()
	if _, err := removeStale(parent, prefix, holds); err != nil {
		return nil, err
	}
	if sole {
		entries, err := os.ReadDir(parent)
		if err != nil {
			return nil, fmt.Errorf("eventlog: staging directories: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() && IsStagingDirName(e.Name(), prefix) {
				return nil, fmt.Errorf("%w: %s", ErrStagingInUse, filepath.Join(parent, e.Name()))
			}
		}
	}
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, fmt.Errorf("eventlog: staging directory: %w", err)
	}
	lock, err := lockDir(dir, syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &StagingDir{Dir: dir, lock: lock}, nil
}

// Remove removes the staging directory and whatever is left in it, then lets go of its lock.
func (s *StagingDir) Remove() error {
	err := os.RemoveAll(s.Dir)
	s.lock.Close()
	return err
}

// RemoveStaleStagingDirs removes every stale staging directory of prefix in parent (none when parent does not exist),
// and reports how many it removed: a directory of this user named prefix followed by digits, holding nothing but
// entries named in holds, whose lock no process holds, as its maker, killed, left it. NB: anything else is left as
// it is, so that a directory that only looks like one, or one in use, is never removed.
func RemoveStaleStagingDirs(parent, prefix string, holds ...string) (removed int, err error) {
	parentLock, err := lockDir(parent, syscall.LOCK_EX)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer parentLock.Close()
	return removeStale(parent, prefix, holds)
}

// removeStale is RemoveStaleStagingDirs with parent locked, so that no staging directory is made there meanwhile: one
// made but not yet locked by its maker would look stale.
func removeStale(parent, prefix string, holds []string) (removed int, err error) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return 0, fmt.Errorf("eventlog: staging directories: %w", err)
	}
	for _, e := range entries {
		if !IsStagingDirName(e.Name(), prefix) || !e.IsDir() {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		gone, err := removeIfStale(dir, holds)
		if err != nil {
			return removed, fmt.Errorf("eventlog: remove the stale staging directory %s: %w", dir, err)
		}
		if gone {
			removed++
		}
	}
	return removed, nil
}

// IsStagingDirName reports whether name is that of a staging directory of prefix: prefix followed by digits.
func IsStagingDirName(name, prefix string) bool {
	digits, ok := strings.CutPrefix(name, prefix)
	return ok && digits != "" && strings.Trim(digits, "0123456789") == ""
}

// removeIfStale removes the staging directory dir when it is stale, holding its lock while it does.
func removeIfStale(dir string, holds []string) (removed bool, err error) {
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() {
		return false, nil
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return false, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, nil
	}
	for _, e := range entries {
		if !slices.Contains(holds, e.Name()) {
			return false, nil
		}
	}
	lock, err := lockDir(dir, syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		return false, nil // in use, or not ours to lock
	}
	defer lock.Close()
	return true, os.RemoveAll(dir)
}

// LockDir takes the lock of the directory dir that staging directories are made under (NewStagingDir,
// NewSoleStagingDir) and returns what holds it: closing it lets go of it. A process that must not start beside a copy
// into dir (crewd on a data directory without a store) holds it from its check for staging directories until it has
// made its own first entries, so that a copy claims dir either before the check, which then sees it, or after those
// entries, which it then finds: dir is not empty.
func LockDir(dir string) (io.Closer, error) {
	return lockDir(dir, syscall.LOCK_EX)
}

// lockDir takes the flock how on the directory dir and returns the open directory that holds it: closing it lets go
// of the lock.
func lockDir(dir string, how int) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("eventlog: lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("eventlog: lock %s: %w", dir, err)
	}
	return f, nil
}
