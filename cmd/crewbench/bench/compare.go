package bench

import (
	"context"
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
	Only     []string      // implementation names; default the Default ones
	Dir      string        // parent of every store (default a temporary directory, removed after)
	Rounds   int           // rounds of the whole matrix (default 3)
	Load     Load          // closed loop unless Load.Rate > 0
	Profile  ProfileOptions
	// SyncCount is how the pre-check counts sync calls (default
	// straceCounter; tests substitute their own).
	SyncCount SyncCounter
	Progress  io.Writer // one line per step (default discard)
	Command   string    // the command line, for the report
}

// Comparison is the outcome of Compare.
type Comparison struct {
	Machine  Machine
	Opts     CompareOptions
	Checks   map[string]PrecheckReport // implementation → its pre-check
	Rounds   [][]Result                // per round, every timed implementation in every cell
	Probes   []HostProbe               // the host before the rounds, then after each
	Summary  []Summary                 // per implementation and cell, in table order
	Elapsed  time.Duration
	Timed    []Impl
	Excluded []Impl
}

// Compare pre-checks every selected implementation, then times the ones
// that passed: Rounds times the whole matrix of cells; within a cell every
// implementation runs back to back on a fresh directory, in an order
// rotated from round to round and cell to cell, so drift in the machine's
// noise and the position in the sequence hit them alike. Ratios are taken
// within a round and cell, then summarised over rounds (median and range).
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
		o.Rounds = 3
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Profile.Impl == "" {
		o.Profile.Impl = reference
	}
	if o.SyncCount == nil {
		o.SyncCount = straceCounter{}
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
	cmp := &Comparison{Machine: describeMachine(dir), Opts: o, Checks: map[string]PrecheckReport{}}

	refImpl, _ := implByName(reference)
	ref, err := precheck(ctx, refImpl, dir, o.SyncCount, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: the reference pre-check failed: %w", err)
	}
	if ref.Why != "" {
		return nil, fmt.Errorf("bench: the reference pre-check failed: %s", ref.Why)
	}
	for _, im := range impls {
		rep := ref
		if im.Name != reference {
			if rep, err = precheck(ctx, im, dir, o.SyncCount, &ref); err != nil {
				rep.Why = err.Error()
			}
		}
		cmp.Checks[im.Name] = rep
		if rep.Why == "" {
			cmp.Timed = append(cmp.Timed, im)
			fmt.Fprintf(o.Progress, "check %-15s ok: %s\n", im.Name, rep)
		} else {
			cmp.Excluded = append(cmp.Excluded, im)
			fmt.Fprintf(o.Progress, "check %-15s FAILED, not timed: %s\n", im.Name, rep.Why)
		}
	}

	var cells []Cell
	for _, c := range o.Clients {
		cells = append(cells, Cell{Clients: c}, Cell{Clients: c, OwnRuns: true})
	}
	n := 0
	cmp.Probes = append(cmp.Probes, probeHost(dir))
	for round := 0; round < o.Rounds; round++ {
		var results []Result
		for ci, cell := range cells {
			for _, im := range rotate(cmp.Timed, round+ci) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				n++
				d := filepath.Join(dir, fmt.Sprintf("cell-%d", n))
				var profile cellProfiling
				if o.Profile.Prefix != "" && im.Name == o.Profile.Impl {
					profile = cellProfiling{prefix: fmt.Sprintf("%s-%s-%d", o.Profile.Prefix, im.Name, n),
						trace: o.Profile.Trace}
				}
				r := runCell(ctx, im, d, cell, o.Warmup, o.Duration, o.Load, profile, o.Progress)
				if err := os.RemoveAll(d); err != nil && r.Err == nil {
					r.Err = err
				}
				results = append(results, r)
				if r.Err != nil {
					fmt.Fprintf(o.Progress, "round %d  %-22s %-15s ERROR %v\n", round+1, cell, im.Name, r.Err)
				} else {
					fmt.Fprintf(o.Progress, "round %d  %-22s %-15s %8.0f ops/s  p50 %-9s p99 %s\n",
						round+1, cell, im.Name, r.PerSec, fmtDur(r.P50), fmtDur(r.P99))
					if r.Groups != nil {
						fmt.Fprintf(o.Progress, "         %-22s %-15s %s\n", "", "", r.Groups)
					}
					if r.Storage != nil {
						fmt.Fprintf(o.Progress, "         %-22s %-15s %s\n", "", "", r.Storage)
					}
					if r.Host != nil {
						fmt.Fprintf(o.Progress, "         %-22s %-15s %s\n", "", "", r.Host)
					}
				}
			}
		}
		cmp.Rounds = append(cmp.Rounds, results)
		cmp.Probes = append(cmp.Probes, probeHost(dir))
	}
	for _, cell := range cells {
		for _, im := range cmp.Timed {
			cmp.Summary = append(cmp.Summary, cmp.summarise(im.Name, cell))
		}
	}
	cmp.Elapsed = time.Since(began)
	return cmp, nil
}

