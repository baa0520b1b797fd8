//go:build crewlog_faults

package daemon

import (
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/crewlog/crewlog/eventlog"
)

// DiskFaultsEnv names, in test builds tagged crewlog_faults only, a file that sets the faults of the store's disk
// (eventlog.DiskFaults): its words "full" (writes fail with ENOSPC, no free space), "low" (no free space reported,
// writes still succeed) and "stall" (writes and syncs wait until the word is gone). crewd reads it at start and at
// every SIGUSR1. The file's name with ".fsync" appended, while it exists, arms one failing WAL sync: the process
// that injects it removes it, so it fails once however often crewd restarts. A missing file is no fault.
const DiskFaultsEnv = "CREWD_TEST_DISK_FAULTS_FILE"

var (
	diskFaultsOnce sync.Once
	diskFaults     *eventlog.DiskFaults // nil when DiskFaultsEnv is unset
)

// disk returns the disk faults of this process, set up from DiskFaultsEnv on first use.
func disk() *eventlog.DiskFaults {
	diskFaultsOnce.Do(func() {
		path := os.Getenv(DiskFaultsEnv)
		if path == "" {
			return
		}
		lg := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "diskfaults")
		diskFaults = eventlog.NewDiskFaults(lg)
		reload := func() {
			b, _ := os.ReadFile(path) // NB: missing or unreadable: no fault
			words := strings.Fields(string(b))
			diskFaults.Set(slices.Contains(words, "full"), slices.Contains(words, "low"), slices.Contains(words, "stall"))
			if _, err := os.Stat(path + ".fsync"); err == nil {
				diskFaults.ArmSyncFailure(func() bool { return os.Remove(path+".fsync") == nil })
			}
		}
		reload()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGUSR1)
		go func() {
			for range sig {
				reload()
			}
		}()
	})
	return diskFaults
}

// storeFaults puts the event log on the fault-injecting file system when DiskFaultsEnv is set.
func storeFaults(o *eventlog.Options) {
	if d := disk(); d != nil {
		d.Wrap(o)
	}
}

// faultFree reports no free space while the disk is full or low.
func faultFree() (uint64, bool) {
	if d := disk(); d != nil {
		return d.Free()
	}
	return 0, false
}
