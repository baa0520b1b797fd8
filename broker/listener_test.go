package broker

import (
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
)

func newServerAt(t *testing.T, path string) *Server {
	t.Helper()
	f := newFixture(t, fixtureOpts{}) // an engine to serve; its own server uses another path
	s, err := New(f.eng, f.log, Options{SocketPath: path, ServerKey: make([]byte, 32)})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestListenModes(t *testing.T) {
	base := brokertest.SocketDir(t)
	path := filepath.Join(base, "new", "b.sock")
	s := newServerAt(t, path)
	require.NoError(t, s.Listen())
	fi, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "created directory")
	fi, err = os.Lstat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "socket")
	require.NotZero(t, fi.Mode()&os.ModeSocket)

	// An existing directory others may reach is refused and left as it was: it may be shared.
	for _, m := range []os.FileMode{0o755, 0o750, 0o701, 0o770} {
		loose := filepath.Join(base, fmt.Sprintf("loose-%o", m))
		require.NoError(t, os.Mkdir(loose, 0o700))
		require.NoError(t, os.Chmod(loose, m))
		s2 := newServerAt(t, filepath.Join(loose, "b.sock"))
		require.ErrorContains(t, s2.Listen(), fmt.Sprintf("has mode %04o", m))
		fi, _ = os.Stat(loose)
		require.Equal(t, m, fi.Mode().Perm(), "not chmod-ed")
	}

	// Close unlinks the socket.
	require.NoError(t, s.Close())
	_, err = os.Lstat(path)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestListenRefusals(t *testing.T) {
	cases := []struct {
		name  string
		setup func(dir string) string // returns the socket path
		want  string
	}{
		{"symlinked socket path", func(dir string) string {
			p := filepath.Join(dir, "b.sock")
			require.NoError(t, os.Symlink(filepath.Join(dir, "elsewhere"), p))
			return p
		}, "symlink"},
		{"symlinked directory", func(dir string) string {
			real := filepath.Join(dir, "real")
			require.NoError(t, os.Mkdir(real, 0o700))
			require.NoError(t, os.Symlink(real, filepath.Join(dir, "link")))
			return filepath.Join(dir, "link", "b.sock")
		}, "symlink"},
		{"regular file", func(dir string) string {
			p := filepath.Join(dir, "b.sock")
			require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
			return p
		}, "not a socket"},
		{"sticky shared directory", socketInDirOfMode(t, 0o777|os.ModeSticky), "shared"},
		// NB: a sticky directory of mode 0700 passes the mode check: the sticky bit is refused on its own.
		{"sticky private directory", socketInDirOfMode(t, 0o700|os.ModeSticky), "is shared (sticky)"},
		{"directory that is a regular file", func(dir string) string {
			file := filepath.Join(dir, "file")
			require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
			return filepath.Join(file, "b.sock")
		}, filepath.Join("d", "file") + " is not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(brokertest.SocketDir(t), "d")
			require.NoError(t, os.Mkdir(dir, 0o700))
			path := tc.setup(dir)
			s := newServerAt(t, path)
			err := s.Listen()
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "broker: ")
		})
	}
}

// socketInDirOfMode is a setup of TestListenRefusals: a socket path in a new directory of mode.
func socketInDirOfMode(t *testing.T, mode os.FileMode) func(dir string) string {
	return func(dir string) string {
		sub := filepath.Join(dir, "sub")
		require.NoError(t, os.Mkdir(sub, 0o700))
		require.NoError(t, os.Chmod(sub, mode))
		return filepath.Join(sub, "b.sock")
	}
}

// deadSocket is the path of a socket file in a new directory whose listener closed without unlinking it.
func deadSocket(t *testing.T) string {
	dir := filepath.Join(brokertest.SocketDir(t), "d")
	require.NoError(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, "b.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	return path
}

// stillWaiting fails t if done yields within d: what it is for still waits (a wait that ends proves nothing sooner).
func stillWaiting(t *testing.T, done <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned while another broker held the directory: %v", what, err)
	case <-time.After(d):
	}
}

