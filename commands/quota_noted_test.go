package commands

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// A run past its quota records run.quota_exceeded at most once a minute, however many commands it refuses: each is
// refused, but the log a flood of them is kept from growing grows by one event a minute. The minute is counted from
// the refusal that was recorded, to the millisecond.
func TestAQuotaRefusalIsRecordedAtMostOnceAMinute(t *testing.T) {
	l := fxRunning(t, 0)
	run, _ := l.s.Run(fxRun)
	start := fxNow - int64(time.Hour)
	for _, tc := range []struct {
		name     string
		after    time.Duration // since the first refusal
		recorded bool
	}{
		{"the first refusal", 0, true},
		{"a refusal within the minute", time.Minute - time.Millisecond, false},
		{"a refusal a minute after the one recorded", time.Minute, true},
		{"a refusal within the next minute", 2*time.Minute - time.Millisecond, false},
	} {
		env := fxEnv()
		env.Config.QuotaEvents = run.Usage.Events // the run is at its quota
		env.Now = start + int64(tc.after)
		dec, err := Decide(l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 1}, env)
		var rej *RejectedError
		require.ErrorAs(t, err, &rej, tc.name)
		require.Equal(t, CodeQuotaExceeded, rej.Code, tc.name)
		if !tc.recorded {
			require.Empty(t, dec.Events, tc.name)
			continue
		}
		require.Equal(t, []string{events.TypeRunQuotaExceeded}, fxTypes(dec.Events), tc.name)
		l.apply(dec)
		noted, _ := l.s.Run(fxRun)
		require.Equal(t, env.Now/int64(time.Millisecond), noted.Usage.QuotaNotedAt, tc.name)
	}
}
