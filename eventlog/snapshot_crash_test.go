package eventlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// A crash before every file-system operation of a snapshot's save (the
// table's build, its ingestion and everything Pebble does meanwhile): the
// recovered store holds exactly one snapshot, whole and sealed, and it is
// the previous one until some point and the new one from then on, never
// neither and never both. The previous snapshot was either ingested too or
// written through a batch, as stores written before ingestion hold it (its
// key then sits in the memtable the ingestion overlaps).
func TestCrashDuringSnapshotSave(t *testing.T) {
	for _, previous := range []string{"ingested", "batch"} {
		t.Run(previous, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			crashes := &crashRecorder{mem: mem, seed: 11}
			l, err := Open("db", &Options{FS: errorfs.Wrap(mem, crashes)})
			require.NoError(t, err)
			_, err = l.Append(Write{CommandID: "a", Events: evs("run", 6)})
			require.NoError(t, err)
			oldData, newData := incompressible(48<<10, 1), incompressible(2*snapshotChunk+5, 2)
			if previous == "batch" {
				require.NoError(t, l.db.Set(snapshotKey(4), seal(oldData), pebble.Sync))
			} else {
				require.NoError(t, l.SaveSnapshot(4, oldData))
			}
			_, err = l.Append(Write{CommandID: "b", Events: evs("run", 6)})
			require.NoError(t, err)

			crashes.armed.Store(true)
			require.NoError(t, l.SaveSnapshot(10, newData))
			crashes.armed.Store(false)
			final := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
			require.NoError(t, l.Close()) // Pebble's background work ends: clones is the test's alone
			clones := append(crashes.clones, final)
			require.Greater(t, len(clones), 4, "the save performed file-system operations")

			sawNew := false
			counts := map[uint64]int{}
			for i, fs := range clones {
				r, s := reopenWithOneSnapshot(t, fs, fmt.Sprintf("crash %d", i))
				if sawNew {
					require.Equal(t, Snapshot{Position: 10, Data: newData}, s, "crash %d: the new snapshot was durable before", i)
				} else if s.Position == 10 {
					require.Equal(t, newData, s.Data, "crash %d", i)
					sawNew = true
				} else {
					require.Equal(t, Snapshot{Position: 4, Data: oldData}, s, "crash %d", i)
				}
				counts[s.Position]++
				_, err = fs.Stat(fs.PathJoin("db", ingestFile))
				require.True(t, errors.Is(err, os.ErrNotExist), "crash %d: Open removes a table a crash left: %v", i, err)
				// The recovered store saves its next snapshot.
				require.NoError(t, r.SaveSnapshot(12, []byte("next")), "crash %d", i)
				require.NoError(t, r.Close())
			}
			require.Positive(t, counts[4], "some crash came before the new snapshot was durable")
			require.Positive(t, counts[10], "the new snapshot is durable once the save returns")
		})
	}
}

func incompressible(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// crashRecorder is an errorfs injector that, while armed, takes a crash
// clone of mem before every file-system operation (keeping none, half or
// all of the unsynced data in turn) and fails none.
type crashRecorder struct {
	mem    *vfs.MemFS
	seed   uint64
	armed  atomic.Bool
	mu     sync.Mutex
	clones []*vfs.MemFS
}

func (c *crashRecorder) MaybeError(errorfs.Op) error {
	if c.armed.Load() {
		c.mu.Lock()
		n := len(c.clones)
		rng := rand.New(rand.NewPCG(uint64(n), c.seed))
		c.clones = append(c.clones, c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: (n % 3) * 50, RNG: rng}))
		c.mu.Unlock()
	}
	return nil
}

func (c *crashRecorder) String() string { return "crash clone before every op" }

// nthFault fails, while armed, the n-th file-system operation that is not on Pebble's manifest or a marker file
// (whose failures are fatal by Pebble's design), and counts them.
type nthFault struct {
	n, seen atomic.Int64
	armed   atomic.Bool
}

func (f *nthFault) MaybeError(op errorfs.Op) error {
	if !f.armed.Load() || strings.Contains(op.Path, "MANIFEST") || strings.Contains(op.Path, "marker") {
		return nil
	}
	if f.seen.Add(1) == f.n.Load() {
		return errorfs.ErrInjected
	}
	return nil
}

func (f *nthFault) String() string { return "fail the n-th op" }

// A snapshot's save failing (EIO) at each of its file-system operations in turn, the sync of the WAL it makes first
// included: the save returns an error (a failed sync fails the log stop) instead of panicking in Pebble, the log
// still serves a whole snapshot, the previous one or the new one, and the reopened store opens, verifies, holds the
// same one with the summary it needs, and every append acknowledged.
func TestSnapshotSaveFailingAtEveryOp(t *testing.T) {
	oldData, newData := incompressible(48<<10, 1), incompressible(2*snapshotChunk+5, 2)
	for n := int64(1); ; n++ {
		mem := vfs.NewMem()
		f := &nthFault{}
		f.n.Store(n)
		l, err := Open("db", &Options{FS: errorfs.Wrap(mem, f)})
		require.NoError(t, err)
		_, err = l.Append(Write{CommandID: "a", Events: evs("run", 6)})
		require.NoError(t, err)
		require.NoError(t, l.SaveSummaries([]Summary{{Stream: "run", Ord: 0, Position: 2, Data: []byte("s2")}}))
		require.NoError(t, l.SaveSnapshot(4, oldData))
		require.NoError(t, l.SaveSummaries([]Summary{{Stream: "run", Ord: 0, Position: 6, Data: []byte("s6")}}))
		f.armed.Store(true)
		serr := l.SaveSnapshot(6, newData)
		f.armed.Store(false)
		s, err := l.LatestSnapshot()
		require.NoError(t, err, "fault %d", n)
		if serr != nil {
			require.Equal(t, Snapshot{Position: 4, Data: oldData}, s, "fault %d: %v", n, serr)
		} else {
			require.Equal(t, Snapshot{Position: 6, Data: newData}, s, "fault %d", n)
		}
		_, aerr := l.Append(Write{CommandID: "b", Events: evs("run", 1)})
		_ = l.Close()

		r, got := reopenWithOneSnapshot(t, mem, fmt.Sprintf("fault %d", n))
		require.Equal(t, s, got, "fault %d", n)
		sum, err := r.LatestSummary("run", s.Position)
		require.NoError(t, err, "fault %d: the summary the snapshot at %d needs", n, s.Position)
		require.Equal(t, map[uint64]string{4: "s2", 6: "s6"}[s.Position], string(sum.Data), "fault %d", n)
		if aerr == nil {
			_, err = r.Outcome("", "b")
			require.NoError(t, err, "fault %d: an acknowledged append", n)
		}
		require.NoError(t, r.Close())
		if serr == nil && f.seen.Load() < n {
			return // the save took fewer operations than n
		}
	}
}

// reopenWithOneSnapshot opens the store "db" on fs after a crash or a fault (what names it in the messages), verifies
// it, requires that its slot holds exactly one snapshot, and returns the log and that snapshot.
func reopenWithOneSnapshot(t *testing.T, fs vfs.FS, what string) (*Log, Snapshot) {
	t.Helper()
	r, err := Open("db", &Options{FS: fs})
	require.NoError(t, err, what)
	rep, err := r.Verify(nil)
	require.NoError(t, err, what)
	require.Equal(t, 1, rep.Snapshots, "%s: the slot holds exactly one snapshot", what)
	s, err := r.LatestSnapshot()
	require.NoError(t, err, what)
	return r, s
}
