package picrew

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// crewRoot is a crew root as its reader opens it. A run's workers write its directories, not only its files, so a
// path of a run's file is never opened whole: O_NOFOLLOW refuses a symbolic link as its last component only, and
// a directory of the run (the run's own, its mailbox, a task's mailbox, its steering directory) replaced by a link
// between a listing and an open made the reader read another run's file, or one outside the crew root, as the run's.
// Below state/runs and artifacts every directory is opened one component at a time, each relative to the one
// opened before it (openat) with O_NOFOLLOW, so a symbolic link in place of any of them, there before the listing
// or put there after it, is refused and never followed. state/runs and artifacts themselves, which pi-crew makes
// once and the runs' workers do not own, are opened through an os.Root of the crew root: a link there (a layout an
// operator chose) is followed only as long as it stays within the root.
//
// NB: a look at one file walked the whole path (state, runs, the run, …: 6 to 10 syscalls where a stat was one),
// and a follower's pass looks at every file of every run, some twice. So state/runs and artifacts, and the directory
// of the run last looked at under state/runs, once opened, are held (held) until release, which the follower calls at
// the end of each pass: a run's files are opened relative to its directory as it was when the pass first opened it.
// A link put in place of it later in the pass is not followed either (the path is not looked up again); the next
// pass opens the directory again and meets the link. The directories below a run's are opened again at each look.
type crewRoot struct {
	dir  string
	root *os.Root // opened at the first open, closed by close
	held heldDirs
}

// heldDirs are the directories a crewRoot holds open until its release: the layout's (state/runs, artifacts) by
// path, and one run's directory under state/runs (a follower's pass and an import look at one run at a time, so
// one is held at a time and the descriptors held stay three).
type heldDirs struct {
	layout  map[string]*os.File
	run     *os.File
	runName string
}

// release closes the directories held: the next look opens them again, and meets what is there then.
func (c *crewRoot) release() {
	for _, d := range c.held.layout {
		d.Close()
	}
	if c.held.run != nil {
		c.held.run.Close()
	}
	c.held = heldDirs{}
}

