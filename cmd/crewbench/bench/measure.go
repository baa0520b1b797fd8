package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// Cell is one configuration of the timed workload.
type Cell struct {
	Clients int
	OwnRuns bool // each client on its own run, else all on one
}

func (c Cell) String() string {
	if c.OwnRuns {
		return fmt.Sprintf("%d clients, own runs", c.Clients)
	}
	return fmt.Sprintf("%d clients, one run", c.Clients)
}

// Result is one implementation timed in one cell.
type Result struct {
	Impl     string
	Cell     Cell
	Ops      int // admissions counted in the window
	PerSec   float64
	P50, P99 time.Duration
	Retries  float64 // conflicts or busy locks per counted admission
	Err      error
}

// The timed workload's policy never refuses: every op is an admission.
const (
	timedBudget = 1 << 50
	timedTokens = 1000
	timedSlots  = 64 // crewlog's largest slot pool; each client holds at most one delegation
)

// retrier is a store that counts retries (optimistic conflicts, busy locks).
type retrier interface{ Retries() int64 }

// runCell times im in cell for warm + window on a fresh store in dir. One op
// is a delegate admission (its latency is the one reported) followed by the
// settlement that frees its slot; an op counts when its admission started
// after the warm-up and its settlement finished inside the window.
func runCell(ctx context.Context, im Impl, dir string, cell Cell, warm, window time.Duration) Result {
	res := Result{Impl: im.Name, Cell: cell}
	res.Err = func() error {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		runs := []string{"run-0"}
		perRun := cell.Clients
		if cell.OwnRuns {
			runs, perRun = make([]string, cell.Clients), 1
			for i := range runs {
				runs[i] = fmt.Sprintf("run-%d", i)
			}
		}
		spec := Spec{Budget: timedBudget, Slots: timedSlots, Clients: perRun}
		s, err := im.open(dir, spec)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Setup(ctx, runs, spec); err != nil {
			return err
		}
		var before int64
		if r, ok := s.(retrier); ok {
			before = r.Retries()
		}
		start := time.Now()
		from, to := start.Add(warm), start.Add(warm+window)
		cctx, cancel := context.WithDeadline(ctx, to)
		defer cancel()
		lats := make([][]time.Duration, cell.Clients)
		errs := make([]error, cell.Clients)
		var wg sync.WaitGroup
		for c := 0; c < cell.Clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				run := runs[c%len(runs)]
				for cctx.Err() == nil {
					t0 := time.Now()
					a, err := s.Admit(cctx, run, timedTokens)
					lat := time.Since(t0)
					if err == nil && !a.Admitted() {
						err = fmt.Errorf("bench: %s refused a timed admission: %s", im.Name, a.Reason)
					}
					if err == nil {
						err = s.Settle(cctx, run, a.SubID, "ok")
					}
					if err != nil {
						if cctx.Err() == nil {
							errs[c] = err
						}
						return
					}
					if t0.After(from) && time.Now().Before(to) {
						lats[c] = append(lats[c], lat)
					}
				}
			}(c)
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		all := slices.Concat(lats...)
		slices.Sort(all)
		res.Ops = len(all)
		res.PerSec = float64(len(all)) / window.Seconds()
		res.P50, res.P99 = percentile(all, 50), percentile(all, 99)
		if r, ok := s.(retrier); ok && len(all) > 0 {
			res.Retries = float64(r.Retries()-before) / float64(len(all))
		}
		return nil
	}()
	return res
}

// percentile of sorted durations (nearest rank below).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}
