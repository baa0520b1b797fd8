//go:build crewlog_faults

package eventlog

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fault-injecting file system of test builds: a failing fsync fails the log and loses the unsynced append, a
// full disk fails appends with ENOSPC and shows no space once one has failed, and both hold only while set.
// (go test -tags crewlog_faults ./eventlog -run DiskFaults; the Jepsen check of integration/ drives it through
// crewd.)
func TestDiskFaultsFailedFsyncLosesTheUnsyncedAppend(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	d := NewDiskFaults(slog.New(slog.DiscardHandler))
	o := &Options{}
	d.Wrap(o)
	l, err := Open(dir, o)
	require.NoError(t, err)
	for i := range 10 {
		_, err := l.Append(Write{CommandID: fmt.Sprint("ok-", i), Events: evs("run", 2)})
		require.NoError(t, err)
	}
	consumed := 0
	d.ArmSyncFailure(func() bool { consumed++; return true })
	_, err = l.Append(Write{CommandID: "doomed", Events: evs("run", 3)})
	require.ErrorIs(t, err, ErrFailed)
	require.ErrorContains(t, err, syscall.EIO.Error())
	_, err = l.Append(Write{Events: evs("run", 1)})
	require.ErrorIs(t, err, ErrFailed, "the log stays failed")
	require.Equal(t, 1, consumed, "armed once, injected once")
	_ = l.Close()

	r, err := Open(dir, nil)
	require.NoError(t, err)
	defer r.Close()
	pos, _ := r.Head()
	require.EqualValues(t, 20, pos, "the append whose fsync failed is gone, every acknowledged one is there")
	_, err = r.Verify(nil)
	require.NoError(t, err)
}

func TestDiskFaultsFullDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	d := NewDiskFaults(slog.New(slog.DiscardHandler))
	d.Set(false, false, false) // the process starts on a healthy disk
	o := &Options{}
	d.Wrap(o)
	l, err := Open(dir, o)
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Append(Write{Events: evs("run", 1)})
	require.NoError(t, err)

	d.Set(true, false, false)
	_, faked := d.Free()
	require.False(t, faked, "the guard cannot see the disk fill before a write fails")
	_, err = l.Append(Write{Events: evs("run", 1)})
	require.ErrorContains(t, err, syscall.ENOSPC.Error())
	free, faked := d.Free()
	require.True(t, faked)
	require.Zero(t, free)

	d.Set(false, true, false)
	_, faked = d.Free()
	require.True(t, faked, "low: no space shown")
	d.Set(false, false, false)
	_, faked = d.Free()
	require.False(t, faked)
}
