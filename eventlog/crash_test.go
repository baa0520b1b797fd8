package eventlog

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// A crash after the k-th acknowledged append, for every k of a 200-append
// workload run by concurrent appenders: the recovered log is a prefix of the
// final one (same chain), holds every append acknowledged before the crash,
// passes Verify, and accepts further appends.
func TestCrashAfterEveryAppend(t *testing.T) {
	const appends, appenders = 200, 4
	fs := vfs.NewCrashableMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)

	type crash struct {
		fs       *vfs.MemFS
		k        int
		maxAcked uint64   // highest position acknowledged before the crash
		acked    []string // command ids acknowledged before the crash
	}
	var (
		mu      sync.Mutex
		crashes []crash
		acked   []string
		maxPos  uint64
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	for w := 0; w < appenders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1))
				if k > appends {
					return
				}
				id := fmt.Sprintf("cmd-%03d", k)
				write := Write{CommandID: id, Events: evs(fmt.Sprintf("run-%d", k%5), 1+k%3)}
				if _, err := l.Append(write); err != nil {
					t.Errorf("append %d: %v", k, err)
					return
				}
				last := write.Events[len(write.Events)-1].Position
				mu.Lock()
				acked = append(acked, id)
				maxPos = max(maxPos, last)
				c := crash{k: k, maxAcked: maxPos, acked: append([]string(nil), acked...)}
				mu.Unlock()
				// Other appenders keep running while the clone is taken.
				rng := rand.New(rand.NewPCG(uint64(k), 7))
				c.fs = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: (k % 3) * 40, RNG: rng})
				mu.Lock()
				crashes = append(crashes, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	final := readAll(t, l)
	require.NoError(t, l.Close())
	require.Len(t, crashes, appends)

	for _, c := range crashes {
		r, err := Open("db", &Options{FS: c.fs})
		require.NoError(t, err, "crash %d", c.k)
		_, err = r.Verify(nil)
		require.NoError(t, err, "crash %d", c.k)
		headPos, headHash := r.Head()
		require.GreaterOrEqual(t, headPos, c.maxAcked, "crash %d lost an acknowledged append", c.k)
		require.LessOrEqual(t, headPos, uint64(len(final)))
		require.Equal(t, final[headPos-1].Hash, headHash, "crash %d: not a prefix of the attempted log", c.k)
		for _, id := range c.acked {
			o, err := r.Outcome("", id)
			require.NoError(t, err, "crash %d lost command %s", c.k, id)
			require.LessOrEqual(t, o.First+o.Count-1, headPos)
		}
		// The recovered log goes on gaplessly.
		first, err := r.Append(Write{Events: evs("after", 1)})
		require.NoError(t, err)
		require.Equal(t, headPos+1, first)
		require.NoError(t, r.Close())
	}
}

// An injected write or sync error on the WAL fails that append and every
// later one; reopening recovers every acknowledged append, and the failed
// append is wholly present or wholly absent.
func TestWALErrorFailsStop(t *testing.T) {
	kinds := map[string][]errorfs.OpKind{
		"write": {errorfs.OpFileWrite, errorfs.OpFileWriteAt},
		"sync":  walSyncOps,
	}
	for name, ops := range kinds {
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			toggle := walFaults(ops...)
			l := openTenAcked(t, mem, toggle)

			toggle.On()
			_, err := l.Append(Write{CommandID: "doomed", Events: evs("run", 3)})
			require.ErrorIs(t, err, ErrFailed)
			toggle.Off()
			_, err = l.Append(Write{Events: evs("run", 1)})
			require.ErrorIs(t, err, ErrFailed, "the log stays failed after the fault clears")
			pos, _ := l.Head()
			require.EqualValues(t, 20, pos, "the failed append is never served as durable")
			_ = l.Close()

			r := reopenTenAcked(t, mem)
			defer r.Close()
			headPos, _ := r.Head()
			require.Contains(t, []uint64{20, 23}, headPos, "wholly present or wholly absent")
			_, err = r.Append(Write{Events: evs("run", 1)})
			require.NoError(t, err, "reopen recovers")
		})
	}
}

// A snapshot's save, a checkpoint or a drop of the summaries on a WAL whose sync fails, during it or before it (the
// log failed stop on an append), fails stop as an append does: an error wrapping ErrFailed, no later write, and the
// reopened store holds every acknowledged append and the previous snapshot. Each syncs the WAL (the drop commits its
// batch synced), and Pebble's synced apply treats a failed sync as fatal and panics. A view, derived data written
// after the failure, is refused too rather than written into that WAL.
func TestSyncingOnAFailedWALFailsStop(t *testing.T) {
	ops := map[string]func(l *Log) error{
		"snapshot": func(l *Log) error { return l.SaveSnapshot(20, []byte("s20")) },
		"snapshot from": func(l *Log) error {
			_, err := l.SaveSnapshotFrom(20, func(w io.Writer) (int64, error) {
				n, err := w.Write([]byte("s20"))
				return int64(n), err
			})
			return err
		},
		"checkpoint":     func(l *Log) error { return l.Checkpoint("copy") },
		"drop summaries": func(l *Log) error { return l.DropSummaries(false) },
	}
	for name, op := range ops {
		for _, when := range []string{"during it", "after a failed append"} {
			t.Run(name+"/"+when, func(t *testing.T) {
				mem := vfs.NewMem()
				toggle := walFaults(walSyncOps...)
				l := openTenAcked(t, mem, toggle)
				require.NoError(t, l.SaveSnapshot(10, []byte("s10")))
				toggle.On()
				if when == "after a failed append" {
					_, err := l.Append(Write{Events: evs("run", 1)})
					require.ErrorIs(t, err, ErrFailed)
					toggle.Off()
					require.ErrorIs(t, l.SaveView("run", 20, []byte("v")), ErrFailed)
				}
				require.ErrorIs(t, op(l), ErrFailed)
				toggle.Off()
				_, err := l.Append(Write{Events: evs("run", 1)})
				require.ErrorIs(t, err, ErrFailed, "the log failed stop")
				_ = l.Close()

				r := reopenTenAcked(t, mem)
				defer r.Close()
				s, err := r.LatestSnapshot()
				require.NoError(t, err)
				require.Equal(t, Snapshot{Position: 10, Data: []byte("s10")}, s)
				require.NoError(t, op(r), "reopen recovers")
			})
		}
	}
}
