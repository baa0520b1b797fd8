package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// A log that fails stop under the engine by a write the engine did not make — a view or a summary, whose write to
// the WAL failed in Pebble's background — stops the engine at once, as a failed append does: Err and Failed say so
// (crewd's readiness, its exit for a restart), where an idle engine went on reporting itself ready, and holding a
// cluster's writer lease, until a command met the failed log.
func TestAnEngineStopsWhenItsLogFailsStop(t *testing.T) {
	walWrites := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt) {
			return errorfs.ErrInjected
		}
		return nil
	})}
	f := openEngineWith(t, errorfs.Wrap(vfs.NewMem(), walWrites), newTestClock(), Options{})
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	require.NoError(t, f.eng.Err())

	walWrites.On()
	require.NoError(t, f.log.SaveView("R", 1, []byte("v")), "its WAL write is Pebble's background's")
	require.ErrorIs(t, f.log.SaveView("R", 1, []byte("v")), eventlog.ErrFailed, "the next write learns it")
	walWrites.Off()

	select {
	case <-f.eng.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not stop with its log")
	}
	require.ErrorIs(t, f.eng.Err(), ErrFailed)
	require.ErrorContains(t, f.eng.Err(), errorfs.ErrInjected.Error())
}
