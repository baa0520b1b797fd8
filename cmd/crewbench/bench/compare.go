package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// CompareOptions configure Compare. Zero fields mean defaults.
type CompareOptions struct {
	Duration time.Duration // measured window per cell (default 5 s)
	Warmup   time.Duration // before the window, not counted (default min(500 ms, Duration/4))
	Clients  []int         // default 1, 8, 64
	Only     []string      // implementation names; default all
	Dir      string        // parent of every store (default a temporary directory, removed after)
	Rounds   int           // interleaved rounds; the table shows medians (default 1)
	Progress io.Writer     // one line per step (default discard)
}

// Comparison is the outcome of Compare.
type Comparison struct {
	Machine  Machine
	Opts     CompareOptions
	Checks   map[string]string // implementation → "" (passed) or why it failed
	Results  []Result          // medians over rounds, per implementation and cell
	Elapsed  time.Duration
	Timed    []Impl
	Excluded []Impl
}

// Compare checks every selected implementation against crewlog, then times
// the ones that passed: for each cell (clients × one run / own runs) every
// implementation runs back to back, so drift in the machine's noise hits them
// alike, and ratios are taken within the cell.
func Compare(ctx context.Context, o CompareOptions) (*Comparison, error) {
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.Warmup <= 0 {
		o.Warmup = min(500*time.Millisecond, o.Duration/4)
	}
	if len(o.Clients) == 0 {
		o.Clients = []int{1, 8, 64}
	}
	if o.Rounds <= 0 {
		o.Rounds = 1
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	for _, c := range o.Clients {
		if c < 1 || c > timedSlots {
			return nil, fmt.Errorf("bench: clients must be in 1..%d, got %d", timedSlots, c)
		}
	}
	impls, err := selectImpls(o.Only)
	if err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "crewbench-compare-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	began := time.Now()
	cmp := &Comparison{Machine: describeMachine(dir), Opts: o, Checks: map[string]string{}}

	ref, err := checkOne(ctx, Impls[slices.IndexFunc(Impls, func(i Impl) bool { return i.Name == reference })], dir)
	if err != nil {
		return nil, fmt.Errorf("bench: the reference check failed: %w", err)
	}
	for _, im := range impls {
		// The reference is what the others are compared with: its own run
		// above is its check.
		got, err := ref, error(nil)
		if im.Name != reference {
			got, err = checkOne(ctx, im, dir)
		}
		why := ""
		switch {
		case err != nil:
			why = err.Error()
		default:
			why = diffCheck(ref, got)
		}
		cmp.Checks[im.Name] = why
		if why == "" {
			cmp.Timed = append(cmp.Timed, im)
			fmt.Fprintf(o.Progress, "check %-9s ok: %v\n", im.Name, got.Answers)
		} else {
			cmp.Excluded = append(cmp.Excluded, im)
			fmt.Fprintf(o.Progress, "check %-9s FAILED, not timed: %s\n", im.Name, why)
		}
	}

	var cells []Cell
	for _, c := range o.Clients {
		cells = append(cells, Cell{Clients: c}, Cell{Clients: c, OwnRuns: true})
	}
	runs := map[string][]Result{}
	key := func(im string, c Cell) string { return fmt.Sprintf("%s/%d/%v", im, c.Clients, c.OwnRuns) }
	n := 0
	for round := 0; round < o.Rounds; round++ {
		for _, cell := range cells {
			for _, im := range cmp.Timed {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				n++
				d := filepath.Join(dir, fmt.Sprintf("cell-%d", n))
				r := runCell(ctx, im, d, cell, o.Warmup, o.Duration)
				if err := os.RemoveAll(d); err != nil && r.Err == nil {
					r.Err = err
				}
				runs[key(im.Name, cell)] = append(runs[key(im.Name, cell)], r)
				if r.Err != nil {
					fmt.Fprintf(o.Progress, "round %d  %-22s %-9s ERROR %v\n", round+1, cell, im.Name, r.Err)
				} else {
					fmt.Fprintf(o.Progress, "round %d  %-22s %-9s %8.0f ops/s  p50 %-9s p99 %s\n",
						round+1, cell, im.Name, r.PerSec, fmtDur(r.P50), fmtDur(r.P99))
				}
			}
		}
	}
	for _, cell := range cells {
		for _, im := range cmp.Timed {
			cmp.Results = append(cmp.Results, median(runs[key(im.Name, cell)]))
		}
	}
	cmp.Elapsed = time.Since(began)
	return cmp, nil
}

func checkOne(ctx context.Context, im Impl, dir string) (CheckResult, error) {
	d := filepath.Join(dir, "check-"+im.Name)
	res, err := runCheck(ctx, im, d)
	return res, errors.Join(err, os.RemoveAll(d))
}

// median of each measure over rounds; an error in any round is the result.
func median(rs []Result) Result {
	out := rs[0]
	for _, r := range rs {
		if r.Err != nil {
			out.Err = r.Err
			return out
		}
	}
	pick := func(get func(Result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out.PerSec = pick(func(r Result) float64 { return r.PerSec })
	out.P50 = time.Duration(pick(func(r Result) float64 { return float64(r.P50) }))
	out.P99 = time.Duration(pick(func(r Result) float64 { return float64(r.P99) }))
	out.Retries = pick(func(r Result) float64 { return r.Retries })
	out.Ops = int(pick(func(r Result) float64 { return float64(r.Ops) }))
	return out
}
