package eventlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// Benchmarks run on the real disk (t.TempDir), because the fsync is what they
// measure. Each one measures crewlog and a plain Pebble baseline in the same
// run, interleaved, and reports the ratio: absolute numbers on a shared VM
// move by tens of percent between runs, ratios much less.
//
//	go test ./eventlog -run '^$' -bench . -benchtime 3s

// payloads is a cycle of realistic msgpack payloads (~200 bytes, similar but
// not identical so blocks compress as real ones do).
var payloads = func() [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([][]byte, 1024)
	for i := range out {
		p, _ := msgpack.Marshal(map[string]any{
			"taskId": fmt.Sprintf("%02d_explore", rng.IntN(20)),
			"subId":  fmt.Sprintf("gc-%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<16), rng.IntN(1<<16), rng.Uint64()&(1<<48-1)),
			"role":   []string{"explorer", "analyst", "executor"}[rng.IntN(3)], "childDepth": 2 + rng.IntN(3),
			"reservedTokens": rng.IntN(100000), "model": "claude-sonnet-4", "timeoutSec": 900,
			"parentTaskId": fmt.Sprintf("%02d_build", rng.IntN(20)), "deadline": 1_760_000_000_000 + rng.Int64N(1e9),
		})
		out[i] = p
	}
	return out
}()

// benchEvent is the i-th event of a command-shaped workload: commands of
// three events (delegate.requested, admitted, budget.reserved) each go to one
// of 1,000 runs.
func benchEvent(i int) Event {
	return Event{
		Stream: streamNames[(i/3)%len(streamNames)], Type: "delegate.admitted", SchemaVersion: 1,
		Time: 1_764_480_000_000_000_000 + int64(i)*1000, CausationID: "r-5f0c2a1e-8d4b-4c8a-9a51-3c7f0e2b9d11",
		CorrelationID: "r-5f0c2a1e-8d4b-4c8a-9a51-3c7f0e2b9d11", ActorRole: "worker", ActorTask: "01_explore",
		Payload: payloads[i%len(payloads)],
	}
}

func openDisk(b *testing.B, name string) *Log {
	l, err := Open(filepath.Join(b.TempDir(), name), nil)
	require.NoError(b, err)
	b.Cleanup(func() { l.Close() })
	return l
}

// openPebble opens the plain baseline with the Pebble options crewlog uses
// (cache, memtable, bloom filters, compression), so the ratio measures
// crewlog's own work.
func openPebble(b *testing.B, dir string) *pebble.DB {
	o := &pebble.Options{FormatMajorVersion: pebble.FormatNewest, CacheSize: DefaultCacheSize,
		MemTableSize: DefaultMemTableSize, Logger: newPebbleLogger(slog.New(slog.DiscardHandler))}
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	SetCompression(o)
	db, err := pebble.Open(dir, o)
	require.NoError(b, err)
	return db
}

// BenchmarkAppendVsPebble appends batches of n events with one sync each,
// alternating crewlog Append and a plain Pebble batch holding the same
// record bytes under the same event keys, and reports both costs per event
// and their ratio (cost-ratio). A third leg commits a plain batch of every
// key crewlog writes (records, stream index entries, head), pre-encoded:
// its ratio (cost-ratio-same-keys) isolates crewlog's CPU work (encoding,
// chaining, validation) from the price of the extra keys.
func BenchmarkAppendVsPebble(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			l := openDisk(b, "crewlog")
			db := openPebble(b, filepath.Join(b.TempDir(), "plain"))
			defer db.Close()
			db2 := openPebble(b, filepath.Join(b.TempDir(), "plain-same-keys"))
			defer db2.Close()
			var pos2 uint64
			versions := map[string]uint64{}
			// The plain baseline stores the same bytes crewlog stores for its
			// records, pre-encoded, so it pays for nothing but the batch.
			raw := make([][]byte, 1024)
			for i := range raw {
				e := benchEvent(i)
				e.Position, e.StreamVersion = uint64(i+1), uint64(i/1000+1)
				raw[i] = appendRecord(nil, &[32]byte{}, &e)
			}
			var tLog, tRaw, tSame time.Duration
			events := make([]Event, n)
			pos := uint64(0)
			key := make([]byte, 0, 9)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range events {
					events[j] = benchEvent(i*n + j)
				}
				t0 := time.Now()
				if _, err := l.Append(Write{Events: events}); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				batch := db.NewBatch()
				for j := 0; j < n; j++ {
					pos++
					key = appendEventKey(key[:0], pos)
					_ = batch.Set(key, raw[int(pos)%len(raw)], nil)
				}
				if err := batch.Commit(pebble.Sync); err != nil {
					b.Fatal(err)
				}
				batch.Close()
				t2 := time.Now()
				tLog += t1.Sub(t0)
				tRaw += t2.Sub(t1)

				// The same keys crewlog wrote, built before the clock starts.
				type kv struct{ k, v []byte }
				var kvs []kv
				runs := map[string][]uint64{}
				first := map[string]uint64{}
				for j := range events {
					pos2++
					kvs = append(kvs, kv{eventKey(pos2), raw[int(pos2)%len(raw)]})
					st := events[j].Stream
					if _, ok := first[st]; !ok {
						first[st] = versions[st] + 1
					}
					versions[st]++
					runs[st] = append(runs[st], pos2)
				}
				for st, ps := range runs {
					kvs = append(kvs, kv{appendStreamKey(nil, st, first[st]), appendIndexValue(nil, ps)})
				}
				kvs = append(kvs, kv{keyHead, head{Position: pos2}.encode()})
				t3 := time.Now()
				batch = db2.NewBatch()
				for _, x := range kvs {
					_ = batch.Set(x.k, x.v, nil)
				}
				if err := batch.Commit(pebble.Sync); err != nil {
					b.Fatal(err)
				}
				batch.Close()
				tSame += time.Since(t3)
			}
			b.StopTimer()
			ev := float64(b.N * n)
			b.ReportMetric(float64(tLog.Nanoseconds())/ev, "crewlog-ns/event")
			b.ReportMetric(float64(tRaw.Nanoseconds())/ev, "pebble-ns/event")
			b.ReportMetric(ev/tLog.Seconds(), "crewlog-events/s")
			b.ReportMetric(ev/tRaw.Seconds(), "pebble-events/s")
			b.ReportMetric(float64(tLog)/float64(tRaw), "cost-ratio")
			b.ReportMetric(float64(tLog)/float64(tSame), "cost-ratio-same-keys")
		})
	}
}

