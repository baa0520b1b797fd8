package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// probeTimeout bounds the connect probe of an existing socket file (D§7.1: 250 ms).
const probeTimeout = 250 * time.Millisecond

// ErrAlreadyServing is Listen's error when a live listener answers at the socket path: another broker (as a rule
// another crewd) serves there, and its socket is left alone.
var ErrAlreadyServing = errors.New("already serving")

// Listen binds the socket, with pi-crew's and tailscale's (safesocket/unixsocket.go) precautions:
//
//  1. the socket's directory is created if missing: 0700, or 0750 with group SocketGroup when one is set; an
//     existing one must be a real directory (not a symlink) owned by this user without the sticky bit, that no
//     one else may write to or list: 0700 (or, with SocketGroup, group SocketGroup and at most 0750). Anything
//     else is refused, never chmod-ed: the directory may be shared, and its files may already have been reached;
//  2. lstat of the socket path: a symlink is refused, and so is anything that is not a socket;
//  3. an existing socket is probed by connecting (250 ms): a live listener means another broker serves there
//     ("already serving"); a file whose connect is refused (ECONNREFUSED) is dead and unlinked, one gone since
//     the lstat is left gone; any other failure (a live listener with a full backlog answers EAGAIN) is refused.
//     The directory is locked (lockDir) from the lstat to the listen, so that two brokers starting at once on one
//     path take turns: neither unlinks a socket the other has just listened on;
//  4. listen, then chmod the socket 0600 (0660 with group SocketGroup); the directory is the outer defence
//     against the window in between. Every accepted connection is then checked by its peer's credentials
//     (peercred.go).
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return errors.New("broker: Listen after Close")
	case s.ln != nil:
		return errors.New("broker: Listen called twice")
	}
	path := s.opts.SocketPath
	if err := prepareDir(filepath.Dir(path), s.opts.SocketGroup); err != nil {
		return err
	}
	unlock, err := lockDir(filepath.Dir(path), dirLockWait)
	if err != nil {
		return err
	}
	defer unlock()
	if err := clearStale(path, probeSocket); err != nil {
		return err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("broker: listen: %w", err)
	}
	// Close unlinks only if the file is still ours (see unlink), so the listener must not do it blindly.
	ln.SetUnlinkOnClose(false)
	if err := setSocketMode(path, s.opts.SocketGroup); err != nil {
		ln.Close()
		os.Remove(path)
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return fmt.Errorf("broker: stat socket: %w", err)
	}
	s.ln, s.lnInfo = ln, fi
	return nil
}

// prepareDir makes dir a private directory of this user (shared with group gid when gid is not 0), or refuses an
// existing one that is not.
func prepareDir(dir string, gid int) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("broker: create socket directory: %w", err)
		}
		if gid != 0 {
			// Our own new directory: giving it to the group changes nothing anyone else had.
			if err := os.Chown(dir, -1, gid); err != nil {
				return fmt.Errorf("broker: socket directory: chgrp %d: %w", gid, err)
			}
			if err := os.Chmod(dir, 0o750); err != nil {
				return fmt.Errorf("broker: socket directory: %w", err)
			}
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("broker: socket directory: %w", err)
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("broker: socket directory %s is a symlink; refusing", dir)
	case !fi.IsDir():
		return fmt.Errorf("broker: socket directory %s is not a directory", dir)
	case fi.Mode()&os.ModeSticky != 0:
		return fmt.Errorf("broker: socket directory %s is shared (sticky); use a private subdirectory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("broker: socket directory %s: no owner information", dir)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("broker: socket directory %s belongs to another user", dir)
	}
	perm := fi.Mode().Perm()
	switch {
	case gid == 0 && perm&0o077 != 0:
		return fmt.Errorf("broker: socket directory %s has mode %04o: others may reach the socket; "+
			"chmod 700 it or name a private directory (it is not changed for you: it may be shared)", dir, perm)
	case gid != 0 && (perm&0o027 != 0 || int(st.Gid) != gid):
		return fmt.Errorf("broker: socket directory %s has mode %04o and group %d: with a socket group it must "+
			"have group %d and at most mode 0750 (it is not changed for you: it may be shared)", dir, perm, st.Gid, gid)
	}
	return nil
}

// setSocketMode makes the new socket 0600, or 0660 with group gid when gid is not 0.
func setSocketMode(path string, gid int) error {
	mode := os.FileMode(0o600)
	if gid != 0 {
		mode = 0o660
		if err := os.Chown(path, -1, gid); err != nil {
			return fmt.Errorf("broker: socket: chgrp %d: %w", gid, err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("broker: chmod socket: %w", err)
	}
	return nil
}

// dirLockWait bounds how long Listen waits for another broker starting in the same directory (lockDir): that one
// holds the lock for its probe (at most probeTimeout) and its listen.
const dirLockWait = 5 * time.Second

// lockDir takes an exclusive flock on dir, waiting at most wait, and returns its release. Brokers that start
// in one directory take turns through it between the stale check and the listen; the lock goes with the process
// that holds it, so a broker killed there holds nobody up.
func lockDir(dir string, wait time.Duration) (unlock func(), err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("broker: socket directory: open: %w", err)
	}
	for deadline := time.Now().Add(wait); ; {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return func() { unix.Close(fd) }, nil // NB: closing the descriptor releases its flock
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL):
			unix.Close(fd)
			return func() {}, nil // NB: a file system that keeps no flocks: no turns, as before the lock
		case errors.Is(err, unix.EWOULDBLOCK) && time.Now().Before(deadline):
			time.Sleep(10 * time.Millisecond)
			continue
		}
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("broker: socket directory %s: locked by another broker starting for over %v", dir,
				wait)
		}
		return nil, fmt.Errorf("broker: socket directory %s: lock: %w", dir, err)
	}
}

// probeSocket connects to the socket at path, as clearStale probes it.
func probeSocket(path string) (net.Conn, error) { return net.DialTimeout("unix", path, probeTimeout) }

// clearStale refuses a symlink or a non-socket at path, refuses a live socket, and unlinks a dead one; probe
// connects to it (probeSocket).
func clearStale(path string, probe func(string) (net.Conn, error)) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker: stat socket path: %w", err)
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("broker: socket path %s is a symlink; refusing", path)
	case fi.Mode()&os.ModeSocket == 0:
		return fmt.Errorf("broker: socket path %s exists and is not a socket; refusing", path)
	}
	c, err := probe(path)
	if err == nil {
		c.Close()
		return fmt.Errorf("broker: %s: %w", path, ErrAlreadyServing)
	}
	// The file gone since the lstat (a broker that unlinked it as it stopped) is left gone: whatever is at the path
	// now was made since the probe, by another broker that listens there, and unlinking it would take its path. The
	// listen that follows finds it (address in use) or the path free.
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	// Only a refusal proves nobody listens: a live listener whose backlog is full (a flood of connects it has not
	// accepted yet) answers EAGAIN, and any other failure proves nothing either; unlinking then would take a live
	// broker's path.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("broker: %s: already serving, or cannot tell (%w); refusing to replace it", path, err)
	}
	// A leftover of a broker that died.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("broker: remove stale socket: %w", err)
	}
	return nil
}
