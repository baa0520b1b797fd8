package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// The pre-check: before anything is timed, every implementation runs two
// scripts on a fresh store and must leave, read back from its own storage,
// what the workload wrote — or it is reported and not timed, so no
// alternative is measured doing less work.
//
//   - sequential: 200 admissions over 4 runs, 2 slots per run, budgets that
//     run out, settlements cycling every outcome. One order of decisions
//     gives one expected state: it must equal crewlog's, run for run. It
//     keeps one run's delegations in flight at a time, so crewlog's
//     daemon-wide slot pool and the alternatives' per-run pools decide alike.
//   - concurrent: 8 clients on one run with 3 slots, each holding its
//     delegation across its next request, until the budget runs out, so
//     requests are grouped, contend and are refused. The outcome depends on
//     the interleaving; the invariants do not (see checkConcurrent).
//
// In both, every payload must read back as written, a decision's events
// and a settlement's must sit next to each other in the run's order, and
// the sync calls of the phase (fsync and fdatasync, counted by a
// SyncCounter outside the store) must be at least one per operation in the
// sequential phase, where every group is one operation, and at least one
// per group the store says it committed in the concurrent one.
const (
	checkRuns     = 4
	checkAttempts = 50 // per run: 200 admissions in all
	checkSlots    = 2
	checkBudget   = 12_000

	concClients  = 8
	concAttempts = 20 // per client
	concSlots    = 3
	concTokens   = 1000
	concBudget   = 24 * concTokens
)

// checkTokens is the budgetTokens of run i's requests, so each run runs out
// of budget after a different number of admissions.
func checkTokens(run int) int64 { return 1000 + 250*int64(run) }

// Phases of the pre-check.
const (
	phaseSequential = "sequential"
	phaseConcurrent = "concurrent"
)

// CheckResult is what one phase of the pre-check observed.
type CheckResult struct {
	Final   map[string]Final
	Answers map[string]int // Admit answers by reason ("admitted" for admissions)
	Settled map[string]int // settlements by outcome
}

// PhaseResult is one phase of one implementation's pre-check.
type PhaseResult struct {
	Check CheckResult
	// Durable counts the answers that must be durable when given:
	// admissions and settlements.
	Durable int64
	// Commits is what the store says it committed durably in the phase
	// (groups, transactions, messages, file writes); -1 when it does not say.
	Commits int64
	// SyncShare is how many of its commits the store may hand to the disk
	// before the first is synced, which one sync then covers together: 1
	// but for a pipelined writer (crewlog's engine, 2).
	SyncShare int64
	// Syncs counts the fsync and fdatasync calls of the phase; -1 when not
	// counted.
	Syncs int64
}

// committer is a store that counts its durable commits.
type committer interface{ Commits() int64 }

// syncSharer is a committer whose commits may share a sync (PhaseResult.SyncShare).
type syncSharer interface{ SyncShare() int64 }

