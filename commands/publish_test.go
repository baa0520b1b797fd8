package commands

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Readers that read while groups are decided, synced and published (run it
// with -race) only ever see a published state that is exactly the fold of
// the durable log up to its position: never an event that is not durable
// yet (its position is at most the log's durable head, read after it), never
// a group half published (the same position always reads the same state,
// and that state is what folding the log from position 1 to it gives).
func TestPipelineReadersSeeExactlyTheDurablePrefix(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	adm := events.AdminPrincipal()
	const submitters, perSubmitter, nReaders = 4, 25, 2

	type view struct {
		pos     uint64
		durable uint64 // the log's durable head, read after the view
		snap    []byte
	}
	var (
		done    atomic.Bool
		mu      sync.Mutex
		seen    = map[uint64][]byte{}
		ahead   [][2]uint64 // positions of views past the durable head, and that head
		torn    []uint64
		errs    []error
		subs    sync.WaitGroup
		readers sync.WaitGroup
	)
	for r := range nReaders {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for n := 0; !done.Load() || n == 0; n++ {
				var v view
				var err error
				f.eng.Read(func(s *projections.State) {
					v.pos = s.Position
					v.snap, err = projections.EncodeSnapshot(s)
				})
				v.durable, _ = f.log.Head()
				mu.Lock()
				switch prev, ok := seen[v.pos]; {
				case err != nil:
					errs = append(errs, fmt.Errorf("reader %d: %w", r, err))
				case v.pos > v.durable:
					ahead = append(ahead, [2]uint64{v.pos, v.durable})
				case ok && !bytes.Equal(prev, v.snap):
					torn = append(torn, v.pos)
				case !ok:
					seen[v.pos] = v.snap
				}
				mu.Unlock()
			}
		}()
	}
	for g := range submitters {
		subs.Add(1)
		go func() {
			defer subs.Done()
			for i := range perSubmitter {
				run := fmt.Sprintf("r%d-%d", g, i)
				for j, c := range []Command{
					&RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"},
					&TaskCreate{RunID: run, TaskID: "02_exec", Role: "executor", Agent: "a", Title: "exec", Cwd: "/w",
						StepID: "exec"},
				} {
					r, err := f.eng.Submit(context.Background(), as(adm, fmt.Sprintf("%s-%d", run, j), c))
					if err == nil && r.Rejected != nil {
						err = r.Rejected
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
				}
			}
		}()
	}
	subs.Wait()
	done.Store(true)
	readers.Wait()
	require.Empty(t, errs)
	require.Empty(t, ahead, "a reader saw events that were not durable")
	require.Empty(t, torn, "two reads of one position saw different states")
	require.Greater(t, len(seen), 2, "the readers saw the state move")

	// Every view seen is the fold of the log up to its position.
	s := projections.New()
	check := func() {
		if want, ok := seen[s.Position]; ok {
			got, err := projections.EncodeSnapshot(s)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "the view at %d is not the fold of the log up to it", s.Position)
			delete(seen, s.Position)
		}
	}
	check()
	it := f.log.Read(1)
	for it.Next() {
		ev, err := projections.FromLog(it.Event())
		require.NoError(t, err)
		projections.Apply(s, ev)
		check()
	}
	require.NoError(t, it.Close())
	require.Empty(t, seen, "views at positions the log does not hold")
}