// rotate returns impls starting at index k mod len.
func rotate(impls []Impl, k int) []Impl {
	if len(impls) == 0 {
		return nil
	}
	k %= len(impls)
	return slices.Concat(impls[k:], impls[:k])
}

// Spread is a ratio over rounds: its median and range.
type Spread struct {
	Median, Min, Max float64
	N                int // rounds it was measured in (0: never)
}

func spreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return Spread{Median: medianOf(s), Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// medianOf a sorted slice: the middle value, or the mean of the middle two.
func medianOf(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Summary is one implementation in one cell over all rounds.
type Summary struct {
	Impl                    string
	Cell                    Cell
	PerSec, P50, P99, Retry Spread // each measure's own median and range over rounds
	CPUPerOp                Spread // nanoseconds of CPU per operation (the server's, for a server of its own)
	ClientCPUPerOp          Spread // nanoseconds of the clients' CPU per operation, when counted apart
	HostBusy, HostSteal     Spread // the machine's busy and stolen shares of its CPU time (HostCPU), when read
	// VsCrewlog and VsSocket are, per round, this ÷ crewlog in-process and
	// this ÷ crewlog over its socket: of admissions/s in the closed loop,
	// of p99 in the open loop.
	VsCrewlog, VsSocket Spread
	Err                 error // the first error of any round
	// ErrRounds and Rounds count the rounds that failed and those measured.
	ErrRounds, Rounds int
}

// result finds im's result in cell in one round.
func findResult(rs []Result, im string, cell Cell) (Result, bool) {
	for _, r := range rs {
		if r.Impl == im && r.Cell == cell {
			return r, true
		}
	}
	return Result{}, false
}

func (c *Comparison) summarise(im string, cell Cell) Summary {
	s := Summary{Impl: im, Cell: cell}
	var rate, p50, p99, retry, cpu, clientCPU, busy, steal, vsRef, vsSock []float64
	for _, rs := range c.Rounds {
		r, ok := findResult(rs, im, cell)
		if !ok {
			continue
		}
		if r.Err != nil {
			if s.Err == nil {
				s.Err = r.Err
			}
			s.ErrRounds++
			continue
		}
		rate, p50, p99, retry = append(rate, r.PerSec), append(p50, float64(r.P50)), append(p99, float64(r.P99)),
			append(retry, r.Retries)
		cpu = append(cpu, float64(r.CPUPerOp))
		if r.ClientCPUPerOp > 0 {
			clientCPU = append(clientCPU, float64(r.ClientCPUPerOp))
		}
		if r.Host != nil {
			busy, steal = append(busy, r.Host.Busy), append(steal, r.Host.Steal)
		}
		// The closed loop compares rates; the open loop offers every
		// implementation the same rate and compares p99s.
		ratio := func(x Result) (float64, bool) {
			if c.Opts.Load.Rate > 0 {
				return float64(r.P99) / float64(x.P99), x.Err == nil && x.P99 > 0
			}
			return r.PerSec / x.PerSec, x.Err == nil && x.PerSec > 0
		}
		if x, ok := findResult(rs, reference, cell); ok {
			if v, ok := ratio(x); ok {
				vsRef = append(vsRef, v)
			}
		}
		if x, ok := findResult(rs, "socket", cell); ok {
			if v, ok := ratio(x); ok {
				vsSock = append(vsSock, v)
			}
		}
	}
	s.PerSec, s.P50, s.P99, s.Retry, s.CPUPerOp = spreadOf(rate), spreadOf(p50), spreadOf(p99), spreadOf(retry),
		spreadOf(cpu)
	s.VsCrewlog, s.VsSocket, s.ClientCPUPerOp = spreadOf(vsRef), spreadOf(vsSock), spreadOf(clientCPU)
	s.HostBusy, s.HostSteal = spreadOf(busy), spreadOf(steal)
	s.Rounds = len(rate)
	return s
}

// RatioOver is, per round, a ÷ the best of bs (the highest rate among bs in
// that round) in cell, summarised over rounds. A round counts only when a
// and every one of bs were measured in it.
func (c *Comparison) RatioOver(a string, bs []string, cell Cell) Spread {
	var v []float64
	for _, rs := range c.Rounds {
		x, ok := findResult(rs, a, cell)
		if !ok || x.Err != nil {
			continue
		}
		// NB: a round where one of bs failed would take the best of the
		// others: against a slower store alone, a flattered ratio.
		best := 0.0
		for _, b := range bs {
			y, ok := findResult(rs, b, cell)
			if !ok || y.Err != nil || y.PerSec <= 0 {
				best = 0
				break
			}
			best = max(best, y.PerSec)
		}
		if best > 0 {
			v = append(v, x.PerSec/best)
		}
	}
	return spreadOf(v)
}
