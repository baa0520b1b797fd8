package commands

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// A principal's refusals that record nothing but themselves are recorded up
// to MaxEventlessOutcomes: past them each is answered as before, but a
// retry of its id is decided again, so a worker sending them with fresh
// ids cannot grow the store for ever. The count is the principal's own —
// another principal's refusals are still recorded — and it outlives a
// restart.
func TestEventlessOutcomesAreRecordedUpToTheirBound(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	f := openEngine(t, fs, clock, nil)
	f.seedRunAs("R")
	hostile := events.WorkerPrincipal("R", "02_exec")
	refused := func(p events.Principal, id string) Request {
		return as(p, id, &TaskTransition{RunID: "R", TaskID: "99_absent", To: "running"})
	}
	head := f.eng.Head()

	reqs := make([]Request, MaxEventlessOutcomes)
	for i := range reqs {
		reqs[i] = refused(hostile, fmt.Sprintf("r-%d", i))
	}
	replies, err := f.eng.SubmitAll(context.Background(), reqs)
	require.NoError(t, err)
	require.Len(t, replies, MaxEventlessOutcomes)
	first := replies[0].Rejected
	require.NotNil(t, first)
	for _, r := range replies {
		require.Equal(t, first, r.Rejected)
		require.False(t, r.Replayed)
	}
	require.Equal(t, head, f.eng.Head(), "the refusals wrote no event")
	n, err := f.log.EventlessOutcomes(hostile.Key())
	require.NoError(t, err)
	require.EqualValues(t, MaxEventlessOutcomes, n)

	past := f.submit(refused(hostile, "past"))
	require.Equal(t, first, past.Rejected, "past the bound the answer is the same")
	again := f.submit(refused(hostile, "past"))
	require.Equal(t, first, again.Rejected)
	require.False(t, again.Replayed, "past the bound a refusal is not recorded: its retry is decided again")
	early := f.submit(refused(hostile, "r-7"))
	require.True(t, early.Replayed, "the refusals within the bound stay recorded")
	require.Equal(t, first, early.Rejected)
	n, err = f.log.EventlessOutcomes(hostile.Key())
	require.NoError(t, err)
	require.EqualValues(t, MaxEventlessOutcomes, n)

	for _, other := range []events.Principal{events.OrchestratorPrincipal("R"), events.WorkerPrincipal("R",
		"03_other")} {
		f.submit(refused(other, "r-1"))
		again := f.submit(refused(other, "r-1"))
		require.True(t, again.Replayed, "%v: another principal's refusal is recorded", other)
	}

	require.NoError(t, f.eng.Close())
	e, err := Open(f.log, Options{Clock: clock.Now, ExpiryInterval: -1})
	require.NoError(t, err)
	defer e.Close()
	for range 2 {
		r, err := e.Submit(context.Background(), refused(hostile, "after-restart"))
		require.NoError(t, err)
		require.Equal(t, first, r.Rejected)
		require.False(t, r.Replayed, "the bound holds across a restart")
	}
}

