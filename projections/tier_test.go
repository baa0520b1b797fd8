package projections

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// The cold runs' cache keeps at most its size in runs and ColdCacheBytes of
// their estimated memory, dropping the least recently used first, but
// always the run read last, however large.
func TestColdCacheIsBoundedInRunsAndBytes(t *testing.T) {
	c := NewColdStore(nil, 3)
	run := func(id string, body int) *runState {
		r := newRunState(Run{RunID: id})
		r.addMessage(Message{ID: "m", To: "t", Body: strings.Repeat("x", body)})
		return r
	}
	small := run("", 10).approxBytes()
	ids := func() []string {
		var out []string
		for _, e := range c.cache {
			out = append(out, e.id)
		}
		return out
	}
	for i := 0; i < 4; i++ {
		c.keep(fmt.Sprint(i), 1, run(fmt.Sprint(i), 10))
	}
	require.Equal(t, []string{"1", "2", "3"}, ids(), "at most 3 runs")
	require.NotNil(t, c.cached("1", 1), "a hit makes 1 the most recent")
	require.Nil(t, c.cached("1", 2), "another position is a miss")
	c.keep("4", 1, run("4", ColdCacheBytes-int(2*small)))
	require.Equal(t, []string{"1", "4"}, ids(), "the least recent go first when the bytes pass the bound")
	require.LessOrEqual(t, c.CachedBytes(), int64(ColdCacheBytes))
	c.keep("big", 1, run("big", 2*ColdCacheBytes))
	require.Equal(t, []string{"big"}, ids(), "the run read last stays, however large")
	c.keep("big", 2, run("big", 10))
	require.Equal(t, []string{"big"}, ids())
	require.Equal(t, small, c.CachedBytes(), "a run kept again replaces its older copy")
}

// A run's estimate counts what its callers choose the length of: a credential's revocation reason and actors, as
// a message's body.
func TestApproxBytesCountsCredentialsNamesAndReasons(t *testing.T) {
	r := newRunState(Run{RunID: runR})
	r.addCredential(&Credential{RunID: runR, Key: taskP})
	short := r.approxBytes()
	reason := strings.Repeat("r", 256)
	r.creds[taskP].Revoked, r.creds[taskP].RevokedBy, r.creds[taskP].RevokedReason = true, "worker/"+taskP, reason
	require.Equal(t, short+int64(len("worker/"+taskP)+len(reason)), r.approxBytes())
}

// approxBytes, which bounds the cold cache, is within a factor of two of
// what a run read back really holds on the heap.
func TestRunSizeEstimateIsCloseToTheHeap(t *testing.T) {
	requireSizeEstimateCloseToTheHeap(t, fold(realisticHistory(2000)), 20)
}