// takePath is another broker starting at path while it holds the directory: the dead file unlinked, the path bound.
func takePath(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, clearStale(path, probeSocket))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
}

// requireAnswers requires a live socket at path.
func requireAnswers(t *testing.T, path, msg string) {
	t.Helper()
	c, err := net.DialTimeout("unix", path, probeTimeout)
	require.NoError(t, err, msg)
	require.NoError(t, c.Close())
}

func TestStaleSocketProbe(t *testing.T) {
	// A dead socket file (its listener closed without unlinking) is replaced.
	path := deadSocket(t)
	_, err := os.Lstat(path)
	require.NoError(t, err, "the stale file is still there")
	s := newServerAt(t, path)
	require.NoError(t, s.Listen())

	// A live one is left alone: already serving (the probe connected; not "cannot tell", which is for a probe
	// that failed).
	s2 := newServerAt(t, path)
	require.EqualError(t, s2.Listen(), "broker: "+path+": already serving")
	_, err = os.Lstat(path)
	require.NoError(t, err)
}

// TestStaleSocketProbeFullBacklog: a live listener whose backlog is full (a flood of connections it has not
// accepted yet) answers the probe EAGAIN, not ECONNREFUSED; it is alive, so a second broker must not unlink its
// socket and take its path.
func TestStaleSocketProbeFullBacklog(t *testing.T) {
	dir := filepath.Join(brokertest.SocketDir(t), "d")
	require.NoError(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, "b.sock")

	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}))
	require.NoError(t, syscall.Listen(fd, 0))
	full := false
	for range 64 {
		c, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
		require.NoError(t, err)
		t.Cleanup(func() { syscall.Close(c) })
		if err := syscall.Connect(c, &syscall.SockaddrUnix{Name: path}); err != nil {
			require.ErrorIs(t, err, syscall.EAGAIN)
			full = true
			break
		}
	}
	require.True(t, full, "the backlog never filled")

	s := newServerAt(t, path)
	require.ErrorContains(t, s.Listen(), "already serving")
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st), "the live listener's socket file is still there")
}

// TestStaleSocketGoneSinceTheLstatIsLeftGone: a socket file that vanished between the lstat and the probe (its
// broker unlinked it as it stopped) may be at the path again by the time the probe returns, made by another broker
// that listens there now; the probe's ENOENT must not unlink that broker's socket.
func TestStaleSocketGoneSinceTheLstatIsLeftGone(t *testing.T) {
	path := deadSocket(t)
	var other *net.UnixListener
	t.Cleanup(func() {
		if other != nil {
			other.Close()
		}
	})
	// The race, in the probe: the dead file goes (as the probe's connect finds it gone), then another broker
	// listens at the path before clearStale goes on.
	probe := func(p string) (net.Conn, error) {
		require.NoError(t, os.Remove(p))
		_, err := net.DialTimeout("unix", p, probeTimeout)
		require.ErrorIs(t, err, syscall.ENOENT)
		other, err = net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		require.NoError(t, err)
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ENOENT)}
	}
	require.NoError(t, clearStale(path, probe))
	requireAnswers(t, path, "the other broker's socket is still at the path")
	// And the broker that probed finds the path taken when it listens.
	require.ErrorIs(t, newServerAt(t, path).Listen(), ErrAlreadyServing)
}