// BenchmarkAppendConcurrent runs 64 appenders of one event each against
// crewlog, then against plain Pebble Commit(Sync) of the same bytes, for the
// same wall time each, and reports both rates, their ratio and crewlog's
// latency percentiles.
func BenchmarkAppendConcurrent(b *testing.B) {
	const appenders = 64
	l := openDisk(b, "crewlog")
	db := openPebble(b, filepath.Join(b.TempDir(), "plain"))
	defer db.Close()
	raw := appendRecord(nil, &[32]byte{}, &Event{Position: 1, StreamVersion: 1, Stream: "s", Type: "t", Payload: payloads[0]})
	var rawPos uint64
	var rawMu sync.Mutex

	run := func(op func(i int) error) (rate float64, lat []time.Duration) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		per := b.N/appenders + 1
		start := time.Now()
		for g := 0; g < appenders; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				local := make([]time.Duration, 0, per)
				for i := 0; i < per; i++ {
					t0 := time.Now()
					if err := op(g*per + i); err != nil {
						b.Error(err)
						return
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			}(g)
		}
		wg.Wait()
		return float64(per*appenders) / time.Since(start).Seconds(), lat
	}
	b.ResetTimer()
	logRate, lat := run(func(i int) error {
		_, err := l.Append(Write{Events: []Event{benchEvent(i)}})
		return err
	})
	rawRate, _ := run(func(i int) error {
		rawMu.Lock()
		rawPos++
		k := eventKey(rawPos)
		rawMu.Unlock()
		return db.Set(k, raw, pebble.Sync)
	})
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(logRate, "crewlog-events/s")
	b.ReportMetric(rawRate, "pebble-events/s")
	b.ReportMetric(logRate/rawRate, "rate-ratio")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

var streamNames = func() []string {
	out := make([]string, 1000)
	for i := range out {
		out[i] = fmt.Sprintf("team_20261130052700_%016x", i*7919)
	}
	return out
}()

// TestMain removes the benchmark store once every benchmark has used it. With killedCheckpointEnv set it runs a
// checkpoint to be killed instead of the tests.
func TestMain(m *testing.M) {
	if args := os.Getenv(killedCheckpointEnv); args != "" {
		killableCheckpoint(args)
	}
	code := m.Run()
	if readStore.dir != "" {
		os.RemoveAll(readStore.dir)
	}
	os.Exit(code)
}

// readStore is a 1,000,000-event store built once per process (it takes a
// while: ~300 MB of records).
var readStore struct {
	once sync.Once
	dir  string
	n    int
	err  error
}

