package bench

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
)

// The correctness check: the same sequential script on every
// implementation must leave the same events, admissions and spend per run as
// crewlog does, so no alternative is timed doing less work. Sequential,
// because only one order of decisions gives one expected state; it keeps one
// run's delegations in flight at a time, so crewlog's daemon-wide slot pool
// and the alternatives' per-run pools decide alike.
const (
	checkRuns     = 4
	checkAttempts = 50 // per run: 200 admissions in all
	checkSlots    = 2
	checkBudget   = 12_000
)

// checkTokens is the budgetTokens of run i's requests, so each run runs out
// of budget after a different number of admissions.
func checkTokens(run int) int64 { return 1000 + 250*int64(run) }

// CheckResult is the outcome of the check of one implementation.
type CheckResult struct {
	Final   map[string]Final
	Answers map[string]int // Admit answers by reason ("admitted" for admissions)
}

// runCheck runs the check's script on a fresh store in dir.
func runCheck(ctx context.Context, im Impl, dir string) (CheckResult, error) {
	res := CheckResult{Answers: map[string]int{}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	spec := Spec{Budget: checkBudget, Slots: checkSlots, Clients: 1}
	s, err := im.open(dir, spec)
	if err != nil {
		return res, err
	}
	defer s.Close()
	runs := make([]string, checkRuns)
	for i := range runs {
		runs[i] = fmt.Sprintf("check-%d", i)
	}
	if err := s.Setup(ctx, runs, spec); err != nil {
		return res, err
	}
	settled := 0
	settle := func(run, sub string) error {
		settled++
		return s.Settle(ctx, run, sub, outcomes[settled%len(outcomes)])
	}
	for r, run := range runs {
		var inFlight []string
		for i := 0; i < checkAttempts; i++ {
			if i%3 == 2 && len(inFlight) > 0 {
				if err := settle(run, inFlight[0]); err != nil {
					return res, err
				}
				inFlight = inFlight[1:]
			}
			a, err := s.Admit(ctx, run, checkTokens(r))
			if err != nil {
				return res, err
			}
			if a.Admitted() {
				res.Answers["admitted"]++
				inFlight = append(inFlight, a.SubID)
			} else {
				res.Answers[a.Reason]++
			}
		}
		for _, sub := range inFlight {
			if err := settle(run, sub); err != nil {
				return res, err
			}
		}
	}
	res.Final, err = s.Final(ctx)
	return res, err
}

// diffCheck describes how got differs from want ("" when equal).
func diffCheck(want, got CheckResult) string {
	var d []string
	if !reflect.DeepEqual(want.Answers, got.Answers) {
		d = append(d, fmt.Sprintf("answers %v, crewlog %v", got.Answers, want.Answers))
	}
	runs := map[string]bool{}
	for r := range want.Final {
		runs[r] = true
	}
	for r := range got.Final {
		runs[r] = true
	}
	names := make([]string, 0, len(runs))
	for r := range runs {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		w, g := want.Final[r], got.Final[r]
		if !reflect.DeepEqual(w, g) {
			d = append(d, fmt.Sprintf("run %s: admitted %d spent %d events %v rejected %v; crewlog: admitted %d spent %d events %v rejected %v",
				r, g.Admitted, g.Spent, g.Events, g.Rejected, w.Admitted, w.Spent, w.Events, w.Rejected))
		}
	}
	return strings.Join(d, "; ")
}
