package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/crewlog/crewlog/broker/wire"
)

// BenchmarkCallPerConnection: 64 callers, each with a connection of its own and one call at a time (as crewbench's
// socket cell drives the broker), against a fake broker that answers at once. cpu-ns/op is the process's CPU time
// (both ends: the fake broker is in the process too) per call, steadier than ns/op on a shared machine.
//
//	go test ./broker/client -run '^$' -bench CallPerConnection -benchtime 50000x
func BenchmarkCallPerConnection(b *testing.B) {
	br := newFakeBroker(b, pingHandler())
	const conns = 64
	clients := make(chan *Client, conns)
	for i := 0; i < conns; i++ {
		c, err := Dial(context.Background(), br.path, worker, nil)
		require.NoError(b, err)
		b.Cleanup(func() { c.Close() })
		clients <- c
	}
	var failed atomic.Int64
	b.SetParallelism(conns) // at least conns goroutines, whatever GOMAXPROCS; the extra ones wait for a connection
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := <-clients
		defer func() { clients <- c }()
		for pb.Next() {
			if c.Call(context.Background(), wire.MethodPing, nil, nil) != nil {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	require.Zero(b, failed.Load())
}

func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
