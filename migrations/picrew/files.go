package picrew

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// The files of a crew root are written by the runs' workers, which crewlog
// trusts no more than it must: every file of a run is opened through
// openFile and every whole file read through readFile, which read regular
// files only and whole files up to maxWholeFile bytes, each through its
// crew root's crewRoot, which follows no link in place of a run's
// directory. pi-crew itself writes regular files (an append, or a write to
// a temporary file renamed into place), so what is anything else was put
// there by someone else.

// maxWholeFile bounds what readFile reads of manifest.json, tasks.json and
// delivery.json. pi-crew rewrites each of them whole at every change, so a
// real run keeps them small: delivery.json holds at most 10,000 message
// states (well under 1 MiB), a manifest a few kilobytes, tasks.json a few
// kilobytes a task (tens of tasks in a run, hundreds with its shadows). It
// is the longest line the JSONL files may have too (maxLine).
const maxWholeFile = 16 << 20

// notRegularError is a file that is not a regular file: a named pipe (which
// a reader would wait on for a writer), a device, a socket, a directory or
// a symbolic link. It is reported and not read.
type notRegularError struct{ what string }

func (e *notRegularError) Error() string { return e.what + ", not a regular file: not read" }

// tooLargeError is a whole file larger than its limit (maxWholeFile): of size bytes at least. NB: its message
// names the limit, not the size, so a file that keeps growing past it is reported once, not at every pass (the
// follower reports a reason once per file).
type tooLargeError struct{ size, limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("larger than the limit of %d bytes of a file pi-crew rewrites whole: not read", e.limit)
}

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
func (c *crewRoot) statFile(p string) (fs.FileInfo, error) {
	st, err := c.lstat(p)
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
// between a listing (or a stat: the follower's stampOf and fileID) and the
// open is refused all the same. No Lstat is made before the open: the
// follower has just made one, and what it would keep from being opened is a
// device node itself at the path (a link to one is refused by O_NOFOLLOW),
// which only a process allowed to make device nodes can put there.
// O_NONBLOCK changes nothing for a regular file. Each directory to the file is opened as crewRoot opens it: a link
// in place of one is refused as well.
func (c *crewRoot) openFile(p string) (*os.File, fs.FileInfo, error) {
	f, err := openOS(c, p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			if st, lerr := c.lstat(p); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
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

// readFile reads the whole regular file at p, at most maxWholeFile bytes,
// and returns what its descriptor said it was when opened.
func (c *crewRoot) readFile(p string) ([]byte, fs.FileInfo, error) {
	return c.readFileLimit(p, maxWholeFile)
}

// readFileLimit is readFile with a limit of limit bytes. A file larger
// than the limit is refused without a byte read; one that grows past it
// while being read is refused after limit+1 bytes.
func (c *crewRoot) readFileLimit(p string, limit int64) ([]byte, fs.FileInfo, error) {
	f, st, err := c.openFile(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, nil, &tooLargeError{size: st.Size(), limit: limit}
	}
	// One allocation for a file that reads as long as its size says (+1
	// for the read that finds its end).
	r := io.LimitReader(f, limit+1)
	b := make([]byte, 0, st.Size()+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // it reads longer than it said
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, pathless(err)
		}
	}
	if n := int64(len(b)); n > limit {
		return nil, nil, &tooLargeError{size: n, limit: limit}
	}
	return b, st, nil
}

// openOS and readDir are crewRoot's openPath and list (the opening of a file, and the listing of a directory, of a
// crew root), variables so tests can make a read fail as a full descriptor table or a failing disk does (EMFILE,
// EIO): a file's mode cannot, for a reader running as root.
var (
	openOS  = (*crewRoot).openPath
	readDir = (*crewRoot).list
)

// readFailed reports whether err is a read of something that is there failing (EIO, EMFILE, EACCES, …): neither the
// file's absence nor a refusal of what it is (notRegularError, tooLargeError, a symbolic link or a file in place of a
// directory), which reading it again would meet again. NB: such a file is not absent, and what was read of its run
// without it is not the run: a pass that meets one records nothing for the run from it (see the package doc).
func readFailed(err error) bool {
	var nr *notRegularError
	var tl *tooLargeError
	return err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.As(err, &nr) && !errors.As(err, &tl) &&
		!errors.Is(err, errNotDir) && !errors.Is(err, errLinkDir)
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

// realDir returns an error when p is not a directory: a symbolic link in
// place of one is refused like one in place of a file (openFile), since it
// may name another run's directory.
func (c *crewRoot) realDir(p string) error {
	st, err := c.lstat(p)
	switch {
	case err != nil:
		return pathless(err)
	case st.IsDir():
		return nil
	case st.Mode()&fs.ModeSymlink != 0:
		return errLinkDir
	}
	return errNotDir
}

var (
	errLinkDir = errors.New("a symbolic link in place of a directory")
	errNotDir  = errors.New("not a directory")
)