// runPhase runs one phase of the pre-check on a fresh store in dir. mark is
// called right before the phase's workload and right after it (the sync
// counter's window).
func runPhase(ctx context.Context, im Impl, phase, dir string, mark func(begin bool)) (PhaseResult, error) {
	res := PhaseResult{Commits: -1, Syncs: -1, SyncShare: 1,
		Check: CheckResult{Answers: map[string]int{}, Settled: map[string]int{}}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	var runs []string
	var spec Spec
	switch phase {
	case phaseSequential:
		spec = Spec{Budget: checkBudget, Slots: checkSlots, Clients: 1}
		for i := 0; i < checkRuns; i++ {
			runs = append(runs, fmt.Sprintf("check-%d", i))
		}
	case phaseConcurrent:
		spec = Spec{Budget: concBudget, Slots: concSlots, Clients: concClients, OneParent: true}
		runs = []string{"conc-0"}
	default:
		return res, fmt.Errorf("bench: no pre-check phase %q", phase)
	}
	s, err := im.open(dir, spec)
	if err != nil {
		return res, err
	}
	defer s.Close()
	if err := s.Setup(ctx, runs, spec); err != nil {
		return res, err
	}
	var before int64
	c, counts := s.(committer)
	if counts {
		before = c.Commits()
	}
	if sh, ok := s.(syncSharer); ok {
		res.SyncShare = sh.SyncShare()
	}
	mark(true)
	if phase == phaseSequential {
		err = sequentialScript(ctx, s, runs, &res.Check)
	} else {
		err = concurrentScript(ctx, s, runs[0], &res.Check)
	}
	mark(false)
	if err != nil {
		return res, err
	}
	if counts {
		res.Commits = c.Commits() - before
	}
	for _, n := range res.Check.Settled {
		res.Durable += int64(n)
	}
	res.Durable += int64(res.Check.Answers["admitted"])
	res.Check.Final, err = s.Final(ctx)
	return res, err
}

func sequentialScript(ctx context.Context, s Store, runs []string, res *CheckResult) error {
	settled := 0
	settle := func(run, sub string) error {
		settled++
		o := outcomes[settled%len(outcomes)]
		res.Settled[o]++
		return s.Settle(ctx, run, sub, o)
	}
	for r, run := range runs {
		var inFlight []string
		for i := 0; i < checkAttempts; i++ {
			if i%3 == 2 && len(inFlight) > 0 {
				if err := settle(run, inFlight[0]); err != nil {
					return err
				}
				inFlight = inFlight[1:]
			}
			a, err := s.Admit(ctx, run, checkTokens(r))
			if err != nil {
				return err
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
				return err
			}
		}
	}
	return nil
}

// concurrentScript: concClients clients on run, each asking concAttempts
// times and settling the delegation it holds after its next request.
func concurrentScript(ctx context.Context, s Store, run string, res *CheckResult) error {
	var mu sync.Mutex
	errs := make([]error, concClients)
	var wg sync.WaitGroup
	for c := 0; c < concClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			errs[c] = func() error {
				held := ""
				settle := func(i int) error {
					o := outcomes[(c+i)%len(outcomes)]
					mu.Lock()
					res.Settled[o]++
					mu.Unlock()
					return s.Settle(ctx, run, held, o)
				}
				for i := 0; i < concAttempts; i++ {
					a, err := s.Admit(ctx, run, concTokens)
					if err != nil {
						return err
					}
					mu.Lock()
					if a.Admitted() {
						res.Answers["admitted"]++
					} else {
						res.Answers[a.Reason]++
					}
					mu.Unlock()
					if held != "" {
						if err := settle(i); err != nil {
							return err
						}
					}
					held = a.SubID
				}
				if held != "" {
					return settle(concAttempts)
				}
				return nil
			}()
		}(c)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkConcurrent lists what is wrong with a concurrent phase: the answers
// the clients got must be what the store persisted, the policy must hold in
// the persisted order (never more than the slots in flight, never more
// spent than the budget), and every admission must be settled once.
// interleaved skips the checks that need a decision's events in decision
// order (pi-crew's are not, D§3.5).
func checkConcurrent(r CheckResult, interleaved bool) []string {
	var bad []string
	f, ok := r.Final["conc-0"]
	if !ok {
		return []string{"no events read back"}
	}
	rejected := 0
	for _, n := range f.Rejected {
		rejected += n
	}
	settled := 0
	for _, n := range r.Settled {
		settled += n
	}
	wantRejected := map[string]int{}
	for k, n := range r.Answers {
		if k != "admitted" {
			wantRejected[k] = n
		}
	}
	expect := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	expect(f.Admitted == r.Answers["admitted"], "%d admissions answered, %d persisted",
		r.Answers["admitted"], f.Admitted)
	expect(reflect.DeepEqual(f.Rejected, wantRejected), "rejections answered %v, persisted %v",
		wantRejected, f.Rejected)
	expect(f.Events["delegate.requested"] == f.Admitted+rejected, "%d requests persisted for %d decisions",
		f.Events["delegate.requested"], f.Admitted+rejected)
	expect(f.Events["budget.reserved"] == f.Admitted && f.Spent == int64(f.Admitted)*concTokens,
		"%d reservations of %d tokens for %d admissions", f.Events["budget.reserved"], f.Spent, f.Admitted)
	expect(f.Spent <= concBudget, "spent %d of a budget of %d", f.Spent, concBudget)
	expect(f.Events["mailbox.appended"] == settled, "%d results delivered for %d settlements",
		f.Events["mailbox.appended"], settled)
	for o, n := range r.Settled {
		typ := terminalType(o)
		expect(f.Events[typ] == n, "%d %s events for %d settlements %s", f.Events[typ], typ, n, o)
	}
	expect(settled == f.Admitted, "%d settlements for %d admissions", settled, f.Admitted)
	expect(f.Unmatched == 0, "%d events of a delegation out of order or missing", f.Unmatched)
	expect(len(f.Bad) == 0, "payloads not as written: %s", strings.Join(f.Bad, "; "))
	if !interleaved {
		expect(f.Split == 0, "%d decisions or settlements whose events are not together", f.Split)
		expect(f.MaxInFlight <= concSlots, "%d delegations in flight with %d slots", f.MaxInFlight, concSlots)
	}
	return bad
}

func terminalType(outcome string) string {
	switch outcome {
	case "ok":
		return "delegate.completed"
	case "failed":
		return "delegate.failed"
	case "timed_out":
		return "delegate.timed_out"
	}
	return "delegate.cancelled"
}

// checkSyncs lists what is wrong with a phase's sync calls.
func checkSyncs(phase string, p PhaseResult) []string {
	// NB: one operation at a time leaves a pipelined writer nothing to
	// hand the log while a sync runs: in the sequential phase no commit
	// shares a sync, whatever the store's SyncShare.
	share := max(p.SyncShare, 1)
	if phase == phaseSequential {
		share = 1
	}
	switch {
	case p.Syncs < 0:
		return nil // not counted: reported, not refused
	case phase == phaseSequential && p.Syncs < p.Durable:
		return []string{fmt.Sprintf("%d sync calls for %d durable answers given one at a time", p.Syncs, p.Durable)}
	case p.Commits >= 0 && p.Syncs*share < p.Commits:
		return []string{fmt.Sprintf("%d sync calls for %d commits (at most %d a sync)", p.Syncs, p.Commits, share)}
	case p.Durable > 0 && p.Syncs == 0:
		return []string{fmt.Sprintf("no sync call for %d durable answers", p.Durable)}
	}
	return nil
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
			d = append(d, fmt.Sprintf("run %s: %+v; crewlog: %+v", r, g, w))
		}
	}
	return strings.Join(d, "; ")
}

