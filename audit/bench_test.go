package audit

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The benchmarks replay and verify a 1,000,000-event log of decisions
// (CREWLOG_BENCH_EVENTS=N changes the size), built once per process, and
// measure in the same run the log's iteration with decode: a Read loop that
// decodes every payload with the codec replay and verify use
// (projections.FromLogWith, one events.Decoder), on one goroutine. They
// report each rate and the ratio to that iteration ("ratio"), and the ratio
// to the iteration without payload decoding ("ratio-records", a Read loop
// alone) for comparison with older figures: absolute numbers on a shared VM
// move by tens of percent between runs, ratios much less. They also report
// the ratio of the CPU time the process spent in each ("cpu-ratio",
// getrusage): on a machine with no core to spare a pipeline cannot overlap
// its stages, and the wall-clock ratio falls towards it.
//
//	go test ./audit -run '^$' -bench 'Replay$|Verify$' -benchtime 3x

var benchStore struct {
	once sync.Once
	dir  string
	n    uint64
	err  error
}

func benchLog(b *testing.B) (*eventlog.Log, uint64) {
	benchStore.once.Do(func() {
		n := 1_000_000
		if s := os.Getenv("CREWLOG_BENCH_EVENTS"); s != "" {
			fmt.Sscan(s, &n)
		}
		dir, err := os.MkdirTemp("", "crewlog-audit-bench-")
		if err != nil {
			benchStore.err = err
			return
		}
		benchStore.dir = dir
		l, err := eventlog.Open(dir, nil)
		if err != nil {
			benchStore.err = err
			return
		}
		benchStore.n, benchStore.err = audittest.Large(l, n)
		if err := l.Close(); benchStore.err == nil {
			benchStore.err = err
		}
	})
	require.NoError(b, benchStore.err)
	l, err := Open(benchStore.dir)
	require.NoError(b, err)
	b.Cleanup(func() { l.Close() })
	return l, benchStore.n
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchStore.dir != "" {
		os.RemoveAll(benchStore.dir)
	}
	os.Exit(code)
}

// iterate reads the log with record decode, touching each event: the
// iteration without payload decoding.
func iterate(b *testing.B, l *eventlog.Log) uint64 {
	it := l.Read(1)
	var n, sum uint64
	for it.Next() {
		e := it.Event()
		sum += e.StreamVersion + uint64(len(e.Payload))
		n++
	}
	require.NoError(b, it.Close())
	_ = sum
	return n
}

// iterateDecoded is the baseline: the log's iteration with every payload
// decoded by the codec replay and verify use, on one goroutine.
func iterateDecoded(b *testing.B, l *eventlog.Log) uint64 {
	it := l.Read(1)
	dec := events.NewDecoder()
	var n uint64
	for it.Next() {
		ev, err := projections.FromLogWith(dec, it.Event())
		if err != nil {
			b.Fatal(err)
		}
		if ev.Payload != nil {
			n++
		}
	}
	require.NoError(b, it.Close())
	return n
}

// measure alternates the baselines and op, one unmeasured pass of each
// first so all see a warm cache, and reports the rates and the ratios.
func measure(b *testing.B, name string, op func(l *eventlog.Log)) {
	l, n := benchLog(b)
	iterate(b, l)
	iterateDecoded(b, l)
	op(l)
	var tIter, tDecoded, tOp, cDecoded, cOp time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0, c0 := time.Now(), cpuTime(b)
		require.Equal(b, n, iterateDecoded(b, l))
		t1, c1 := time.Now(), cpuTime(b)
		op(l)
		t2, c2 := time.Now(), cpuTime(b)
		require.Equal(b, n, iterate(b, l))
		tDecoded += t1.Sub(t0)
		tOp += t2.Sub(t1)
		tIter += time.Since(t2)
		cDecoded += c1 - c0
		cOp += c2 - c1
	}
	b.StopTimer()
	ev := float64(n) * float64(b.N)
	b.ReportMetric(ev/tOp.Seconds(), name+"-events/s")
	b.ReportMetric(ev/tDecoded.Seconds(), "decode-events/s")
	b.ReportMetric(ev/tIter.Seconds(), "iterate-events/s")
	b.ReportMetric(tDecoded.Seconds()/tOp.Seconds(), "ratio")
	b.ReportMetric(tIter.Seconds()/tOp.Seconds(), "ratio-records")
	b.ReportMetric(cDecoded.Seconds()/cOp.Seconds(), "cpu-ratio")
	b.ReportMetric(float64(n), "events")
}

// cpuTime is the CPU time (user and system) the process has spent so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplay is `crewctl replay` without printing: the fold from
// position 1 with payload decode. Goal: ≥ 250,000 events/s and ≥ 0.6× the
// iteration with decode.
func BenchmarkReplay(b *testing.B) {
	measure(b, "replay", func(l *eventlog.Log) {
		res, err := Replay(l, ReplayOptions{})
		require.NoError(b, err)
		require.NotZero(b, res.State.Position)
	})
}

// BenchmarkLoad is the fold a daemon's start makes of the log after its snapshot (projections.LoadTiered, which
// checks the hash chain as replay does), here of the whole log: a start without a snapshot.
func BenchmarkLoad(b *testing.B) {
	measure(b, "load", func(l *eventlog.Log) {
		s, _, err := projections.LoadTiered(l, projections.Tiering{Retention: -1, NoSnapshot: true})
		require.NoError(b, err)
		require.NotZero(b, s.Position)
	})
}

// BenchmarkReplayExplain re-runs every decision as well.
func BenchmarkReplayExplain(b *testing.B) {
	measure(b, "explain", func(l *eventlog.Log) {
		res, err := Replay(l, ReplayOptions{Explain: true})
		require.NoError(b, err)
		require.Zero(b, res.Drift())
	})
}

// BenchmarkVerify is `crewctl verify`: eventlog.Verify (checksums, chain,
// index, commands, snapshot) with the invariant fold over the same pass.
// Goal: ≥ 0.5× the iteration with decode.
func BenchmarkVerify(b *testing.B) {
	measure(b, "verify", func(l *eventlog.Log) {
		rep, err := Verify(l, nil)
		require.NoError(b, err)
		require.Empty(b, rep.Check.Problems)
		require.Equal(b, rep.Store.Head, rep.Check.Events)
	})
}

// BenchmarkVerifyTwoPass is the integrity walk, then Check reading the log
// again: what one pass saves.
func BenchmarkVerifyTwoPass(b *testing.B) {
	measure(b, "verify2", func(l *eventlog.Log) {
		_, err := l.Verify(nil)
		require.NoError(b, err)
		rep, err := Check(l, nil)
		require.NoError(b, err)
		require.Empty(b, rep.Problems)
	})
}