// An orchestrator may issue credentials to as many tasks as its run's
// quotas let it create, and each principal had MaxEventlessOutcomes of its
// own: a run's workers together record at most MaxEventlessOutcomesPerRun,
// across a restart, while another run's principals and the admin's are
// still recorded, and so is the run's own orchestrator, up to its own
// bound: its workers cannot use that up.
func TestARunsPrincipalsRecordEventlessOutcomesUpToTheRunsBound(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	f := openEngine(t, fs, clock, nil)
	f.seedRunAs("R")
	f.seedRunAs("S")
	refused := func(p events.Principal, id string) Request {
		run := p.RunID
		if run == "" {
			run = "R" // the admin's, of no run
		}
		return as(p, id, &TaskTransition{RunID: run, TaskID: "99_absent", To: "running"})
	}
	principals := MaxEventlessOutcomesPerRun / MaxEventlessOutcomes
	for w := range principals {
		reqs := make([]Request, MaxEventlessOutcomes)
		for i := range reqs {
			reqs[i] = refused(events.WorkerPrincipal("R", fmt.Sprintf("w%d", w)), fmt.Sprintf("r-%d", i))
		}
		_, err := f.eng.SubmitAll(context.Background(), reqs)
		require.NoError(t, err)
	}
	n, err := f.log.EventlessOutcomesOfGroup("R")
	require.NoError(t, err)
	require.EqualValues(t, MaxEventlessOutcomesPerRun, n)

	recorded := func(e *Engine, p events.Principal, id string) bool {
		t.Helper()
		var r Reply
		for range 2 {
			var err error
			r, err = e.Submit(context.Background(), refused(p, id))
			require.NoError(t, err)
			require.NotNil(t, r.Rejected)
		}
		return r.Replayed
	}
	require.False(t, recorded(f.eng, events.WorkerPrincipal("R", "fresh"), "x"),
		"a worker of a run past its bound records nothing")
	require.True(t, recorded(f.eng, events.OrchestratorPrincipal("R"), "x"),
		"the run's workers cannot use up its orchestrator's own bound")
	for _, p := range []events.Principal{events.WorkerPrincipal("S", "w0"), events.OrchestratorPrincipal("S"),
		events.AdminPrincipal()} {
		require.True(t, recorded(f.eng, p, "x"), "%v: recorded", p)
	}
	early := f.submit(refused(events.WorkerPrincipal("R", "w3"), "r-7"))
	require.True(t, early.Replayed, "the refusals within the bound stay recorded")
	rep, err := f.log.Verify(nil)
	require.NoError(t, err)
	require.Positive(t, rep.Tallies)

	require.NoError(t, f.eng.Close())
	e, err := Open(f.log, Options{Clock: clock.Now, ExpiryInterval: -1})
	require.NoError(t, err)
	defer e.Close()
	require.False(t, recorded(e, events.WorkerPrincipal("R", "after-restart"), "x"),
		"the run's bound holds across a restart")
	require.True(t, recorded(e, events.OrchestratorPrincipal("R"), "y"),
		"and its orchestrator's own bound is still its own")

	orch := events.OrchestratorPrincipal("R")
	reqs := make([]Request, MaxEventlessOutcomes-2) // "x" and "y" above
	for i := range reqs {
		reqs[i] = refused(orch, fmt.Sprintf("o-%d", i))
	}
	_, err = e.SubmitAll(context.Background(), reqs)
	require.NoError(t, err)
	require.False(t, recorded(e, orch, "past"), "past its own bound the orchestrator records nothing")
	n, err = f.log.EventlessOutcomesOfGroup("R")
	require.NoError(t, err)
	require.EqualValues(t, MaxEventlessOutcomesPerRun+MaxEventlessOutcomes, n,
		"the orchestrator's outcomes count in its run's, which they pass by its own bound at most")
	rep, err = f.log.Verify(nil)
	require.NoError(t, err)
	require.Positive(t, rep.Tallies)
}

// BenchmarkRefusalsWithFreshIDs: what refusals that record no event cost
// the store on disk, sent by one worker with a fresh id each, 1,000 to a
// group. store-bytes/op is the store's growth (WAL and tables, measured
// after a close) per refusal; past MaxEventlessOutcomes nothing more is
// recorded, so it falls as b.N grows:
//
//	go test ./commands -run '^$' -bench RefusalsWithFreshIDs -benchtime 140000x
func BenchmarkRefusalsWithFreshIDs(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "crewlog")
	l, err := eventlog.Open(dir, nil)
	require.NoError(b, err)
	clock := newTestClock()
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1})
	require.NoError(b, err)
	f := &engineFixture{t: b, log: l, eng: e, clock: clock}
	f.seedRunAs("R")
	before := dirBytes(b, dir)
	w := events.WorkerPrincipal("R", "02_exec")
	b.ResetTimer()
	for done := 0; done < b.N; {
		reqs := make([]Request, min(1000, b.N-done))
		for i := range reqs {
			reqs[i] = as(w, fmt.Sprintf("refusal-%012d", done+i),
				&TaskTransition{RunID: "R", TaskID: "99_absent", To: "running"})
		}
		replies, err := e.SubmitAll(context.Background(), reqs)
		require.NoError(b, err)
		require.NotNil(b, replies[len(replies)-1].Rejected)
		done += len(reqs)
	}
	b.StopTimer()
	require.NoError(b, e.Close())
	require.NoError(b, l.Close())
	b.ReportMetric(float64(dirBytes(b, dir)-before)/float64(b.N), "store-bytes/op")
}

// dirBytes is the size of the files under dir.
func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	require.NoError(b, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	}))
	return n
}
