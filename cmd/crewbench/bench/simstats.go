package bench

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// simStats is what a simulation counts. Concurrency: safe from any goroutine.
type simStats struct {
	mu         sync.Mutex
	calls      map[string][]time.Duration // method → latencies of answered calls
	rejections map[string]int             // "method: reason" → count
	errors     map[string]int             // transport errors by method
	admitted   int
	settled    map[string]int // outcome → count
	nested     int            // admissions requested by grandchildren
}

func newSimStats() *simStats {
	return &simStats{calls: map[string][]time.Duration{}, rejections: map[string]int{}, errors: map[string]int{},
		settled: map[string]int{}}
}

func (s *simStats) call(method string, d time.Duration) {
	s.mu.Lock()
	s.calls[method] = append(s.calls[method], d)
	s.mu.Unlock()
}

func (s *simStats) reject(method, reason string) {
	s.mu.Lock()
	s.rejections[method+": "+reason]++
	s.mu.Unlock()
}

func (s *simStats) fail(method string) {
	s.mu.Lock()
	s.errors[method]++
	s.mu.Unlock()
}

func (s *simStats) count(f func(s *simStats)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

// snapshot returns the number of answered calls and admissions so far.
func (s *simStats) snapshot() (calls, admitted, rejected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.calls {
		calls += len(l)
	}
	for _, n := range s.rejections {
		rejected += n
	}
	return calls, s.admitted, rejected
}

// write prints the summary.
func (s *simStats) write(w io.Writer, elapsed time.Duration, events int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	var all []time.Duration
	methods := make([]string, 0, len(s.calls))
	for m, l := range s.calls {
		total += len(l)
		all = append(all, l...)
		methods = append(methods, m)
	}
	sort.Strings(methods)
	fmt.Fprintf(w, "\nsummary after %s\n", elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  commands and queries answered: %d (%.0f/s)\n", total, float64(total)/elapsed.Seconds())
	fmt.Fprintf(w, "  events in the simulated runs:  %d\n", events)
	fmt.Fprintf(w, "  delegations admitted: %d (%d by grandchildren); settled: %s\n", s.admitted, s.nested,
		kv(s.settled))
	fmt.Fprintf(w, "  rejections by reason:\n")
	if len(s.rejections) == 0 {
		fmt.Fprintf(w, "    none\n")
	}
	for _, k := range sortedKeys(s.rejections) {
		fmt.Fprintf(w, "    %-48s %d\n", k, s.rejections[k])
	}
	if len(s.errors) > 0 {
		fmt.Fprintf(w, "  transport errors: %s\n", kv(s.errors))
	}
	fmt.Fprintf(w, "  latency (answered calls)      count      p50      p90      p99      max\n")
	row := func(name string, l []time.Duration) {
		l = slices.Clone(l)
		slices.Sort(l)
		fmt.Fprintf(w, "    %-26s %7d %8s %8s %8s %8s\n", name, len(l), fmtDur(percentile(l, 50)),
			fmtDur(percentile(l, 90)), fmtDur(percentile(l, 99)), fmtDur(percentile(l, 100)))
	}
	row("all", all)
	for _, m := range methods {
		row(m, s.calls[m])
	}
}

func sortedKeys(m map[string]int) []string {
	k := make([]string, 0, len(m))
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

func kv(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
