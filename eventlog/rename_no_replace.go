package eventlog

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// RenameNoReplace renames from to to unless something is at to (an error wrapping fs.ErrExist), in one step
// (renameat2 with RENAME_NOREPLACE): a check before a rename leaves a window in which an empty directory made at to
// is replaced, and a file made there is replaced whatever it holds. Whatever is at to is left as it is.
//
// NB: a kernel before Linux 3.15, or a file system that cannot rename so (some network and FUSE ones), answers
// EINVAL or ENOSYS: there to is checked, then renamed onto, and the window stays open.
//
// Errors: an *os.LinkError, the file system's (errors.Is(err, fs.ErrNotExist) and the like hold).
func RenameNoReplace(from, to string) error {
	err := renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		if err != nil {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
		}
		return nil
	}
	if _, err := os.Lstat(to); err == nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: unix.EEXIST}
	}
	return os.Rename(from, to)
}

// renameat2 is unix.Renameat2; tests replace it to answer as a kernel or file system without RENAME_NOREPLACE does.
var renameat2 = unix.Renameat2