func millionEventStore(b *testing.B) (string, int) {
	readStore.once.Do(func() {
		n := 1_000_000
		if s := os.Getenv("CREWLOG_BENCH_EVENTS"); s != "" {
			fmt.Sscan(s, &n)
		}
		dir, err := os.MkdirTemp("", "crewlog-bench-")
		if err != nil {
			readStore.err = err
			return
		}
		l, err := Open(dir, nil)
		if err != nil {
			readStore.err = err
			return
		}
		const per = 5000
		events := make([]Event, per)
		for i := 0; i < n; i += per {
			for j := range events {
				events[j] = benchEvent(i + j)
			}
			if _, err := l.Append(Write{Events: events[:min(per, n-i)]}); err != nil {
				readStore.err = err
				return
			}
		}
		_ = l.db.Flush()
		readStore.dir, readStore.n, readStore.err = dir, n, l.Close()
	})
	require.NoError(b, readStore.err)
	return readStore.dir, readStore.n
}

// BenchmarkReadAll iterates the whole million-event store with full decode
// (crewlog Read) and, alternating, with a raw Pebble scan of the same keys
// touching every value, and reports both rates and their ratio.
func BenchmarkReadAll(b *testing.B) {
	dir, n := millionEventStore(b)
	l, err := Open(dir, nil)
	require.NoError(b, err)
	defer l.Close()
	var tLog, tRaw time.Duration
	// One unmeasured pass of each warms the cache alike.
	scanRaw(b, l)
	readDecoded(b, l, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		readDecoded(b, l, n)
		t1 := time.Now()
		scanRaw(b, l)
		tLog += t1.Sub(t0)
		tRaw += time.Since(t1)
	}
	b.StopTimer()
	ev := float64(b.N * n)
	b.ReportMetric(ev/tLog.Seconds(), "decoded-events/s")
	b.ReportMetric(ev/tRaw.Seconds(), "raw-keys/s")
	b.ReportMetric(float64(tRaw)/float64(tLog), "rate-ratio")
}

func readDecoded(b *testing.B, l *Log, n int) {
	it := l.Read(1)
	count := 0
	var sum uint64
	for it.Next() {
		e := it.Event()
		sum += e.StreamVersion + uint64(len(e.Payload)) + uint64(len(e.Type))
		count++
	}
	require.NoError(b, it.Close())
	require.Equal(b, n, count)
	_ = sum
}

func scanRaw(b *testing.B, l *Log) {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEvent}, UpperBound: []byte{prefixEvent + 1}})
	require.NoError(b, err)
	var sum uint64
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			b.Fatal(err)
		}
		sum += binary.BigEndian.Uint64(it.Key()[1:]) + uint64(len(v))
	}
	require.NoError(b, it.Close())
	_ = sum
}

