package picrew

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// slotRunFiles is run id, running, with its task 01_exec running and the events lines after its task.started.
func slotRunFiles(id string, lines ...string) map[string]string {
	return map[string]string{
		"state/runs/" + id + "/manifest.json": manifestOf(id, "running"),
		"state/runs/" + id + "/tasks.json": `[{"id":"01_exec","stepId":"exec","role":"executor",` +
			`"status":"running"}]`, "state/runs/" + id +
			"/events.jsonl": eventLine(1, "task.started", "01_exec", `{}`) + strings.Join(lines, ""),
	}
}

// importFiles imports a root of files into l (a dry run with dry) and returns the reports whose reason names sub.
func importFiles(t *testing.T, l *eventlog.Log, files map[string]string, dry bool, sub string) []string {
	root := t.TempDir()
	writeFiles(t, root, files)
	sum, err := Import(l, root, &Options{Clock: valuesClock, DryRun: dry})
	require.NoError(t, err)
	var reports []string
	for _, s := range sum.Skipped {
		if strings.Contains(s.Reason, sub) {
			reports = append(reports, s.String())
		}
	}
	return reports
}

// TestImportedAdmissionDoesNotTakeAnotherRunsSlot: the daemon-wide slot pool is keyed by subId, so a delegation a
// run's files admit under a subId another run's delegation holds (a worker's line naming another run's shadow) is one
// crewd's import.append refuses. The one-shot import recorded it: the second admission took the first run's slot, its
// settlement freed it while the first run's delegation was still in flight, and a snapshot of two runs holding one
// subId is refused at load, so the state folded from the log and the one rebuilt from its snapshot differed. The
// import now leaves such an admission out, reported, whether the run holding the subId is of the same import or of
// the store already; a subId whose delegation was settled holds nothing and may be admitted again.
func TestImportedAdmissionDoesNotTakeAnotherRunsSlot(t *testing.T) {
	const holder, other = "team_20261201120000_00000000000000aa", "team_20261201120000_00000000000000bb"
	admitted := eventLine(2, "delegate.admitted", "01_exec", `{"subId":"gc-shared","timeoutSec":600}`)
	settled := eventLine(3, "delegate.completed", "01_exec", `{"subId":"gc-shared","ok":true}`)
	for _, c := range []struct {
		name          string
		holder, other []string // the runs' lines after task.started
		together      bool     // one import of both runs, else the holder's first, then the other's
		want          string   // the run whose delegation holds gc-shared at the end
		refused       bool     // the other run's admission is left out
	}{
		{"one import", []string{admitted}, []string{admitted, settled}, true, holder, true},
		{"in the store", []string{admitted}, []string{admitted, settled}, false, holder, true},
		{"both in flight", []string{admitted}, []string{admitted}, true, holder, true},
		{"settled first", []string{admitted, settled}, []string{admitted}, true, other, false},
		{"settled first, in the store", []string{admitted, settled}, []string{admitted}, false, other, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := openFuzzStore(t)
			defer l.Close()
			var reports []string
			imp := func(files map[string]string) { reports = append(reports, importFiles(t, l, files, false, "")...) }
			if c.together {
				files := slotRunFiles(holder, c.holder...)
				for p, b := range slotRunFiles(other, c.other...) {
					files[p] = b
				}
				imp(files)
			} else {
				imp(slotRunFiles(holder, c.holder...))
				imp(slotRunFiles(other, c.other...))
			}
			s := stateOf(t, l)
			runID, held := s.SlotHolder("gc-shared")
			require.True(t, held, "a delegation in flight holds its slot")
			require.Equal(t, c.want, runID)
			_, recorded := s.Delegation(other, "gc-shared")
			require.Equal(t, !c.refused, recorded)
			refusals := slices.DeleteFunc(slices.Clone(reports), func(r string) bool {
				return !strings.Contains(r, "gc-shared")
			})
			if c.refused {
				require.NotEmpty(t, refusals, "%q", reports) // its settlement's line is reported after it, if any
				require.Contains(t, refusals[0], "state/runs/"+other+"/events.jsonl:2 (seq 2): delegate.admitted "+
					"for gc-shared: its subId holds a slot of run "+holder+" (the slot pool is keyed by "+
					"subId): skipped")
			} else {
				require.Empty(t, refusals)
			}

			b, err := projections.EncodeSnapshot(s)
			require.NoError(t, err)
			back, err := projections.DecodeSnapshot(b)
			require.NoError(t, err, "the state's snapshot is one a load takes")
			require.Equal(t, s.Slots(), back.Slots())
		})
	}
}

// TestImportedAdmissionIsItsRunsFirst: a delegation is admitted once (pi-crew mints a subId per admission), and
// crewd's import.append refuses an admission of a subId its run admitted already. The one-shot import recorded one
// the store held from an earlier import whose line the files no longer had (pi-crew's compaction keeps the last
// events): the fold ignores the second admission, but not its budget.reserved, and the parent's spend counted the
// reservation twice. It is now skipped and reported; the same admission read again is the write recorded already, and
// appends nothing.
func TestImportedAdmissionIsItsRunsFirst(t *testing.T) {
	const run = "team_20261201120000_00000000000000aa"
	l := openFuzzStore(t)
	defer l.Close()
	imp := func(lines ...string) []string { return importFiles(t, l, slotRunFiles(run, lines...), false, "gc-1") }
	admitted := eventLine(2, "delegate.admitted", "01_exec", `{"subId":"gc-1","timeoutSec":600,"reservedTokens":50}`)
	require.Empty(t, imp(admitted, eventLine(3, "delegate.completed", "01_exec", `{"subId":"gc-1","ok":true}`)))
	require.Empty(t, imp(admitted), "the admission recorded already, read again")
	require.Equal(t, []string{"state/runs/" + run + "/events.jsonl:2 (seq 7): second delegate.admitted for " +
		"gc-1: skipped"},
		imp(eventLine(7, "delegate.admitted", "01_exec", `{"subId":"gc-1","timeoutSec":600,"reservedTokens":50}`)))
	s := stateOf(t, l)
	d, ok := s.Delegation(run, "gc-1")
	require.True(t, ok)
	require.Equal(t, projections.DelegationCompleted, d.Status, "the delegation stays settled")
	a, _ := s.Allocation(run, "01_exec")
	require.Equal(t, int64(50), a.TokensSpent, "its reservation is counted once")
	_, held := s.SlotHolder("gc-1")
	require.False(t, held)
}

