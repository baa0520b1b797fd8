package eventlog

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkVerify walks a command-shaped store: 600,000 events written by
// 200,000 commands of three events each (benchEvent's workload), every one
// with its outcome, compacted as a long-lived store is. It reports the
// records checked per second.
//
//	go test ./eventlog -run '^$' -bench Verify -benchtime 5x
func BenchmarkVerify(b *testing.B) {
	l := openDisk(b, "verify")
	const commands, perCommand, perAppend = 200_000, 3, 500
	principal := "w\x00R\x0002_exec"
	for i := 0; i < commands; i += perAppend {
		ws := make([]Write, 0, perAppend)
		for j := i; j < min(i+perAppend, commands); j++ {
			events := make([]Event, perCommand)
			for k := range events {
				events[k] = benchEvent(j*perCommand + k)
			}
			ws = append(ws, Write{Principal: principal, CommandID: fmt.Sprintf("cmd-%d", j), Events: events,
				Result: []byte(`{"grandchildTaskRef":"gc-1"}`), Fingerprint: make([]byte, 32)})
		}
		_, err := l.Append(ws...)
		require.NoError(b, err)
	}
	require.NoError(b, l.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false))
	b.ResetTimer()
	for b.Loop() {
		rep, err := l.Verify(nil)
		require.NoError(b, err)
		require.Equal(b, commands, rep.Commands)
	}
	b.ReportMetric(float64(b.N*commands*perCommand)/b.Elapsed().Seconds(), "events/s")
}
