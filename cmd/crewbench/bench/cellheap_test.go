package bench

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goalAtFirstAdmit records the collector's heap goal when the timed run's first admission arrives.
type goalAtFirstAdmit struct {
	Store
	once sync.Once
	goal *uint64
}

func (g *goalAtFirstAdmit) Admit(ctx context.Context, run string, tokens int64) (Admission, error) {
	g.once.Do(func() {
		s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
		metrics.Read(s)
		*g.goal = s[0].Value.Uint64()
	})
	return g.Store.Admit(ctx, run, tokens)
}

// TestCellStartsFromACollectedHeap: a cell's timed run starts with the collector's goal set by its own heap, not by
// what the cell before it left. The file store's read-back of its 256 MiB file left a goal of 514 MiB, and a crewlog
// cell of a second after it ran without one collection, where after a collected heap it ran twelve: the cells share
// one heap, and each left the next its garbage and a goal that did not fit it.
func TestCellStartsFromACollectedHeap(t *testing.T) {
	left := make([]byte, 256<<20)
	runtime.GC() // with left live: the goal is twice it
	runtime.KeepAlive(left)
	var goal uint64
	file, _ := implByName("file")
	im := Impl{Name: "goal", open: func(d string, s Spec) (Store, error) {
		st, err := file.open(d, s)
		return &goalAtFirstAdmit{Store: st, goal: &goal}, err
	}}
	r := runCell(context.Background(), im, t.TempDir(), Cell{Clients: 1}, 10*time.Millisecond,
		50*time.Millisecond, Load{}, cellProfiling{}, nil)
	require.NoError(t, r.Err)
	require.Less(t, goal, uint64(128<<20), "the heap goal when the timed run began")
}