// PrecheckReport is one implementation's pre-check.
type PrecheckReport struct {
	Sequential, Concurrent PhaseResult
	Why                    string // why it is not timed; "" when it passed
	Notes                  []string
}

func (r PrecheckReport) String() string {
	s, c := r.Sequential, r.Concurrent
	out := fmt.Sprintf("sequential %v, %s; 8 clients %v, %s", s.Check.Answers, syncsOf(s),
		c.Check.Answers, syncsOf(c))
	if len(r.Notes) > 0 {
		out += " (" + strings.Join(r.Notes, "; ") + ")"
	}
	return out
}

func syncsOf(p PhaseResult) string {
	if p.Syncs < 0 {
		return "syncs not counted"
	}
	s := fmt.Sprintf("%d syncs / %d durable answers", p.Syncs, p.Durable)
	if p.Commits >= 0 {
		s += fmt.Sprintf(" in %d commits", p.Commits)
	}
	return s
}

// precheck runs both phases of im (through sc, which counts their sync
// calls) and judges them; ref is crewlog's report, nil when im is crewlog.
func precheck(ctx context.Context, im Impl, dir string, sc SyncCounter, ref *PrecheckReport) (PrecheckReport, error) {
	var rep PrecheckReport
	var err error
	for _, ph := range []struct {
		name string
		into *PhaseResult
	}{{phaseSequential, &rep.Sequential}, {phaseConcurrent, &rep.Concurrent}} {
		d := filepath.Join(dir, "check-"+im.Name+"-"+ph.name)
		*ph.into, err = sc.Run(ctx, im, ph.name, d)
		if rerr := os.RemoveAll(d); err == nil {
			err = rerr
		}
		if err != nil {
			return rep, fmt.Errorf("%s phase: %w", ph.name, err)
		}
	}
	var why []string
	if ref != nil {
		if d := diffCheck(ref.Sequential.Check, rep.Sequential.Check); d != "" {
			why = append(why, "sequential: "+d)
		}
	} else {
		// The scripts must exercise what they check: on the reference, the
		// 8 clients meet both the slot cap and the budget.
		if a := rep.Concurrent.Check.Answers; a[ReasonSlots] == 0 || a[ReasonBudget] == 0 {
			why = append(why, fmt.Sprintf("8 clients: the script did not reach the slot cap and the budget: %v", a))
		}
		for run, f := range rep.Sequential.Check.Final {
			if len(f.Bad) > 0 || f.Split > 0 || f.Unmatched > 0 {
				why = append(why, fmt.Sprintf("sequential: run %s: %+v", run, f))
			}
		}
	}
	for _, b := range checkConcurrent(rep.Concurrent.Check, im.InterleavedEvents) {
		why = append(why, "8 clients: "+b)
	}
	for _, b := range checkSyncs(phaseSequential, rep.Sequential) {
		why = append(why, "sequential: "+b)
	}
	for _, b := range checkSyncs(phaseConcurrent, rep.Concurrent) {
		why = append(why, "8 clients: "+b)
	}
	if f := rep.Concurrent.Check.Final["conc-0"]; im.InterleavedEvents && (f.Split > 0 || f.MaxInFlight > concSlots) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("events not written together nor in decision order: %d split, %d "+
			"in flight at most on replay", f.Split, f.MaxInFlight))
	}
	if rep.Sequential.Syncs < 0 {
		rep.Notes = append(rep.Notes, "sync calls not counted")
	}
	rep.Why = strings.Join(why, "; ")
	return rep, nil
}