// BenchmarkOutcome looks up command outcomes in a store of 120,000
// commands whose first 100,000 were compacted to the bottom level (the
// steady state of a long-lived store) and whose last 20,000 are recent:
// "new-id" asks for ids never recorded (what the engine does for every
// new command), "recent" for ids among the last 20,000 (a retry).
//
//	go test ./eventlog -run '^$' -bench Outcome -benchtime 200000x
func BenchmarkOutcome(b *testing.B) {
	l := openDisk(b, "outcomes")
	const old, recent, perAppend = 100_000, 20_000, 500
	principal := "w\x00R\x0002_exec"
	appendCommands := func(from, to int) {
		for i := from; i < to; i += perAppend {
			ws := make([]Write, 0, perAppend)
			for j := i; j < min(i+perAppend, to); j++ {
				ws = append(ws, Write{Principal: principal, CommandID: fmt.Sprintf("cmd-%d", j),
					Events: []Event{benchEvent(j)}, Result: []byte(`{"grandchildTaskRef":"gc-1"}`), Fingerprint: make([]byte, 32)})
			}
			_, err := l.Append(ws...)
			require.NoError(b, err)
		}
	}
	appendCommands(0, old)
	require.NoError(b, l.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false))
	appendCommands(old, old+recent)
	b.Run("new-id", func(b *testing.B) {
		i := 0
		for b.Loop() {
			_, err := l.Outcome(principal, fmt.Sprintf("new-%d", i))
			if !errors.Is(err, ErrNotFound) {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("recent", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := l.Outcome(principal, fmt.Sprintf("cmd-%d", old+i%recent)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkFollowHead is a reader that follows the head, as the broker's
// feed and every subscription do: after each one-event append it reads
// from the next position, on a store whose newest flushed events sit next
// to a 30 MB snapshot.
//
//	go test ./eventlog -run '^$' -bench FollowHead -benchtime 2000x
func BenchmarkFollowHead(b *testing.B) {
	l := openDisk(b, "follow")
	for i := range 5000 {
		_, err := l.Append(Write{Events: []Event{benchEvent(i)}})
		require.NoError(b, err)
	}
	next := flushNextToSnapshot(b, l, 30<<20) + 1
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := l.Append(Write{Events: []Event{benchEvent(i)}})
		require.NoError(b, err)
		it := l.Read(next)
		for it.Next() {
			next = it.Event().Position + 1
		}
		require.NoError(b, it.Close())
	}
}

// BenchmarkAppendGroup is the CPU of the engine's append, without the disk:
// a group of 20 admissions (three events and an outcome each) and 20
// settlements (two events, no command id) on one stream, on an in-memory
// file system (its sync costs nothing), one op per admission.
//
//	go test ./eventlog -run '^$' -bench AppendGroup -benchtime 2000x -benchmem
func BenchmarkAppendGroup(b *testing.B) {
	l, err := Open("group", &Options{FS: vfs.NewMem()})
	require.NoError(b, err)
	defer l.Close()
	const admissions = 20
	principal := "w\x00R\x0002_exec"
	result, fp := []byte(`{"ok":true,"grandchildTaskRef":"gc-1","childDepth":2,"timeoutSec":900}`), make([]byte, 32)
	ws := make([]Write, 0, 2*admissions)
	n := 0
	b.ReportAllocs()
	// The CPU of this goroutine's thread alone: the append's own work, not
	// Pebble's background goroutines, and not time waiting for a core on a
	// busy machine.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
	for b.Loop() {
		ws = ws[:0]
		for range admissions {
			evs := make([]Event, 3)
			for k := range evs {
				evs[k] = benchEvent(n + k)
				evs[k].Stream = "R"
			}
			ws = append(ws, Write{Principal: principal, CommandID: fmt.Sprintf("b-%d", n), Events: evs, Result: result, Fingerprint: fp})
			settle := []Event{benchEvent(n + 3), benchEvent(n + 4)}
			settle[0].Stream, settle[1].Stream = "R", "R"
			ws = append(ws, Write{Events: settle})
			n += 5
		}
		_, err := l.Append(ws...)
		require.NoError(b, err)
	}
	b.ReportMetric(float64((threadCPU(b)-cpu0).Nanoseconds())/float64(b.N*admissions), "cpu-ns/admission")
}

func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	require.NoError(b, unix.Getrusage(unix.RUSAGE_THREAD, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSaveSnapshot is the cost of saving and of loading a snapshot of
// the size a long, busy run's hot state encodes to, on the real disk: the
// CPU and the bytes Pebble's table writer and the ingestion spend on it.
// The bytes are msgpack-like (short strings and ids, compressible about as
// much as a state's encoding).
//
//	go test ./eventlog -run '^$' -bench SaveSnapshot -benchtime 10x -benchmem
func BenchmarkSaveSnapshot(b *testing.B) {
	for _, size := range []int{1 << 20, 32 << 20} {
		data := stateLikeBytes(size)
		b.Run(fmt.Sprintf("save/%dMiB", size>>20), func(b *testing.B) {
			l := openDisk(b, "snap")
			_, err := l.Append(Write{Events: []Event{benchEvent(0)}})
			require.NoError(b, err)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				require.NoError(b, l.SaveSnapshot(1, data))
			}
		})
		b.Run(fmt.Sprintf("load/%dMiB", size>>20), func(b *testing.B) {
			l := openDisk(b, "snap")
			_, err := l.Append(Write{Events: []Event{benchEvent(0)}})
			require.NoError(b, err)
			require.NoError(b, l.SaveSnapshot(1, data))
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := l.LatestSnapshot()
				require.NoError(b, err)
				require.Len(b, s.Data, size)
			}
		})
	}
}

// stateLikeBytes is n bytes that compress about as a state's msgpack does:
// records of a few short keys, a random id and a small number each.
func stateLikeBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([]byte, 0, n+64)
	for len(out) < n {
		out = append(out, 0x84, 0xa2, 'i', 'd', 0xd9, 36)
		for range 36 {
			out = append(out, "0123456789abcdef-"[rng.IntN(17)])
		}
		out = append(out, 0xa5, 's', 't', 'a', 't', 'e', 0xa7, 'a', 'd', 'm', 'i', 't', 't', 'e')
		out = append(out, 0xa4, 'c', 'o', 's', 't', 0xcd, byte(rng.IntN(256)), byte(rng.IntN(256)))
	}
	return out[:n]
}
