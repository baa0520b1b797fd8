package eventlog

import (
	"errors"
	"os"
	"strings"
	"syscall"
)

// ErrLocked is returned by Open when another process (or another Open in
// this one) holds the store: Pebble locks the directory even for
// read-only opens, so offline tools must work on a backup while the daemon
// runs.
var ErrLocked = errors.New("eventlog: store is locked by another process")

// isLockConflict reports whether err is Pebble failing to take the store's
// lock because someone holds it: fcntl answers EAGAIN or EACCES on the
// lock file (not a path error, which would be a permission problem), and
// Pebble refuses a second lock in the same process with its own message.
func isLockConflict(err error) bool {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return false
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}
