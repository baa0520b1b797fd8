package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Goal is a ratio the project aims for at 64 clients on one run, reported,
// never asserted: crewlog in-process ÷ the best of Impls must be ≥ Ratio.
type Goal struct {
	Impls []string
	Ratio float64
}

// Goals of the comparison (docs/benchmarks.md).
var Goals = []Goal{
	{[]string{"pebble"}, 0.8},
	{[]string{"sqlite-group", "jetstream-group"}, 1.5},
	{[]string{"picrew"}, 50},
}

// WriteMarkdown renders c: the command, the machine, the pre-checks, one
// table row per implementation and cell, and the goals.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	m := c.Machine
	if c.Opts.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`\n\n", c.Opts.Command)
	}
	fmt.Fprintf(&b, "Machine: %d × %s, %s, data directory on %s; %s %s/%s.\n", m.NProc, m.CPU, m.Kernel, m.FS,
		m.GoVersion, m.GOOS, m.Arch)
	b.WriteString(probesLine(c.Probes))
	load := "closed loop (each client starts its next operation when the last ended)"
	if c.Opts.Load.Rate > 0 {
		load = fmt.Sprintf("open loop at %s operations/s per cell (latency from the scheduled time)",
			fmtRate(c.Opts.Load.Rate))
	}
	fmt.Fprintf(&b, "Window %s per cell after a %s warm-up, %s, %d rounds, %s in all.\n\n",
		c.Opts.Duration, c.Opts.Warmup, load, c.Opts.Rounds, c.Elapsed.Round(time.Second))

	b.WriteString("Pre-check (sync calls counted under strace; a durable answer needs one):\n\n")
	b.WriteString("| implementation | sequential: syncs / durable answers | 8 clients: syncs / commits / durable " +
		"answers | passed |\n|---|---:|---:|---|\n")
	for _, im := range append(c.Timed[:len(c.Timed):len(c.Timed)], c.Excluded...) {
		r := c.Checks[im.Name]
		passed := "yes"
		if r.Why != "" {
			passed = "**no**: " + escapeCell(r.Why)
		} else if len(r.Notes) > 0 {
			passed = "yes; " + escapeCell(strings.Join(r.Notes, "; "))
		}
		cc := r.Concurrent
		commits := "–"
		if cc.Commits >= 0 {
			commits = fmt.Sprint(cc.Commits)
		}
		fmt.Fprintf(&b, "| %s | %s / %d | %s / %s / %d | %s |\n", im.Name, countOrDash(r.Sequential.Syncs),
			r.Sequential.Durable, countOrDash(cc.Syncs), commits, cc.Durable, passed)
	}
	b.WriteString("\n")

	ratio := "× crewlog | × socket"
	if c.Opts.Load.Rate > 0 {
		ratio = "p99 × crewlog's | p99 × socket's"
	}
	b.WriteString("| clients | runs | implementation | admissions/s | p50 | p99 | " + ratio +
		" | CPU/op | retries/op | host busy / steal |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range c.Summary {
		runs := "one"
		if s.Cell.OwnRuns {
			runs = "own"
		}
		label := s.Impl
		if im, ok := implByName(s.Impl); ok {
			label = fmt.Sprintf("%s — %s", im.Name, im.Label)
		}
		if s.Err != nil {
			fmt.Fprintf(&b, "| %d | %s | %s | error in %d of %d rounds: %s | | | | | | | |\n", s.Cell.Clients,
				runs, label, s.ErrRounds, s.ErrRounds+s.Rounds, escapeCell(s.Err.Error()))
			continue
		}
		retries := ""
		if s.Retry.Median > 0 {
			retries = fmt.Sprintf("%.2f", s.Retry.Median)
		}
		cpu := fmtDur(time.Duration(s.CPUPerOp.Median))
		if s.ClientCPUPerOp.Median > 0 {
			// The server's process, then the clients' (socket_server.go).
			cpu += fmt.Sprintf(" (+ %s client)", fmtDur(time.Duration(s.ClientCPUPerOp.Median)))
		}
		host := "–"
		if s.HostBusy.N > 0 {
			host = fmt.Sprintf("%.0f / %.0f %%", 100*s.HostBusy.Median, 100*s.HostSteal.Median)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Cell.Clients, runs, label,
			fmtRate(s.PerSec.Median), fmtDur(time.Duration(s.P50.Median)), fmtDur(time.Duration(s.P99.Median)),
			fmtSpread(s.VsCrewlog), fmtSpread(s.VsSocket), cpu, retries, host)
	}
	if g := c.goals(); g != "" && c.Opts.Load.Rate == 0 {
		b.WriteString("\n" + g)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func countOrDash(n int64) string {
	if n < 0 {
		return "–"
	}
	return fmt.Sprint(n)
}

func escapeCell(s string) string { return strings.ReplaceAll(s, "|", "/") }

// fmtSpread is "median (min–max)", or the value alone over one round.
func fmtSpread(s Spread) string {
	switch {
	case s.N == 0:
		return "–"
	case s.N == 1:
		return fmtRatio(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtRatio(s.Median), fmtRatio(s.Min), fmtRatio(s.Max))
}

// fmtRatio keeps two significant digits below 0.1.
func fmtRatio(v float64) string {
	if v < 0.1 && v > 0 {
		return fmt.Sprintf("%.2g", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// goals renders the goal table when the 64-clients-on-one-run cell ran:
// crewlog in-process and over its socket, each ÷ the best of the goal's
// implementations within each round.
func (c *Comparison) goals() string {
	cell := Cell{Clients: 64}
	if s := c.RatioOver(reference, []string{reference}, cell); s.N == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Headline ratios at 64 clients on one run, crewlog ÷ the other (within each round; median and " +
		"range over rounds):\n\n")
	b.WriteString("| crewlog ÷ | in-process | over its socket |\n|---|---:|---:|\n")
	for _, im := range c.Timed {
		if im.Name == reference || im.Name == "socket" {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", im.Name, fmtSpread(c.RatioOver(reference, []string{im.Name}, cell)),
			fmtSpread(c.RatioOver("socket", []string{im.Name}, cell)))
	}
	b.WriteString("\nGoals at 64 clients on one run (ratios within each round; median and range over rounds):\n\n")
	b.WriteString("| crewlog ÷ | goal | in-process | met | over its socket |\n|---|---:|---:|---|---:|\n")
	for _, g := range c.Goals() {
		fmt.Fprintf(&b, "| %s | ≥ %g× | %s | %s | %s |\n", g.Name, g.Goal.Ratio, fmtSpread(g.InProcess), g.Met,
			fmtSpread(g.Socket))
	}
	return b.String()
}

// GoalResult is one goal measured.
type GoalResult struct {
	Goal              Goal
	Name              string // "pebble", "best of sqlite-group, jetstream-group"
	InProcess, Socket Spread
	Met               string // yes, no, or – when not measured
}

// Goals measures every goal at 64 clients on one run.
func (c *Comparison) Goals() []GoalResult {
	cell := Cell{Clients: 64}
	var out []GoalResult
	for _, g := range Goals {
		r := GoalResult{Goal: g, Name: g.Impls[0]}
		if len(g.Impls) > 1 {
			r.Name = "best of " + strings.Join(g.Impls, ", ")
		}
		r.InProcess = c.RatioOver(reference, g.Impls, cell)
		r.Socket = c.RatioOver("socket", g.Impls, cell)
		switch {
		case r.InProcess.N == 0:
			r.Met = "–"
		case r.InProcess.Median >= g.Ratio:
			r.Met = "yes"
		default:
			r.Met = "no"
		}
		out = append(out, r)
	}
	return out
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
