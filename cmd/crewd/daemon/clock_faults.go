//go:build crewlog_faults

package daemon

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockOffsetEnv names, in test builds tagged crewlog_faults only, a file holding a signed offset in milliseconds
// that is added to the wall clock the engine reads at every reading: a test writes it to make that clock jump
// forwards or backwards while crewd runs (the engine's time follows a jump forwards and holds through one back). A
// missing or unreadable file is no offset.
const ClockOffsetEnv = "CREWD_TEST_CLOCK_OFFSET_FILE"

// engineClock is the engine clock of a fault-injecting test build.
func engineClock() func() time.Time {
	path := os.Getenv(ClockOffsetEnv)
	if path == "" {
		return nil
	}
	return func() time.Time {
		b, err := os.ReadFile(path)
		if err != nil {
			return time.Now()
		}
		ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return time.Now()
		}
		return time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
}
