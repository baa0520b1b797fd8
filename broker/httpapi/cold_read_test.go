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
)

// newUnreadableCold is a server over a store whose ended runs are cold, and cold one of them; eio, while on, fails
// every read of a table (EIO), so that a cold run cannot be read back from the log.
func newUnreadableCold(t *testing.T) (f *fixture, eio *errorfs.Toggle, cold string) {
	t.Helper()
	eio = &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpFileReadAt {
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
	return f, eio, f.firstColdRun()
}

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
// as for no run or no job, nor the run's lists empty. The log fails right after the read-back (warmed).
func TestAPIAnswersAColdRunTheLogStopsGivingBackWithA500(t *testing.T) {
	f, eio, cold := newUnreadableCold(t)
	var fail atomic.Bool
	f.srv.warmed = func() {
		if fail.CompareAndSwap(true, false) {
			eio.On()
		}
	}
	head := f.ok("/api/v1/runs/" + cold)["position"].(float64)
	routes := []string{"/tasks", "/delegations", "/ledger", "/mailbox", "/asks", "/credentials", "/jobs", "/jobs/j1",
		fmt.Sprintf("/state?at=%d", int64(head))}

	for _, route := range routes {
		fail.Store(true)
		f.fails("/api/v1/runs/"+cold+route, http.StatusInternalServerError, codeInternal)
		require.False(t, fail.Load(), "%s: the log failed after the read-back", route)
		eio.Off()
	}
	tasks := f.ok("/api/v1/runs/" + cold + "/tasks")["tasks"].([]any)
	require.NotEmpty(t, tasks, "the log holds the run's tasks")
}