// TestDryRunPlansAsTheImport: a dry run plans what the import would append, for the slot pool too: a run of the root
// settling a delegation the store holds in flight frees its subId for the runs after it, though a dry run appends
// nothing. The pool, read from the store at the first admission, missed the settlements planned before it, and the
// dry run reported an admission the import then recorded.
func TestDryRunPlansAsTheImport(t *testing.T) {
	const holder, other = "team_20261201120000_00000000000000aa", "team_20261201120000_00000000000000bb"
	admitted := eventLine(2, "delegate.admitted", "01_exec", `{"subId":"gc-shared","timeoutSec":600}`)
	settled := eventLine(3, "delegate.completed", "01_exec", `{"subId":"gc-shared","ok":true}`)
	l := openFuzzStore(t)
	defer l.Close()
	imp := func(dry bool, files map[string]string) []string { return importFiles(t, l, files, dry, "gc-shared") }
	require.Empty(t, imp(false, slotRunFiles(holder, admitted)))
	files := slotRunFiles(holder, admitted, settled)
	for p, b := range slotRunFiles(other, admitted) {
		files[p] = b
	}
	require.Empty(t, imp(true, files), "the dry run")
	require.Empty(t, imp(false, files), "the import")
	runID, held := stateOf(t, l).SlotHolder("gc-shared")
	require.True(t, held)
	require.Equal(t, other, runID)
}

// TestImportedAdmissionIsNotAStoredWorkflowTask: a delegation's subId names its shadow task, so crewd's import.append
// refuses an admission whose subId names a workflow task of its run, as the store holds it. The one-shot import
// checked only the tasks.json it read: a workflow task imported before, which a rewritten tasks.json no longer
// listed, was taken for the delegation's shadow, and the delegation's settlement ended it. Such an admission is now
// skipped and reported.
func TestImportedAdmissionIsNotAStoredWorkflowTask(t *testing.T) {
	const run = "team_20261201120000_00000000000000aa"
	l := openFuzzStore(t)
	defer l.Close()
	files := slotRunFiles(run)
	files["state/runs/"+run+"/tasks.json"] = `[{"id":"01_exec","stepId":"exec","role":"executor",` +
		`"status":"running"},{"id":"02_check","stepId":"check","role":"reviewer","status":"queued"}]`
	require.Empty(t, importFiles(t, l, files, false, "02_check"))
	files = slotRunFiles(run, eventLine(2, "delegate.admitted", "01_exec", `{"subId":"02_check","timeoutSec":600}`),
		eventLine(3, "delegate.completed", "01_exec", `{"subId":"02_check","ok":true}`))
	require.Equal(t, []string{
		"state/runs/" + run + "/events.jsonl:2 (seq 2): delegate.admitted for \"02_check\": a workflow task of " +
			"the run has that id: skipped",
		"state/runs/" + run + "/events.jsonl:3 (seq 3): delegate.completed for 02_check, which was never " +
			"admitted in the events: the files decide",
	}, importFiles(t, l, files, false, "02_check"))
	s := stateOf(t, l)
	tk, ok := s.Task(run, "02_check")
	require.True(t, ok)
	require.Equal(t, projections.TaskQueued, tk.Status, "the workflow task is not ended by a delegation")
	_, admitted := s.Delegation(run, "02_check")
	require.False(t, admitted)
}

// TestSlotPoolKeepsWhatItReadsOfTheStore: the pool's runs are copies of what the store's iterator gave: an event it
// returns, read transient, aliases the storage engine's memory only until the next one. The pool kept the run of
// each event as the iterator gave it, so its maps held keys and a slot's run whose bytes the engine reused (a race
// build mangles them at once), and an admission named "another run" whose id was garbage, or was not seen at all.
func TestSlotPoolKeepsWhatItReadsOfTheStore(t *testing.T) {
	const runs = 16
	l := openFuzzStore(t)
	defer l.Close()
	files := map[string]string{}
	for i := range runs {
		id := fmt.Sprintf("team_20261201120000_%016x", i+1)
		admitted := eventLine(2, "delegate.admitted", "01_exec", fmt.Sprintf(`{"subId":"gc-%d","timeoutSec":600}`, i))
		maps.Copy(files, slotRunFiles(id, admitted))
	}
	require.Empty(t, importFiles(t, l, files, false, "gc-"))

	for range 64 { // NB: a race build mangles some of the engine's memory, at random, once an iterator moves on
		sp := newSlotPool(l)
		sp.load()
		require.NoError(t, sp.err)
		for i := range runs {
			id, sub := fmt.Sprintf("team_20261201120000_%016x", i+1), fmt.Sprintf("gc-%d", i)
			require.Equal(t, id, sp.held[sub], "the run holding %s", sub)
			require.True(t, sp.admitted[[2]string{id, sub}], "%s admitted by %s", sub, id)
			require.True(t, sp.inFlight[[2]string{id, sub}], "%s in flight", sub)
			require.True(t, sp.workflow[[2]string{id, "01_exec"}], "the workflow task of %s", id)
		}
	}
}
