package httpapi

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// newUnreadableCold is a server over a store whose ended runs are cold, and cold one of them; eio, while on, fails
// every read of a table (EIO) but the first passes (none unless set), so that a cold run cannot be read back from the
// log.
func newUnreadableCold(t *testing.T) (f *fixture, eio *errorfs.Toggle, cold string) {
	f, eio, _, cold = newUnreadableColdPassing(t)
	return f, eio, cold
}

// readFaults picks which reads of a table eio fails while on: every one, or, with from set, those made once the cold
// store has begun its from-th read of a summary (ColdStore.SummaryReads counts a read as it begins). NB: by the
// store's count of its summaries, not a count of the tables' reads, which takes in Pebble's background compactions
// too: a compaction that read a table meanwhile moved the failure to another read of the request's.
type readFaults struct {
	cs   atomic.Pointer[projections.ColdStore]
	from atomic.Int64
}

// fails reports whether a table read made now fails.
func (rf *readFaults) fails() bool {
	from := rf.from.Load()
	return from == 0 || rf.cs.Load().SummaryReads() >= from
}

// newUnreadableColdPassing is newUnreadableCold, with what eio fails while on.
func newUnreadableColdPassing(t *testing.T) (f *fixture, eio *errorfs.Toggle, rf *readFaults, cold string) {
	t.Helper()
	rf = new(readFaults)
	eio = &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpFileReadAt && rf.fails() {
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	})}
	// NB: no views and no block cache, so that reading a cold run back reaches the tables; the snapshot holds the
	// ended runs cold and the store is opened again after it, so that the tables hold every event.
	eo := commands.Options{SnapshotEvery: -1, ExpiryInterval: -1, Retention: -1, ColdCache: 1, NoViews: true}
	f = newFixtureStore(t, Options{}, eo,
		&eventlog.Options{FS: errorfs.Wrap(vfs.Default, eio), CacheSize: 1, MemTableSize: 1 << 12},
		func(dir string, head uint64) { audittest.ColdSnapshot(t, dir, head) })
	f.eng.Read(func(st *projections.State) { rf.cs.Store(st.ColdStore()) })
	return f, eio, rf, f.firstColdRun()
}

// summaryReads is how many summaries the cold store has begun to read.
func (rf *readFaults) summaryReads() int64 { return rf.cs.Load().SummaryReads() }

// A cold run the log cannot give back (every read of a table fails: EIO) is answered 500 by each of its routes:
// never as a run that holds nothing (its tasks answered an empty list) nor as no run (404). A hot run, which
// reads nothing of the log, is answered as ever meanwhile; and once the log can be read, the run is as it holds it.
func TestAPIAnswersAColdRunTheLogCannotGiveBackWithA500(t *testing.T) {
	f, eio, cold := newUnreadableCold(t)
	routes := []string{"", "/tasks", "/delegations", "/ledger", "/mailbox", "/asks", "/credentials", "/events",
		"/jobs", "/jobs/j1"}

	eio.On()
	for _, route := range routes {
		f.fails("/api/v1/runs/"+cold+route, http.StatusInternalServerError, codeInternal)
	}
	f.ok("/api/v1/runs/" + liveRun + "/tasks")
	eio.Off()

	tasks := f.ok("/api/v1/runs/" + cold + "/tasks")["tasks"].([]any)
	require.NotEmpty(t, tasks, "the log holds the run's tasks")
}