// requireSizeEstimateCloseToTheHeap decodes copies copies of s's snapshot and requires the approxBytes of their runs
// to be within a factor of two of the heap one copy holds.
func requireSizeEstimateCloseToTheHeap(t *testing.T, s *State, copies int) {
	t.Helper()
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	keep := make([]*State, 0, copies)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range copies {
		d, err := DecodeSnapshot(b) // fresh strings, as a re-fold makes them
		require.NoError(t, err)
		keep = append(keep, d)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	var estimate int64
	for _, r := range keep[0].runs {
		estimate += r.approxBytes()
	}
	heap := int64(after.HeapAlloc-before.HeapAlloc) / int64(copies)
	runtime.KeepAlive(keep)
	t.Logf("estimate %d, heap %d", estimate, heap)
	require.Greater(t, estimate, int64(0))
	require.InDelta(t, 1, float64(estimate)/float64(heap), 0.5, "estimate %d bytes, heap %d bytes", estimate, heap)
}

// A cold run the log cannot give back as recorded (here: its summary names
// a position its stream never reaches) is reported, and its queries answer
// as for an unknown run, never with a partial run.
func TestColdRunNotReadBackIsReported(t *testing.T) {
	s, cold := coldRunNotReadBack(t)
	var reported []string
	s.store.ReportErrors(func(run string, err error) {
		require.ErrorIs(t, err, eventlog.ErrCorrupt)
		reported = append(reported, run)
	})
	_, ok := s.Task(cold, "00_step")
	require.False(t, ok)
	require.Equal(t, []string{cold}, reported)
	require.ErrorIs(t, s.store.Err(), eventlog.ErrCorrupt)
	_, err := s.FaultIn(cold)
	require.ErrorIs(t, err, eventlog.ErrCorrupt, "the writer fails rather than decide on a partial run")
	require.ErrorIs(t, err, ErrNotReadBack)
	_, err = s.Warm(cold)()
	require.ErrorIs(t, err, ErrNotReadBack, "a reader is told, to answer the error rather than the empty run")
}

// coldRunNotReadBack is a state of a realistic history whose ended run cold, gone cold with its summary kept in
// memory, cannot be read back as recorded: its summary names a position its stream never reaches (ErrCorrupt).
func coldRunNotReadBack(t *testing.T) (s *State, cold string) {
	t.Helper()
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	evs := realisticHistory(300)
	var writes []eventlog.Write
	for _, ev := range evs {
		p, err := events.EncodePayload(ev.Payload)
		require.NoError(t, err)
		writes = append(writes, eventlog.Write{Events: []eventlog.Event{{Stream: ev.Stream, Type: ev.Type,
			SchemaVersion: ev.SchemaVersion, Time: ev.Time, Payload: p}}})
	}
	_, err = l.Append(writes...)
	require.NoError(t, err)
	s, _, err = LoadTiered(l, Tiering{Now: evs[len(evs)-1].UnixMilli() + 1})
	require.NoError(t, err)
	for id := range s.cold {
		cold = id
	}
	require.NotEmpty(t, cold, "the history has an ended run")
	s.coldRun(cold).last++ // a position the run's stream never reaches
	return s, cold
}

// Every query of a cold run's records that can return an error returns ErrNotReadBack when the log cannot give the
// run back: a page is not empty, a job list not none, a nested call not allowed as covered by no lease. The run's
// summary still answers (its record is known), so only the records are in question.
func TestQueriesOfAColdRunNotReadBackAnswerTheError(t *testing.T) {
	s, cold := coldRunNotReadBack(t)
	_, ok, err := s.LookupRun(cold)
	require.NoError(t, err)
	require.True(t, ok, "the summary answers")
	f := PageFilter{Limit: 10}
	pages := map[string]func() error{
		"TasksPage":       func() error { _, err := s.TasksPage(cold, f); return err },
		"DelegationsPage": func() error { _, err := s.DelegationsPage(cold, f); return err },
		"LedgerPage":      func() error { _, err := s.LedgerPage(cold, f); return err },
		"AccountHistory":  func() error { _, _, err := s.AccountHistory(cold, "00_step", f); return err },
		"Mailbox": func() error {
			_, err := s.Mailbox(cold, events.RunInbox,
				MailboxFilter{Limit: 10})
			return err
		},
		"AsksPage":         func() error { _, err := s.AsksPage(cold, false, f); return err },
		"CredentialsPage":  func() error { _, err := s.CredentialsPage(cold, f); return err },
		"JobPage":          func() error { _, _, err := s.JobPage(cold, "J", 0, 10); return err },
		"LookupJobHeader":  func() error { _, _, err := s.LookupJobHeader(cold, "J"); return err },
		"EachJob":          func() error { return s.EachJob(cold, func(Job) bool { return true }) },
		"Authorize":        func() error { _, err := s.Authorize(cold, "root/call", "write"); return err },
		"LookupTaskStatus": func() error { _, _, err := s.LookupTaskStatus(cold, "00_step"); return err },
		"LookupCredential": func() error { _, _, err := s.LookupCredential(cold, "00_step"); return err },
		"LookupTaskStatuses": func() error {
			_, err := s.LookupTaskStatuses(cold, []string{"00_step"})
			return err
		},
	}
	for name, read := range pages {
		err := read()
		require.ErrorIs(t, err, ErrNotReadBack, name)
		require.ErrorIs(t, err, eventlog.ErrCorrupt, name)
	}
}

// A cold run's record and orchestrator credential come from its summary,
// with no read of the log (a hello is checked against them before the
// caller is authenticated), and answer as the run re-folded does; the
// snapshot keeps the credential. Warm re-folds, and says how many events.
func TestColdRunSummaryAnswersWithoutARefold(t *testing.T) {
	evs := realisticHistory(600)
	l := appendHistory(t, evs)
	s, _, err := LoadTiered(l, Tiering{Now: evs[len(evs)-1].UnixMilli() + 1, Cache: 1})
	require.NoError(t, err)
	whole, err := s.Whole()
	require.NoError(t, err)
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	decoded, err := DecodeSnapshot(b)
	require.NoError(t, err)
	require.Greater(t, s.ColdRuns(), 1)
	withCred := 0
	for id := range s.cold {
		before := s.store.Refolds()
		run, ok := s.Run(id)
		require.True(t, ok)
		cred, hasCred := s.Credential(id, events.OrchestratorKey)
		require.Equal(t, before, s.store.Refolds(), "run %s: the summary re-folded the run", id)
		wantRun, _ := whole.Run(id)
		wantCred, wantHas := whole.Credential(id, events.OrchestratorKey)
		require.Equal(t, wantRun, run)
		require.Equal(t, wantHas, hasCred)
		require.Equal(t, wantCred, cred)
		got, gotHas := decoded.Credential(id, events.OrchestratorKey)
		require.Equal(t, wantHas, gotHas)
		require.Equal(t, wantCred, got, "run %s: the snapshot lost the orchestrator credential", id)
		if hasCred {
			withCred++
		}
		if load := s.Warm(id); load != nil {
			n, err := load()
			require.NoError(t, err)
			require.Equal(t, run.Usage.Events, n)
			require.Equal(t, before+1, s.store.Refolds())
		}
	}
	require.Positive(t, withCred, "the history issues orchestrator credentials")
}

// jobHeavyHistory is run R with jobs one after another, as the engine lets a run hold them: each with a grant of
// tools whose names and callables are as long as a grant allows, a lease whose root is as long as a root may be, and
// calls whose ids are as long as a request id may be, every one completed; each lease cleared (its root revoked) and
// each job cancelled before the next is created.
func jobHeavyHistory(jobs, tools, calls int) []events.Event {
	h := &history{}
	fixture(h, 0, true)
	long := func(prefix string, i, n int) string { return fmt.Sprintf("%s%0*d", prefix, n-len(prefix), i) }
	for j := range jobs {
		id := fmt.Sprint("J", j)
		p := &events.JobCreated{JobID: id, TaskID: taskP, ManifestDigest: strings.Repeat("d", 64),
			NonceDigest: strings.Repeat("n", 64)}
		for k := range tools {
			name := long("tool_", k, 256)
			p.Tools = append(p.Tools, name)
			p.Fingerprints = append(p.Fingerprints, long("f", k, 64))
			p.Callables = append(p.Callables, long("mgr:", k, 256))
			if k%2 == 0 {
				p.ReadOnly = append(p.ReadOnly, name)
			}
		}
		h.add(runR, events.TypeJobCreated, p)
		root := long("root-"+id+"-", j, 512)
		h.add(runR, events.TypeLeaseOpened, &events.LeaseOpened{JobID: id, Generation: 1, RootToolCallID: root,
			Mode: events.LeaseStart})
		h.add(runR, events.TypeJobStatusChanged, &events.JobStatusChanged{JobID: id, From: events.JobStarting,
			To: events.JobRunning})
		for c := range calls {
			req := long(id+"-call-", c, 128)
			h.add(runR, events.TypeProxyRequested, &events.ProxyRequested{JobID: id, RequestID: req, Generation: 1,
				Tool: p.Tools[c%tools], Mutating: true, Args: "{}", ArgsBytes: 2})
			h.add(runR, events.TypeProxyCompleted, &events.ProxyCompleted{JobID: id, RequestID: req, Generation: 1,
				CurrentGeneration: 1, Result: "{}", ResultBytes: 2})
		}
		h.add(runR, events.TypeLeaseCleared, &events.LeaseCleared{JobID: id, Generation: 1, RootToolCallID: root,
			Reason: "cancelled"})
		h.add(runR, events.TypeJobStatusChanged, &events.JobStatusChanged{JobID: id, From: events.JobRunning,
			To: events.JobCancelled})
	}
	return h.evs
}

// approxBytes, which bounds the cold cache and the views waiting to be written, counts a run's jobs as well: their
// grants, the calls they have seen (as many as the config's proxyMaxRequests, a job) and the run's revoked roots,
// whose ids their callers choose the length of. A run of jobs read back holds what its estimate says, within a
// factor of two, as a run of tasks and messages does.
func TestRunSizeEstimateCountsJobs(t *testing.T) {
	requireSizeEstimateCloseToTheHeap(t, fold(jobHeavyHistory(4, 64, 1000)), 10)
}

// Ended runs whose last events are stamped after the clock reading are all measured from it (retainedFrom), so when
// more of them than maxRetained are retained, the ones that ended first in the log go cold, as for any ended runs:
// the run ids, which their writers choose, do not decide it.
func TestRunsStampedAheadGoColdInTheOrderTheyEnded(t *testing.T) {
	var h history
	ids := []string{"Z", "Y", "X", "B", "A"} // in the order they end
	for _, id := range ids {
		h.add(id, events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"})
	}
	for _, id := range ids {
		h.add(id, events.TypeRunCompleted, &events.RunCompleted{})
	}
	s := fold(h.evs)
	s.SetColdStore(NewColdStore(nil, 0))
	now := at(1) // before every end
	require.Equal(t, []string{"X", "Y", "Z"}, s.Evictable(now, 60_000, 2))
}

// Whole is the state a fold that never evicts holds: an eviction pass's notes of the ended runs stamped after its
// clock reading (seenAhead), which only time the runs' going cold, are not part of it. Kept, a state that noted a run
// so, as an engine opened at that reading does, differed from the same history folded where no pass had run, though
// every answer was the same.
func TestWholeHoldsNoNotesOfEvictionPasses(t *testing.T) {
	var h history
	h.add("A", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"})
	h.add("A", events.TypeRunCompleted, &events.RunCompleted{})
	passed := fold(h.evs)
	passed.SetColdStore(NewColdStore(nil, 0))
	require.Empty(t, passed.EvictAll(at(0), 60_000, 64), "the run stays hot within its retention")
	require.NotEmpty(t, passed.seenAhead, "the pass noted the run stamped after its reading")
	got, err := passed.Whole()
	require.NoError(t, err)
	want, err := fold(h.evs).Whole()
	require.NoError(t, err)
	require.Equal(t, want, got)
}