// TestBrokersStartingAtOnceTakeTurns: a broker whose Listen runs while another is between its stale check and its
// listen (here the test, holding the directory's lock as Listen does) waits for it, then finds its socket live;
// without the lock it would unlink the dead file, listen, and have its socket unlinked by the first in turn.
func TestBrokersStartingAtOnceTakeTurns(t *testing.T) {
	path := deadSocket(t)
	dir := filepath.Dir(path)
	unlock, err := lockDir(dir, time.Second)
	require.NoError(t, err)
	srv, second := newServerAt(t, path), make(chan error, 1)
	go func() { second <- srv.Listen() }()
	stillWaiting(t, second, 200*time.Millisecond, "the second broker's Listen")
	// The first goes on: the dead file is unlinked, and it listens.
	takePath(t, path)
	unlock()
	require.ErrorIs(t, <-second, ErrAlreadyServing)
	requireAnswers(t, path, "the first broker's socket is still at the path")

	// A lock held past the wait is an error that says so, not a hang.
	held, err := lockDir(dir, time.Second)
	require.NoError(t, err)
	defer held()
	_, err = lockDir(dir, 50*time.Millisecond)
	require.ErrorContains(t, err, "locked by another broker starting for over 50ms")
}

// TestACloseTakesItsTurnWithABrokerStarting: a broker that closes while another starts in its directory (here the
// test, holding the directory's lock as Listen does, finding the closed socket dead and listening on the path)
// waits for it before it checks whose file the path holds, and leaves the new broker's socket alone — though the
// file system often gives the new socket the inode number the old one freed (without the probe of unlink, this
// failed in 4 runs of 10).
func TestACloseTakesItsTurnWithABrokerStarting(t *testing.T) {
	dir := filepath.Join(brokertest.SocketDir(t), "d")
	require.NoError(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, "b.sock")
	old := newServerAt(t, path)
	require.NoError(t, old.Listen())
	unlock, err := lockDir(dir, time.Second)
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- old.Close() }()
	// The new broker finds the old socket dead once the old listener has closed, unlinks it and listens.
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("unix", path, probeTimeout)
		if err == nil {
			c.Close()
		}
		return err != nil // refused; or gone, when a Close that does not wait has unlinked it already
	}, 5*time.Second, 5*time.Millisecond)
	stillWaiting(t, closed, 100*time.Millisecond, "Close")
	takePath(t, path)
	unlock()
	require.NoError(t, <-closed)
	requireAnswers(t, path, "the new broker's socket is still at the path")
}

func TestOptionsValidate(t *testing.T) {
	o := Options{MaxFrame: 10, OutboundQueueCap: 5, HelloTimeout: -1, MaxConns: -1, AdminDigest: "XYZ",
		ServerKey: []byte("short")}
	err := o.Validate()
	require.Error(t, err)
	for _, want := range []string{"SocketPath", "AdminDigest", "ServerKey", "MaxFrame", "OutboundQueueCap",
		"HelloTimeout", "MaxConns"} {
		require.ErrorContains(t, err, want)
	}
	ok := Options{SocketPath: "/x/b.sock", ServerKey: make([]byte, 32), AdminDigest: digestOf("a")}
	require.NoError(t, ok.Validate())
	for _, perCred := range []int64{1024, 1 << 40} { // below OutboundBytes, above GlobalOutboundBytes
		o := ok
		o.OutboundBytesPerCredential = perCred
		require.ErrorContains(t, o.Validate(), "OutboundBytesPerCredential")
	}
	d := ok.withDefaults()
	require.Equal(t, int64(DefaultGlobalOutboundBytes/credentialShares), d.OutboundBytesPerCredential)
	small := Options{OutboundBytes: 1 << 20, GlobalOutboundBytes: 2 << 20}.withDefaults()
	require.Equal(t, int64(1<<20), small.OutboundBytesPerCredential, "at least one connection's budget")

	for _, perRun := range []int64{1 << 20, 1 << 40} { // below OutboundBytesPerCredential, above GlobalOutboundBytes
		o := ok
		o.OutboundBytesPerRun = perRun
		require.ErrorContains(t, o.Validate(), "OutboundBytesPerRun")
	}
	o = ok
	o.BurstPerRun = -1
	require.ErrorContains(t, o.Validate(), "BurstPerRun")
	for _, tc := range []struct {
		name        string
		o           Options
		bytes       int64
		rate, burst int
	}{
		{"the defaults", ok, DefaultGlobalOutboundBytes / runShares, 4 * DefaultRatePerCredential,
			4 * DefaultRatePerCredential},
		{"at least a credential's bytes", Options{GlobalOutboundBytes: 2 * DefaultOutboundBytes},
			DefaultOutboundBytes, 4 * DefaultRatePerCredential, 4 * DefaultRatePerCredential},
		{"a burst of at least a second", Options{RatePerCredential: 100, BurstPerCredential: 10},
			DefaultGlobalOutboundBytes / runShares, 400, 400},
		{"no pacing per credential, none per run", Options{RatePerCredential: -1},
			DefaultGlobalOutboundBytes / runShares, -1, 4},
		{"saturated", Options{RatePerCredential: math.MaxInt}, DefaultGlobalOutboundBytes / runShares,
			math.MaxInt, math.MaxInt},
	} {
		d := tc.o.withDefaults()
		require.Equal(t, tc.bytes, d.OutboundBytesPerRun, tc.name)
		require.Equal(t, tc.rate, d.RatePerRun, tc.name)
		require.Equal(t, tc.burst, d.BurstPerRun, tc.name)
	}
}

