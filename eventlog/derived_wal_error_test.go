package eventlog

import (
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// A write of derived data (a view, summaries) whose bytes fail to reach the WAL — a full disk met by the WAL's
// background write, EIO — fails the log stop, as an append's failure does: the next write learns it, and it and
// every later one are refused (ErrFailed) rather than handed to Pebble, whose WAL keeps the error and panics on the
// next record that meets it; the reopened store holds every acknowledged append. The error is gone before the next
// write: a disk with space again does not mend a WAL that lost a write.
func TestDerivedWriteOnAFailingWALFailsStop(t *testing.T) {
	big := make([]byte, 40<<10) // more than a WAL block (32 KiB): each write of it moves the WAL to a new block
	ops := map[string]func(l *Log) error{
		"view": func(l *Log) error { return l.SaveView("run", 20, big) },
		"summaries": func(l *Log) error {
			return l.SaveSummaries([]Summary{{Stream: "run", Ord: 1, Position: 20, Data: big}})
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			var once sync.Once
			injected := make(chan struct{})
			toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(o errorfs.Op) error {
				if strings.HasSuffix(o.Path, ".log") && (o.Kind == errorfs.OpFileWrite || o.Kind == errorfs.OpFileWriteAt) {
					once.Do(func() { close(injected) })
					return errorfs.ErrInjected
				}
				return nil
			})}
			l := openTenAcked(t, mem, toggle)

			toggle.On()
			if err := op(l); err != nil { // NB: its sync is not awaited; one before it (the index's count) may be
				require.ErrorIs(t, err, ErrFailed)
			}
			<-injected // the WAL's write of it failed, in Pebble's background
			toggle.Off()
			// NB: each write moves the WAL to a new block, where Pebble takes up the error of its background write;
			// the write after that meets it.
			later := make([]error, 8)
			for i := range later {
				require.NotPanics(t, func() { later[i] = op(l) }, "write %d after the failure", i)
			}
			var appendErr error
			require.NotPanics(t, func() { _, appendErr = l.Append(Write{CommandID: "after", Events: evs("run", 1)}) })
			for i, err := range later {
				require.ErrorIs(t, err, ErrFailed, "write %d after the failure", i)
			}
			require.ErrorIs(t, appendErr, ErrFailed, "the log failed stop")
			pos, _ := l.Head()
			require.EqualValues(t, 20, pos)
			_ = l.Close()

			r := reopenTenAcked(t, mem)
			defer r.Close()
			require.NoError(t, op(r), "reopen recovers")
		})
	}
}

// Creating a store on a disk whose sync fails is an error of Open, not a panic: the format marker is the first
// write of a new store, and Pebble's synced write treats a failed sync as fatal.
func TestOpenOfANewStoreWhoseSyncFailsIsAnError(t *testing.T) {
	toggle := walFaults(walSyncOps...)
	toggle.On()
	require.NotPanics(t, func() {
		_, err := Open("db", &Options{FS: errorfs.Wrap(vfs.NewMem(), toggle)})
		require.ErrorIs(t, err, ErrFailed)
	})
}
