package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
)

func testConfig(t *testing.T) Config {
	t.Helper()
	c, err := Load(nil, envOf(map[string]string{"HOME": "/nonexistent"}))
	require.NoError(t, err)
	c.DataDir, c.SocketPath = filepath.Join(t.TempDir(), "data"), filepath.Join(brokertest.SocketDir(t), "run", "crewd.sock")
	c.MinFreeBytes = 0
	return c
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// runUntilServed runs the daemon of c until it serves, then stops it, or until it refuses to start, and reports which
// and what Run returned.
func runUntilServed(c Config) (served bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	r, w := io.Pipe()
	go func() { ended <- Run(ctx, c, w, discard()); w.Close() }()
	// Its first line comes once it serves; none, once it refused to start.
	_, readErr := r.Read(make([]byte, 1))
	cancel()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	return readErr == nil, <-ended
}

// TestRunRefusesUnsafeDataDir: a data directory (or store) that group or others may reach, or that another user
// owns, stops the start and is left as it was. Modes are checked, not access, so this holds as root.
func TestRunRefusesUnsafeDataDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		sub  string // the directory made loose: "" the data directory, else a subdirectory
		mode os.FileMode
	}{
		{"world readable data", "", 0o755},
		{"group readable data", "", 0o750},
		{"others may enter data", "", 0o701},
		{"world readable store", StoreDir, 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			dir := filepath.Join(c.DataDir, tc.sub)
			require.NoError(t, os.MkdirAll(dir, 0o700))
			require.NoError(t, os.Chmod(dir, tc.mode))
			// NB: runUntilServed, not Run: a directory let through must fail the test, not have crewd serve until the
			// test binary's timeout.
			served, err := runUntilServed(c)
			require.False(t, served)
			require.ErrorContains(t, err, fmt.Sprintf("has mode %04o", tc.mode))
			fi, err := os.Stat(dir)
			require.NoError(t, err)
			require.Equal(t, tc.mode, fi.Mode().Perm(), "not chmod-ed")
			require.NoFileExists(t, filepath.Join(c.DataDir, AdminTokenFile), "nothing was written")
		})
	}

	t.Run("another owner", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("only root can give a directory away") // the mode cases above run everywhere
		}
		c := testConfig(t)
		require.NoError(t, os.MkdirAll(c.DataDir, 0o700))
		require.NoError(t, os.Chown(c.DataDir, 65534, 65534))
		served, err := runUntilServed(c)
		require.False(t, served)
		require.ErrorContains(t, err, "belongs to uid 65534")
	})
}

// TestRunRefusesLowSpace: below --min-free-mib crewd does not start (and so never opens Pebble on a full disk).
func TestRunRefusesLowSpace(t *testing.T) {
	c := testConfig(t)
	c.MinFreeBytes = 1 << 62
	err := Run(context.Background(), c, io.Discard, discard())
	require.ErrorContains(t, err, "daemon: disk-full: ")
	require.ErrorContains(t, err, "--min-free-mib")
	require.NoDirExists(t, filepath.Join(c.DataDir, StoreDir))
}

// A write of known size (a snapshot) is allowed only when the free space less its size stays at or above the
// minimum, read afresh: free space above the minimum is not enough for a write larger than the room above it.
func TestSpaceGuardForAWriteOfKnownSize(t *testing.T) {
	dir := t.TempDir()
	g, err := newSpaceGuard(dir, 1<<20, discard())
	require.NoError(t, err)
	free, err := freeBytes(dir)
	require.NoError(t, err)
	require.Greater(t, free, uint64(64<<20), "the test needs a disk with some room")
	require.NoError(t, g.CheckSpaceFor(0))
	require.NoError(t, g.CheckSpaceFor(1<<20))
	// NB: the free space read now and 1 GiB more: a write of just what was free would pass if another process freed
	// over a MiB (the minimum) between the two readings, as on a shared disk.
	require.ErrorContains(t, g.CheckSpaceFor(free+1<<30), "too little for a write", "no room left above the minimum")
	require.ErrorContains(t, g.CheckSpaceFor(1<<63), "too little for a write")
	full, err := newSpaceGuard(dir, free+1<<30, discard())
	require.NoError(t, err)
	require.ErrorContains(t, full.CheckSpaceFor(1), "for a write of 1 MiB", "a write under a MiB is named as one")

	// NB: a cached reading of a full disk does not answer it: the free space is read again.
	now := time.Now()
	g.now = func() time.Time { return now }
	g.checked.Store(now.UnixNano())
	g.free.Store(0)
	require.Error(t, g.CheckSpace(), "the cached reading says full")
	require.NoError(t, g.CheckSpaceFor(1<<20), "read afresh")
}