// TestListenSocketGroup: with a socket group, a new directory is 0750 and the socket 0660, both of that group; an
// existing directory of another group is refused. The checks read modes and owners, so they hold as root too.
func TestListenSocketGroup(t *testing.T) {
	gid := os.Getegid()
	if gid == 0 {
		gid = 65534 // root may give its files to any group; others use their own
	}
	base := brokertest.SocketDir(t)
	path := filepath.Join(base, "new", "b.sock")
	f := newFixture(t, fixtureOpts{})
	s, err := New(f.eng, f.log, Options{SocketPath: path, ServerKey: make([]byte, 32), SocketGroup: gid})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.Listen())
	for p, want := range map[string]os.FileMode{filepath.Dir(path): 0o750, path: 0o660} {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		require.Equal(t, want, fi.Mode().Perm(), p)
		require.EqualValues(t, gid, fi.Sys().(*syscall.Stat_t).Gid, p)
	}

	other := filepath.Join(base, "other")
	require.NoError(t, os.Mkdir(other, 0o750))
	s2, err := New(f.eng, f.log, Options{SocketPath: filepath.Join(other, "b.sock"), ServerKey: make([]byte, 32), SocketGroup: gid + 1})
	require.NoError(t, err)
	t.Cleanup(func() { s2.Close() })
	require.ErrorContains(t, s2.Listen(), "must have group")
}

func TestAllowedPeer(t *testing.T) {
	const uid, group = 1000, 2000
	for _, tc := range []struct {
		name  string
		p     peer
		group int
		want  bool
	}{
		{"same uid", peer{UID: uid, GID: 1}, 0, true},
		{"other uid, no group", peer{UID: 1001, GID: group}, 0, false},
		{"root is another uid", peer{UID: 0, GID: 0}, 0, false},
		{"other uid, primary group", peer{UID: 1001, GID: group}, group, true},
		{"other uid, supplementary group", peer{UID: 1001, GID: 1, Groups: []int{5, group}}, group, true},
		{"other uid, other groups", peer{UID: 1001, GID: 1, Groups: []int{5}}, group, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, allowedPeer(tc.p, uid, tc.group))
		})
	}
}

// TestPeerCredentials: the kernel's record of a real peer is read, and this process's own uid is let in.
func TestPeerCredentials(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	path := filepath.Join(brokertest.SocketDir(t), "p.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	defer ln.Close()
	c, err := net.Dial("unix", path)
	require.NoError(t, err)
	defer c.Close()
	nc, err := ln.AcceptUnix()
	require.NoError(t, err)
	defer nc.Close()
	p, err := peerOf(nc)
	require.NoError(t, err)
	require.Equal(t, peer{PID: os.Getpid(), UID: os.Geteuid(), GID: os.Getegid()}, p)
	got, err := f.srv.checkPeer(nc)
	require.NoError(t, err)
	require.Equal(t, p, got)
}
