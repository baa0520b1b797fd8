package broker

import (
	"testing"
	"time"
)

// BenchmarkIdleConnections measures what 1,000 idle connections (subscribed, with a wait in flight) cost everyone
// else, as ratios within one run: the median latency of 50 pings of another client and the mean time of 20
// task.usage commits of another run, before and with the idle connections. Goal: both within 5×.
// TestThousandIdleConnections asserts what they must not do (wake, block); this reports the time.
//
//	go test ./broker -run '^$' -bench IdleConnections -benchtime 1x
func BenchmarkIdleConnections(b *testing.B) {
	for i := 0; i < b.N; i++ {
		f, s, c, o2 := idleScene(b)
		usage := func() time.Duration {
			start := time.Now()
			for i := 0; i < 20; i++ {
				o2.ok("task.usage", map[string]any{"taskId": "T2", "input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0})
			}
			return time.Since(start) / 20
		}
		pingAlone, commitAlone := medianPing(c, 50), usage()
		openIdle(f, s, 1000)
		pingIdle, commitIdle := medianPing(c, 50), usage()
		b.ReportMetric(float64(pingAlone.Microseconds()), "ping-p50-µs")
		b.ReportMetric(float64(pingIdle)/float64(pingAlone), "ping-p50-ratio")
		b.ReportMetric(float64(commitIdle)/float64(commitAlone), "other-run-commit-ratio")
	}
}
