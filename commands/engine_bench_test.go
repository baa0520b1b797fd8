package commands

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// BenchmarkEngineDelegate drives admitted, metered delegate.request
// commands through the engine on the real disk with 1, 8 and 64 concurrent
// submitters. Each submitter settles what it gets admitted (the daemon-wide
// slot pool holds at most 64), so the engine decides two commands per
// admission. In the same run it measures the eventlog's 100-events-per-batch
// append rate and the latency of a single synced Pebble batch, the floor a
// command's latency is compared with.
//
//	go test ./commands -run '^$' -bench EngineDelegate -benchtime 20000x
func BenchmarkEngineDelegate(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("submitters=%d", n), func(b *testing.B) { benchEngine(b, n) })
	}
}

func benchEngine(b *testing.B, submitters int) {
	dir := b.TempDir()
	l, err := eventlog.Open(filepath.Join(dir, "crewlog"), nil)
	require.NoError(b, err)
	defer l.Close()
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = 64
	// NB: the rules crewd's defaults put in force, which DefaultConfig (a log's before its first config) leaves
	// off: every admission checks the worker's share of the slots, and a worker holding its share looks for waiters.
	cfg.ShareByDelegator, cfg.WorkerSlotShare = true, true
	e, err := Open(l, Options{Config: &cfg, ExpiryInterval: -1})
	require.NoError(b, err)
	defer e.Close()
	f := &engineFixture{t: b, log: l, eng: e}
	f.seedRun("R", MaxBudgetTotal)
	start := e.Stats()

	per := b.N/submitters + 1
	lat := make([][]time.Duration, submitters)
	var wg sync.WaitGroup
	b.ResetTimer()
	t0 := time.Now()
	cpu0 := processCPU(b)
	for g := 0; g < submitters; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			lat[g] = make([]time.Duration, 0, per)
			for i := 0; i < per; i++ {
				s := time.Now()
				r, err := e.Submit(context.Background(),
					Request{Principal: events.WorkerPrincipal("R", "02_exec"),
						CommandID: fmt.Sprintf("b-%d-%d", g, i), Actor: worker("02_exec"),
						Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "find X",
							BudgetTokens: ptr(int64(1000))}})
				lat[g] = append(lat[g], time.Since(s))
				if err != nil || r.Rejected != nil {
					b.Errorf("not admitted: %v %v", err, r.Rejected)
					return
				}
				var res DelegateResult
				_ = json.Unmarshal(r.Result, &res)
				if _, err := e.Submit(context.Background(), Request{Actor: orchestrator,
					Command: &DelegateSettle{RunID: "R", SubID: res.GrandchildTaskRef, Outcome: OutcomeOK,
						Text: "done"}}); err != nil {
					b.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := processCPU(b) - cpu0
	b.StopTimer()

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	st := e.Stats()
	groups := st.Groups - start.Groups
	cmds := st.Commands - start.Commands
	p50, p99 := percentile(all, 50), percentile(all, 99)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "admitted/s")
	// CPU per admission (and its settlement) of the whole process, user
	// and system: steadier than the rates on a machine others load.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/admission")
	b.ReportMetric(float64(cmds)/elapsed.Seconds(), "commands/s")
	b.ReportMetric(float64(cmds)/float64(groups), "commands/group")
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")

	// Baselines in the same run and directory.
	batchRate := eventlogBatchRate(b, filepath.Join(dir, "batch"))
	syncP99 := pebbleSyncP99(b, filepath.Join(dir, "plain1"), 1)
	syncP99N := pebbleSyncP99(b, filepath.Join(dir, "plainN"), submitters)
	b.ReportMetric(batchRate, "eventlog-100batch-events/s")
	b.ReportMetric(float64(syncP99.Microseconds()), "pebble-sync-p99-µs")
	b.ReportMetric(float64(p99)/float64(syncP99), "p99-ratio")
	// The same single-batch commits from as many goroutines as submitters:
	// the floor at this concurrency (Pebble groups their WAL syncs).
	b.ReportMetric(float64(syncP99N.Microseconds()), "pebble-sync-concurrent-p99-µs")
	b.ReportMetric(float64(p99)/float64(syncP99N), "p99-ratio-concurrent")
}

// processCPU is the CPU time (user + system) the process has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

// eventlogBatchRate appends 100-event batches for about a second.
func eventlogBatchRate(b *testing.B, dir string) float64 {
	l, err := eventlog.Open(dir, nil)
	require.NoError(b, err)
	defer l.Close()
	payload := make([]byte, 200)
	evs := make([]eventlog.Event, 100)
	n := 0
	start := time.Now()
	for time.Since(start) < time.Second {
		for i := range evs {
			evs[i] = eventlog.Event{Stream: fmt.Sprintf("run-%d", (n+i)/3%100), Type: "delegate.admitted",
				SchemaVersion: 1, Payload: payload}
		}
		_, err := l.Append(eventlog.Write{Events: evs})
		require.NoError(b, err)
		n += len(evs)
	}
	return float64(n) / time.Since(start).Seconds()
}

// pebbleSyncP99 is the p99 latency of single synced Pebble batches of one
// ~300-byte value, committed by n goroutines at once (500 per goroutine,
// at most 20,000 in all).
func pebbleSyncP99(b *testing.B, dir string, n int) time.Duration {
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest,
		Logger: quiet{slog.New(slog.DiscardHandler)}})
	require.NoError(b, err)
	defer db.Close()
	per := min(500, 20000/n)
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			v := make([]byte, 300)
			k := make([]byte, 9)
			for i := 0; i < per; i++ {
				binary.BigEndian.PutUint64(k[1:], uint64(g*per+i))
				s := time.Now()
				if err := db.Set(k, v, pebble.Sync); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(s))
			}
		}(g)
	}
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return percentile(all, 99)
}

type quiet struct{ l *slog.Logger }

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (q quiet) Fatalf(f string, a ...any) {
	panic(fmt.Sprintf(f, a...))
}

// BenchmarkFingerprint is the per-command cost command ids add on the
// submitter's goroutine (the writer only compares bytes).
func BenchmarkFingerprint(b *testing.B) {
	c := &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "find X in the tree and report",
		BudgetTokens: ptr(int64(1000))}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fingerprint(c); err != nil {
			b.Fatal(err)
		}
	}
}
