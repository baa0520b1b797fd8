package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// TestRunRefusesAnUnfinishedCopy: a data directory without a store that holds the staging directory of a crewctl copy
// into it (a restore, a copy of a stream, a backup's checkpoint, killed before the copy was in place) is refused, and
// nothing is written there; crewd would have served a new, empty store in place of the copy. A staging directory
// beside a store, or a name that only looks like one, does not stop the start.
func TestRunRefusesAnUnfinishedCopy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry string // made in the data directory
		store bool   // the data directory holds a store too
		file  bool   // entry is a file, not a directory
		want  string // "" starts
	}{
		{"restore", RestoreStaging + "123", false, false, "crewctl restore into it"},
		{"copy of a stream", StreamStaging + "9", false, false, "crewctl migrate-store --to pebble (or backup --nats)"},
		{"backup", eventlog.CheckpointStaging + "77", false, false, "crewctl backup into it"},
		{"beside a store", RestoreStaging + "123", true, false, ""},
		{"a look-alike", RestoreStaging + "x1", false, false, ""},
		{"a file of the name", RestoreStaging + "5", false, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			if tc.file {
				require.NoError(t, os.MkdirAll(c.DataDir, 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(c.DataDir, tc.entry), nil, 0o600))
			} else {
				require.NoError(t, os.MkdirAll(filepath.Join(c.DataDir, tc.entry, StoreDir), 0o700))
			}
			if tc.store {
				require.NoError(t, os.Mkdir(filepath.Join(c.DataDir, StoreDir), 0o700))
				l, err := eventlog.Open(filepath.Join(c.DataDir, StoreDir), nil)
				require.NoError(t, err)
				require.NoError(t, l.Close())
			}
			served, err := runUntilServed(c)
			if tc.want == "" {
				require.True(t, served, "%v", err)
				require.NoError(t, err)
				return
			}
			require.False(t, served, "crewd served a new, empty store")
			require.ErrorContains(t, err, filepath.Join(c.DataDir, tc.entry))
			require.ErrorContains(t, err, tc.want)
			names, rerr := os.ReadDir(c.DataDir)
			require.NoError(t, rerr)
			require.Len(t, names, 1, "nothing was written beside %s", tc.entry)
		})
	}
}

// TestRunChecksForACopyUnderTheDataDirectorysLock: crewd looked for a copy's staging directory without the data
// directory's lock, which a crewctl copy takes to claim the directory, so a restore that claimed it right after the
// look copied beside a crewd that went on to serve a new, empty store (and could take out a server.key that crewd had
// read). crewd now looks, and makes its admin.token and server.key, under that lock: here a restore holds it and
// claims the directory while crewd waits, and crewd then finds the claim and refuses to start, writing nothing.
func TestRunChecksForACopyUnderTheDataDirectorysLock(t *testing.T) {
	c := testConfig(t)
	require.NoError(t, os.MkdirAll(c.DataDir, 0o700))
	lock, err := eventlog.LockDir(c.DataDir)
	require.NoError(t, err)
	type result struct {
		served bool
		err    error
	}
	ended := make(chan result, 1)
	go func() {
		served, err := runUntilServed(c)
		ended <- result{served, err}
	}()
	// NB: crewd waits for the lock before it writes anything (the kernel lists it as a waiter); without the lock it
	// served at once.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	// NB: a guard, not a timing: a crewd that neither serves nor waits for the lock would hang the test until go
	// test's own timeout.
	hung := time.After(30 * time.Second)
	for !flockWaiterOn(t, c.DataDir) {
		select {
		case r := <-ended:
			t.Fatalf("crewd did not wait for the data directory's lock: served %v, %v", r.served, r.err)
		case <-hung:
			t.Fatal("crewd neither served nor waited for the data directory's lock within 30 s")
		case <-tick.C:
		}
	}
	names, err := os.ReadDir(c.DataDir)
	require.NoError(t, err)
	require.Empty(t, names, "crewd wrote nothing while a copy held the data directory")
	staging := filepath.Join(c.DataDir, RestoreStaging+"123")
	require.NoError(t, os.Mkdir(staging, 0o700)) // the restore's claim, made under the lock
	require.NoError(t, lock.Close())

	r := <-ended
	require.False(t, r.served, "crewd served a new, empty store beside a restore")
	require.ErrorContains(t, r.err, staging)
	names, err = os.ReadDir(c.DataDir)
	require.NoError(t, err)
	require.Len(t, names, 1, "nothing was written beside the restore's claim")
}

// flockWaiterOn reports whether a process waits for a flock on the directory dir: /proc/locks lists a blocked
// request as "-> FLOCK ..." with the file's device and inode.
func flockWaiterOn(t *testing.T, dir string) bool {
	t.Helper()
	st, err := os.Stat(dir)
	require.NoError(t, err)
	ino := fmt.Sprintf(":%d ", st.Sys().(*syscall.Stat_t).Ino)
	locks, err := os.ReadFile("/proc/locks")
	require.NoError(t, err)
	for _, line := range strings.Split(string(locks), "\n") {
		if strings.Contains(line, "-> FLOCK") && strings.Contains(line, ino) {
			return true
		}
	}
	return false
}
