package broker

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkStalledSubscriber measures what a client that never reads costs
// everyone else. The same stream of 10,000 events is committed twice, in
// the same run: once while a subscriber reads everything, once while a
// subscriber stalls (it gets a resync frame and its queue stays full).
// Meanwhile another client pings without pause; the report compares its
// ping latency in the two runs (goal: p50 and p99 within 2×) and the
// commit time of the stream (the writer must never block on a client).
//
//	go test ./broker -run '^$' -bench StalledSubscriber -benchtime 1x
func BenchmarkStalledSubscriber(b *testing.B) {
	run := func(stall bool) (commit time.Duration, lat []time.Duration) {
		f := newFixture(b, fixtureOpts{opts: Options{OutboundQueueCap: 32}, write: time.Minute, disk: true})
		s := f.seed()
		sub := f.dial()
		sub.hello(runR, taskP, s.p)
		sub.ok("events.subscribe", map[string]any{"sinceSeq": 0})
		other := f.dial()
		other.hello(runR, taskQ, s.q)

		stopRead := make(chan struct{})
		var readers sync.WaitGroup
		if !stall {
			readers.Add(1)
			go func() {
				defer readers.Done()
				for {
					select {
					case <-stopRead:
						return
					default:
					}
					if _, err := sub.read(); err != nil {
						return
					}
				}
			}()
		}
		done := make(chan struct{})
		var pinger sync.WaitGroup
		pinger.Add(1)
		go func() {
			defer pinger.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				t0 := time.Now()
				other.ok("ping", nil)
				lat = append(lat, time.Since(t0))
			}
		}()
		commit = f.streamUsage(b, 10000)
		close(done)
		pinger.Wait()
		close(stopRead)
		sub.nc.Close()
		readers.Wait()
		return commit, lat
	}
	q := func(d []time.Duration, p float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	for i := 0; i < b.N; i++ {
		cReading, lReading := run(false)
		cStalled, lStalled := run(true)
		require.NotEmpty(b, lReading)
		require.NotEmpty(b, lStalled)
		b.ReportMetric(float64(q(lReading, 0.5).Microseconds()), "reading-ping-p50-µs")
		b.ReportMetric(float64(q(lStalled, 0.5).Microseconds()), "stalled-ping-p50-µs")
		b.ReportMetric(float64(q(lStalled, 0.5))/float64(q(lReading, 0.5)), "ping-p50-ratio")
		b.ReportMetric(float64(q(lStalled, 0.99))/float64(q(lReading, 0.99)), "ping-p99-ratio")
		b.ReportMetric(float64(cStalled)/float64(cReading), "commit-time-ratio")
	}
}