func TestSpaceGuard(t *testing.T) {
	dir := t.TempDir()
	g, err := newSpaceGuard(dir, 0, discard())
	require.NoError(t, err)
	require.NoError(t, g.CheckSpace(), "no minimum")

	free, err := freeBytes(dir)
	require.NoError(t, err)
	g, err = newSpaceGuard(dir, free+1<<40, discard())
	require.NoError(t, err)
	require.ErrorContains(t, g.CheckSpace(), "below the minimum")

	// The reading is refreshed at most every 100 ms (docs/reliability.md): space freed shows after the next refresh.
	g, err = newSpaceGuard(dir, 1, discard())
	require.NoError(t, err)
	now := time.Now()
	g.now = func() time.Time { return now }
	g.checked.Store(now.UnixNano())
	g.free.Store(0) // as if the disk had been full at the last reading
	require.ErrorContains(t, g.CheckSpace(), "0 MiB free", "the cached reading still says full")
	now = now.Add(99 * time.Millisecond)
	require.ErrorContains(t, g.CheckSpace(), "0 MiB free", "a reading under 100 ms old is kept")
	now = now.Add(time.Millisecond)
	require.NoError(t, g.CheckSpace(), "one 100 ms old is read again")
}

// TestSpaceGuardClockStepsBack: the wall clock stepping back (an NTP correction, an operator's date) does not
// freeze the reading: the guard reads the free space again at once rather than when the clock is back where it was,
// where it went on refusing writes on a disk freed since (or accepting them on one filled since) meanwhile.
func TestSpaceGuardClockStepsBack(t *testing.T) {
	g, err := newSpaceGuard(t.TempDir(), 1, discard())
	require.NoError(t, err)
	now := time.Now()
	g.now = func() time.Time { return now }
	g.checked.Store(now.UnixNano())
	g.free.Store(0) // as if the disk had been full at the last reading
	require.ErrorContains(t, g.CheckSpace(), "0 MiB free")
	now = now.Add(-time.Hour)
	require.NoError(t, g.CheckSpace(), "read again, not kept for the hour the clock went back")
	now = now.Add(spaceCheckInterval / 2)
	g.free.Store(0)
	require.ErrorContains(t, g.CheckSpace(), "0 MiB free", "then read at most every spaceCheckInterval again")
}

// TestInterruptible: an open that hangs (Pebble retrying a flush on a full disk) is given up when ctx ends, with
// the cause; when it finishes later, what it opened is closed.
func TestInterruptible(t *testing.T) {
	release := make(chan struct{})
	dropped := make(chan int, 1)
	errDeadline := errors.New("deadline")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errDeadline)
	_, err := Interruptible(ctx, "open the thing", func() (int, error) {
		<-release
		return 7, nil
	}, func(v int) { dropped <- v })
	require.ErrorIs(t, err, errDeadline)
	require.ErrorIs(t, err, ErrGaveUp)
	require.ErrorContains(t, err, "daemon: open the thing: gave up")
	close(release)
	require.Equal(t, 7, <-dropped)

	v, err := Interruptible(context.Background(), "open", func() (int, error) { return 3, nil }, func(int) { t.Error("dropped") })
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

// TestMainUmask: crewd's files are private whatever umask it starts with.
func TestMainUmask(t *testing.T) {
	var out, errs bytes.Buffer
	require.Equal(t, ExitOK, Main([]string{"--help"}, &out, &errs))
	f := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(f, nil, 0o666))
	fi, err := os.Stat(f)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestRunMeasuresTheStoresFileSystem: the free space crewd keeps is the store's, where Pebble writes: a store that
// is a symbolic link to another file system is measured there, not on the data directory's, which may have room
// to spare while the store's is full.
func TestRunMeasuresTheStoresFileSystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; CI runs as root")
	}
	small := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.Mkdir(small, 0o700))
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=4m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v)", err)
	}
	t.Cleanup(func() { syscall.Unmount(small, syscall.MNT_DETACH) })
	c := testConfig(t)
	require.NoError(t, os.MkdirAll(c.DataDir, 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(small, "store"), 0o700))
	require.NoError(t, os.Symlink(filepath.Join(small, "store"), filepath.Join(c.DataDir, StoreDir)))
	free, err := freeBytes(c.DataDir)
	require.NoError(t, err)
	c.MinFreeBytes = 8 << 20 // more than the store's file system holds
	require.Greater(t, free, c.MinFreeBytes, "the data directory's file system has room")

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a start that passed the check would give up opening the store
	err = Run(ctx, c, io.Discard, discard())
	require.ErrorContains(t, err, "daemon: disk-full: ")
}
