//go:build !crewlog_faults

package daemon

import "time"

// engineClock is nil in every real build: the engine reads time.Now. clock_faults.go replaces it in test builds
// tagged crewlog_faults with a clock a test can make jump.
func engineClock() func() time.Time { return nil }
