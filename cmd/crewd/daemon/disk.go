//go:build !crewlog_faults

package daemon

import "github.com/crewlog/crewlog/eventlog"

// storeFaults leaves the event log on the real file system in every real build. disk_faults.go replaces it in test
// builds tagged crewlog_faults with a file system a test can make full, stalled or failing.
func storeFaults(*eventlog.Options) {}

// faultFree never overrides the free space in a real build.
func faultFree() (uint64, bool) { return 0, false }