// layoutDir is the directory layout (state/runs, artifacts, or what leads to them), opened through the os.Root of
// the crew root, held until release.
func (c *crewRoot) layoutDir(layout string) (*os.File, error) {
	if d := c.held.layout[layout]; d != nil {
		return d, nil
	}
	d, err := openInRoot(c.root, layout, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	if c.held.layout == nil {
		c.held.layout = map[string]*os.File{}
	}
	c.held.layout[layout] = d
	return d, nil
}

// runDir is the directory name of state/runs (dir, held), opened without following a link, held until release or
// until another run's is opened.
func (c *crewRoot) runDir(dir *os.File, name string) (*os.File, error) {
	if c.held.run != nil && c.held.runName == name {
		return c.held.run, nil
	}
	fd, err := openDirAt(int(dir.Fd()), name)
	if err != nil {
		return nil, err
	}
	if c.held.run != nil {
		c.held.run.Close()
	}
	c.held.run, c.held.runName = os.NewFile(uintptr(fd), name), name
	return c.held.run, nil
}

// openAt and openInRoot are unix.Openat and os.Root's OpenFile, the opens of a crewRoot, variables so tests can
// count them.
var (
	openAt     = unix.Openat
	openInRoot = (*os.Root).OpenFile
)

// errOutsideRoot is a path that is not under the crew root: the reader builds none (every name it joins is one it
// listed, or one of pi-crew's fixed names), so one would be a defect, refused rather than opened.
var errOutsideRoot = errors.New("not under the crew root: not read")

// close releases the crew root's descriptors; a later open opens them again.
func (c *crewRoot) close() {
	c.release()
	if c.root != nil {
		c.root.Close()
		c.root = nil
	}
}

// split is p, a path under the crew root, as the layout's part (state/runs, artifacts or what leads to them: opened
// through the os.Root) and the components below it (each opened without following a link).
func (c *crewRoot) split(p string) (layout string, below []string, err error) {
	rel, err := filepath.Rel(c.dir, p)
	if err != nil || !filepath.IsLocal(rel) {
		return "", nil, errOutsideRoot
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	n := len(parts)
	switch {
	case n >= 2 && parts[0] == "state" && parts[1] == "runs":
		n = 2
	case parts[0] == "artifacts":
		n = 1
	}
	return path.Join(parts[:n]...), parts[n:], nil
}

// openPath opens p, a path under the crew root, with flag and O_NOFOLLOW: a link as its last component is ELOOP, and
// with O_DIRECTORY errLinkDir (errNotDir for anything else that is not a directory). Each directory to it below the
// layout's is opened without following a link (errLinkDir in place of one, errNotDir).
func (c *crewRoot) openPath(p string, flag int) (*os.File, error) {
	parent, name, done, err := c.parentOf(p)
	switch {
	case err != nil:
		return nil, err
	case parent == nil:
		return openInRoot(c.root, name, flag|unix.O_CLOEXEC, 0)
	}
	defer done()
	var fd int
	if flag&unix.O_DIRECTORY != 0 {
		fd, err = openDirAt(int(parent.Fd()), name)
	} else {
		fd, err = openAt(int(parent.Fd()), name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// lstat is what p, a path under the crew root, is, without following a link as its last component; each directory
// to it is opened as openPath opens it.
func (c *crewRoot) lstat(p string) (fs.FileInfo, error) {
	parent, name, done, err := c.parentOf(p)
	switch {
	case err != nil:
		return nil, err
	case parent == nil:
		return c.root.Lstat(name)
	}
	defer done()
	// NB: O_PATH opens a link itself (with O_NOFOLLOW), a named pipe without waiting, and reads nothing.
	fd, err := openAt(int(parent.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	return f.Stat()
}

// parentOf opens the directory p, a path under the crew root, is in, and returns it with p's last name, and done,
// which closes it unless it is held; each of its directories below the layout's is opened without following a link.
// NB: p of the layout itself (state/runs, say) has no parent opened that way: parent is nil and name is p relative
// to the crew root, to open through the os.Root.
func (c *crewRoot) parentOf(p string) (parent *os.File, name string, done func(), err error) {
	layout, below, err := c.split(p)
	if err != nil {
		return nil, "", nil, err
	}
	if c.root == nil {
		if c.root, err = os.OpenRoot(c.dir); err != nil {
			return nil, "", nil, err
		}
	}
	if len(below) == 0 {
		return nil, layout, func() {}, nil
	}
	dir, err := c.layoutDir(layout)
	held := true // dir is held: not closed here
	for i, sub := range below[:len(below)-1] {
		if err != nil {
			break
		}
		if i == 0 && layout == "state/runs" {
			dir, err = c.runDir(dir, sub)
			continue
		}
		fd, subErr := openDirAt(int(dir.Fd()), sub)
		if !held {
			dir.Close()
		}
		if err = subErr; err == nil {
			dir, held = os.NewFile(uintptr(fd), sub), false
		}
	}
	if err != nil {
		return nil, "", nil, err
	}
	done = func() {}
	if !held {
		done = func() { dir.Close() }
	}
	return dir, below[len(below)-1], done, nil
}

// openDirAt opens the directory name of the directory dir without following a link.
func openDirAt(dir int, name string) (int, error) {
	fd, err := openAt(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, errLinkDir
		}
		return -1, errNotDir
	}
	return fd, err
}

// list is the directory p, a path under the crew root, sorted by name as os.ReadDir sorts it; p is opened as
// openPath opens a directory. NB: whole, whatever maxRunFiles keeps of it: the files a run's readers keep are the
// first by name (firstRunFiles), and a directory yields its entries in no order, so no batch read before the last
// (os.File.ReadDir(n)) tells which are first. A listing costs time and memory (an os.DirEntry with its name each) in
// proportion to the directory's entries, at every pass of a live run for its run, mailbox, task mailbox and steering
// directories, however many of their files are read (docs/picrew.md, Limits).
func (c *crewRoot) list(p string) ([]os.DirEntry, error) {
	d, err := c.openPath(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}
