package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Goal is a ratio the project aims for at 64 clients on one run, reported,
// never asserted.
type Goal struct {
	Impl  string
	Ratio float64 // crewlog ops/s ÷ Impl ops/s must be ≥ Ratio
}

// Goals of the comparison (docs/benchmarks.md).
var Goals = []Goal{{"pebble", 0.8}, {"sqlite", 10}, {"jetstream", 3}, {"picrew", 50}}

// WriteMarkdown renders c: the machine, the checks, one table row per
// implementation and cell, and the goals.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	m := c.Machine
	fmt.Fprintf(&b, "Machine: %d × %s, %s, data directory on %s; %s %s/%s.\n", m.NProc, m.CPU, m.Kernel, m.FS, m.GoVersion, m.GOOS, m.Arch)
	fmt.Fprintf(&b, "Window %s per cell after a %s warm-up, %d round(s) (medians), %s in all.\n\n",
		c.Opts.Duration, c.Opts.Warmup, c.Opts.Rounds, c.Elapsed.Round(time.Second))
	for _, im := range c.Excluded {
		fmt.Fprintf(&b, "- **%s failed the correctness check and was not timed**: %s\n", im.Name, c.Checks[im.Name])
	}
	if len(c.Excluded) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| clients | runs | implementation | admissions/s | p50 | p99 | × crewlog | retries/op |\n")
	fmt.Fprintf(&b, "|---:|---|---|---:|---:|---:|---:|---:|\n")
	ref := map[Cell]Result{}
	for _, r := range c.Results {
		if r.Impl == reference && r.Err == nil {
			ref[r.Cell] = r
		}
	}
	for _, r := range c.Results {
		runs := "one"
		if r.Cell.OwnRuns {
			runs = "own"
		}
		label := r.Impl
		for _, im := range Impls {
			if im.Name == r.Impl {
				label = fmt.Sprintf("%s — %s", im.Name, im.Label)
			}
		}
		if r.Err != nil {
			fmt.Fprintf(&b, "| %d | %s | %s | error: %s | | | | |\n", r.Cell.Clients, runs, label, strings.ReplaceAll(r.Err.Error(), "|", "/"))
			continue
		}
		ratio := "–"
		if x, ok := ref[r.Cell]; ok && x.PerSec > 0 {
			ratio = fmt.Sprintf("%.2f", r.PerSec/x.PerSec)
		}
		retries := ""
		if r.Retries > 0 {
			retries = fmt.Sprintf("%.2f", r.Retries)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", r.Cell.Clients, runs, label,
			fmtRate(r.PerSec), fmtDur(r.P50), fmtDur(r.P99), ratio, retries)
	}
	if g := c.goals(); g != "" {
		b.WriteString("\n" + g)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// goals renders the goal table when the 64-clients-on-one-run cell ran.
func (c *Comparison) goals() string {
	cell := Cell{Clients: 64}
	rate := map[string]float64{}
	for _, r := range c.Results {
		if r.Cell == cell && r.Err == nil {
			rate[r.Impl] = r.PerSec
		}
	}
	if rate[reference] == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Goals at 64 clients on one run (crewlog in-process ÷ the other):\n\n| vs | goal | measured | met |\n|---|---:|---:|---|\n")
	for _, g := range Goals {
		if rate[g.Impl] == 0 {
			fmt.Fprintf(&b, "| %s | ≥ %gx | not timed | – |\n", g.Impl, g.Ratio)
			continue
		}
		x := rate[reference] / rate[g.Impl]
		met := "no"
		if x >= g.Ratio {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | ≥ %gx | %.2fx | %s |\n", g.Impl, g.Ratio, x, met)
	}
	return b.String()
}

func fmtRate(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 10:
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.2f", r)
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
