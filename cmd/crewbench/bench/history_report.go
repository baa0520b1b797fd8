package bench

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// HistoryReport is one `crewbench history`: the store written (Written is
// zero when an existing store was measured) and crewd measured on it.
type HistoryReport struct {
	Events  int64
	Runs    int
	Active  int
	Written HistoryStats
	Measure HistoryMeasure
}

// WriteMarkdown prints the report: a summary line, a table of start-up and
// memory, and one of the queries' latencies.
func (r *HistoryReport) WriteMarkdown(w io.Writer) error {
	m := r.Measure
	fmt.Fprintf(w, "crewbench history: %d events (head %d) in %d runs, %d active; store %s; snapshot at %d\n",
		r.Events, m.Head, r.Runs, r.Active, fmtBytes(m.StoreBytes), m.SnapshotAt)
	if st := r.Written; st.Elapsed > 0 {
		fmt.Fprintf(w, "written in %s: %.0f events/s, %d commands in %d groups (mean group %.1f)\n",
			st.Elapsed.Round(time.Second), float64(st.Head)/st.Elapsed.Seconds(), st.Commands, st.Groups,
			float64(st.Commands)/float64(max(st.Groups, 1)))
	}
	mc := m.Machine
	fmt.Fprintf(w, "machine: %d × %s, %s, %s, %s\n\n", mc.NProc, mc.CPU, mc.Kernel, mc.FS, mc.GoVersion)
	fmt.Fprintf(w, "| crewd | value |\n|---|---|\n")
	fmt.Fprintf(w, "| ready (exec → first ping), median of %d starts | %s (%s) |\n", len(m.Ready),
		fmtDur(medianDuration(m.Ready)), joinDurs(m.Ready))
	if len(m.ReadyCPU) > 0 {
		fmt.Fprintf(w, "| crewd's CPU time once ready (user and system), median | %s (%s) |\n",
			fmtDur(medianDuration(m.ReadyCPU)), joinDurs(m.ReadyCPU))
	}
	rss := slices.Clone(m.RSS)
	slices.Sort(rss)
	if len(rss) > 0 {
		fmt.Fprintf(w, "| RSS once ready, median | %s |\n", fmtBytes(rss[len(rss)/2]))
	}
	fmt.Fprintf(w, "| active state the starts loaded (read after them, before the queries and the writes) | %s |\n",
		m.Active)
	fmt.Fprintf(w, "| events the starts recorded | %d |\n", m.HeadAfterStarts-m.Head)
	fmt.Fprintf(w, "| peak RSS (VmHWM) after start and the queries | %s |\n", fmtBytes(m.PeakServing))
	snap := "no new snapshot"
	if m.SnapshotAfter > m.Active.SnapshotAt {
		snap = fmt.Sprintf("snapshot at %d", m.SnapshotAfter)
	}
	fmt.Fprintf(w, "| peak RSS (VmHWM) after writing %d events over the socket (%s) | %s |\n\n", m.Wrote, snap,
		fmtBytes(m.PeakWriting))
	fmt.Fprintf(w, "| query of a finished run (admin, over the socket) | calls | spread: p50 | p99 | max | crewd "+
		"CPU per call | dashboard: p50 | p99 | max |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, q := range m.Spread {
		d := m.Dashboard[i]
		cpu := "–"
		if q.CPU > 0 {
			cpu = fmtDur(q.CPU)
		}
		fmt.Fprintf(w, "| `%s` | %d | %s | %s | %s | %s | %s | %s | %s |\n", q.Method, q.Calls, fmtDur(q.P50),
			fmtDur(q.P99), fmtDur(q.Max), cpu, fmtDur(d.P50), fmtDur(d.P99), fmtDur(d.Max))
	}
	fmt.Fprintf(w, "\nspread: each query's calls go round %d finished runs; dashboard: all the queries on one run, "+
		"then the next;\ncrewd CPU per call: its user and system time over a query's calls in the spread order "+
		"(/proc), which a loaded\nmachine moves far less than the latencies\n", sampledRuns(r.Runs, r.Active))
	return nil
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return percentile(s, 50)
}

func joinDurs(ds []time.Duration) string {
	out := ""
	for i, d := range ds {
		if i > 0 {
			out += ", "
		}
		out += fmtDur(d)
	}
	return out
}