// A route whose cold run was read back (runParam), then meets a log that fails as it reads the run again under the
// state's lock (its summary, or its records once another run took its place in the cache), answers 500: never 404
// as for no run or no job, nor the run's lists empty. Each of the route's reads of the summary after the read-back
// (warmed) fails in turn, the others passing: the route's first (the run found), then each list's.
func TestAPIAnswersAColdRunTheLogStopsGivingBackWithA500(t *testing.T) {
	f, eio, rf, cold := newUnreadableColdPassing(t)
	head := f.ok("/api/v1/runs/" + cold)["position"].(float64)
	accounts := f.ok("/api/v1/runs/" + cold + "/ledger")["accounts"].([]any)
	require.NotEmpty(t, accounts)
	account := accounts[0].(map[string]any)["taskId"].(string)
	var fail atomic.Int64 // the read of the summary after the read-back that fails, from 1; 0 for none
	var base atomic.Int64 // the summaries read when the run was read back
	f.srv.warmed = func() {
		if k := fail.Swap(0); k > 0 {
			base.Store(rf.summaryReads())
			rf.from.Store(base.Load() + k)
			eio.On()
		}
	}
	routes := []struct {
		route string
		reads int64 // of the summary after the read-back: the run found, then its list's, each
	}{
		{"/tasks", 2}, {"/delegations", 2}, {"/ledger", 2}, {"/mailbox", 2}, {"/asks", 2},
		{"/credentials", 3}, // the run, its page of credentials, their tasks' statuses
		{"/jobs", 2}, {"/jobs/j1", 2},
		{fmt.Sprintf("/state?at=%d", int64(head)), 5}, // the run, its tasks, delegations, ledger and asks
		{"/ledger?taskId=" + account, 2},
	}

	for _, r := range routes {
		path := "/api/v1/runs/" + cold + r.route
		want, _ := f.get(path)
		for k := int64(1); ; k++ {
			fail.Store(k)
			status, m := f.get(path)
			eio.Off()
			require.Zero(t, fail.Load(), "%s: the run read back", r.route)
			if rf.summaryReads()-base.Load() < k { // no k-th read: none failed
				require.Equal(t, want, status, "%s: no read failed: %v", r.route, m)
				require.Equal(t, r.reads, k-1, "%s: its reads of the summary", r.route)
				break
			}
			require.Equal(t, http.StatusInternalServerError, status, "%s: read %d failed: %v", r.route, k, m)
			e, _ := m["error"].(map[string]any)
			require.Equal(t, codeInternal, e["code"], "%s: read %d failed: %v", r.route, k, m)
		}
	}
	tasks := f.ok("/api/v1/runs/" + cold + "/tasks")["tasks"].([]any)
	require.NotEmpty(t, tasks, "the log holds the run's tasks")
}

// The credentials of a cold run show each worker's task status, read from the run's records, the run's summary read
// once for the page's tasks (not once a task) after the read-back's, the list's and the page's reads: when that read
// fails, the route answers 500, never the credentials as if their tasks were gone (no taskStatus).
func TestAPICredentialsOfAColdRunTheLogStopsGivingBackAnswerA500(t *testing.T) {
	f, eio, rf, cold := newUnreadableColdPassing(t)
	// Reopened, two workers' credentials issued, ended again: the run goes cold again with them.
	for _, cmd := range []commands.Command{
		&commands.RunTransition{RunID: cold, To: "running"},
		&commands.CredentialIssue{RunID: cold, TaskID: "01_build", Digest: strings.Repeat("cd", 32)},
		&commands.CredentialIssue{RunID: cold, TaskID: "02_explore", Digest: strings.Repeat("ab", 32)},
		&commands.RunTransition{RunID: cold, To: "completed"},
	} {
		require.Nil(t, f.do(audittest.Admin, cmd).Rejected)
	}
	route := "/api/v1/runs/" + cold + "/credentials"
	creds := f.ok(route)["credentials"].([]any) // the run read back and kept decoded
	f.eng.Read(func(st *projections.State) { require.True(t, st.IsCold(cold)) })
	workers := 0
	for _, c := range creds {
		if c.(map[string]any)["taskStatus"] != nil {
			workers++
		}
	}
	require.Positive(t, workers, "the run has credentials of its tasks")

	// The read-back's (the run cached: no records read), the list's, the page's and the task statuses': four reads
	// of the summary, however many of the page's credentials are a task's. NB: counted by the store's own count of
	// the summaries it read, not by the tables' reads, which take in the store's flushes and compactions too.
	require.Greater(t, workers, 1)
	before := rf.summaryReads()
	require.Equal(t, creds, f.ok(route)["credentials"])
	require.EqualValues(t, 4, rf.summaryReads()-before, "summaries read by a page of %d workers' credentials", workers)

	// The fourth read of the summary fails, the task statuses'.
	before = rf.summaryReads()
	rf.from.Store(before + 4)
	eio.On()
	f.fails(route, http.StatusInternalServerError, codeInternal)
	eio.Off()
	require.EqualValues(t, 4, rf.summaryReads()-before, "the route ended at its fourth read of the summary")
	require.Equal(t, creds, f.ok(route)["credentials"])
}
