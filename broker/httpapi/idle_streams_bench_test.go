package httpapi

import (
	"net/http"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIdleStreams measures what open streams with nothing to send cost the process: 512 of them (the default
// MaxStreams), of a read-only token, whose streams look at their credential every credentialRecheck, or of the
// admin token, whose never do. Each iteration is a second of idling; the metric is the process's CPU (user and
// system) in it, in per cent of one core:
//
//	go test ./broker/httpapi -run '^$' -bench IdleStreams -benchtime 30x
func BenchmarkIdleStreams(b *testing.B) {
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"read-only", http.Header{"Authorization": {"Bearer " + roToken}}},
		{"admin", nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, Options{MaxStreams: DefaultMaxStreams, MaxStreamsPerPrincipal: DefaultMaxStreams,
				MaxConns: DefaultMaxStreams + 100})
			for range DefaultMaxStreams {
				if fr := <-f.openStream("/api/v1/stream", tc.header); fr.event != "hello" {
					b.Fatalf("a stream opened with %q, not its hello", fr.event)
				}
			}
			time.Sleep(2 * credentialRecheck) // NB: the streams' first looks and the connections' settling
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				time.Sleep(time.Second)
			}
			b.StopTimer()
			b.ReportMetric(100*float64(processCPU(b)-cpu0)/float64(time.Duration(b.N)*time.Second), "%core")
		})
	}
}

// processCPU is the CPU the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
