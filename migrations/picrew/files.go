package picrew

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// The files of a crew root are written by the runs' workers, which crewlog
// trusts no more than it must: every file of a run is opened through
// openFile (whole files read through readFile), which opens regular files
// only. pi-crew itself writes regular files (an append, or a write to a
// temporary file renamed into place), so what is anything else was put
// there by someone else.

// notRegularError is a file that is not a regular file: a named pipe (which
// a reader would wait on for a writer), a device, a socket, a directory or
// a symbolic link. It is reported and not read.
type notRegularError struct{ what string }

func (e *notRegularError) Error() string { return e.what + ", not a regular file: not read" }

// regular returns a notRegularError when st is not a regular file.
func regular(st fs.FileInfo) error {
	m := st.Mode()
	switch {
	case m.IsRegular():
		return nil
	case m&fs.ModeSymlink != 0:
		return &notRegularError{"a symbolic link"}
	case m&fs.ModeNamedPipe != 0:
		return &notRegularError{"a named pipe"}
	case m&fs.ModeDevice != 0:
		return &notRegularError{"a device"}
	case m&fs.ModeSocket != 0:
		return &notRegularError{"a socket"}
	case m.IsDir():
		return &notRegularError{"a directory"}
	}
	return &notRegularError{"a special file"}
}

// statFile returns what the file at p is, without following a symbolic
// link, and an error when it is not a regular file.
func statFile(p string) (fs.FileInfo, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return nil, pathless(err)
	}
	return st, regular(st)
}

// openFile opens the regular file at p for reading, and returns what its
// descriptor says it is. NB: the open itself must not wait: O_NONBLOCK
// makes opening a named pipe return at once (without it the open waits for
// a writer, and with it the one goroutine of a Follower), O_NOFOLLOW
// refuses a symbolic link in place of the file (pi-crew writes none, and
// one may name another run's file or anything the reader may read), and
// O_NOCTTY keeps a terminal from becoming the process's. What the
// descriptor turns out to be is checked after the open, so a file replaced
// between a listing and the open is refused all the same. O_NONBLOCK
// changes nothing for a regular file.
func openFile(p string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			if st, lerr := os.Lstat(p); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
				return nil, nil, regular(st)
			}
		}
		return nil, nil, pathless(err)
	}
	st, err := f.Stat()
	if err == nil {
		err = regular(st)
	}
	if err != nil {
		f.Close()
		return nil, nil, pathless(err)
	}
	return f, st, nil
}

// readFile reads the whole regular file at p, and returns what its
// descriptor said it was when opened.
func readFile(p string) ([]byte, fs.FileInfo, error) {
	f, st, err := openFile(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, pathless(err)
	}
	return b, st, nil
}

// pathless is err without the path an *fs.PathError names: a report names
// its file relative to the crew root, never as a path of this machine.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
