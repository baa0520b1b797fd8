package eventlog

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// A snapshot's save whose version edit, the one that brings its table in, meets ENOSPC in Pebble's manifest is fatal
// by Pebble's design (it cannot know whether the edit was written, so it does not go on): it calls Fatalf, which
// panics on the saving goroutine — never a save answered as done, never a hang of that caller; crewd, whose engine
// saves in a goroutine of its own, exits 2 and its supervisor restarts it. The store that restart opens holds every
// acknowledged append and one snapshot, whole: the previous one, or the new one when the edit was written, its sync
// failed and the crash kept what was written without a sync; and it saves the next one. NB: the log the panic left
// refuses everything (TestAPebbleFatalFailsTheLogStopBeforeItPanics): Pebble holds its state in doubt.
func TestASnapshotWhoseManifestEditMeetsENOSPCStopsAndLosesNothing(t *testing.T) {
	for _, op := range []struct {
		name string
		kind errorfs.OpKind
	}{{"write", errorfs.OpFileWrite}, {"sync", errorfs.OpFileSync}} {
		for _, unsynced := range []int{0, 100} {
			t.Run(fmt.Sprintf("%s/unsynced kept %d%%", op.name, unsynced), func(t *testing.T) {
				mem := vfs.NewCrashableMem()
				full := manifestFull(op.kind)
				l, err := Open("db", &Options{FS: errorfs.Wrap(mem, full)})
				require.NoError(t, err)
				_, err = l.Append(Write{CommandID: "a", Events: evs("run", 6)})
				require.NoError(t, err)
				previous := incompressible(48<<10, 1)
				require.NoError(t, l.SaveSnapshot(4, previous))
				_, err = l.Append(Write{CommandID: "b", Events: evs("run", 6)})
				require.NoError(t, err)

				next := incompressible(3*snapshotChunk, 2)
				full.On()
				fatal := func() (p any) {
					defer func() { p = recover() }()
					err = l.SaveSnapshot(12, next)
					return nil
				}()
				full.Off()
				require.NotNil(t, fatal, "the save was answered %v", err)
				require.Contains(t, fmt.Sprint(fatal), "pebble fatal: MANIFEST")
				require.Contains(t, fmt.Sprint(fatal), "no space left on device")

				crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced,
					RNG: rand.New(rand.NewPCG(uint64(unsynced), 7))})
				r, s := reopenWithOneSnapshot(t, crashed, "the restart")
				if s.Position == 12 { // the edit written, its sync failed, and the crash kept it
					require.Equal(t, Snapshot{Position: 12, Data: next}, s)
				} else {
					require.Equal(t, Snapshot{Position: 4, Data: previous}, s)
				}
				for _, id := range []string{"a", "b"} {
					_, err = r.Outcome("", id)
					require.NoError(t, err, "the acknowledged append %s", id)
				}
				require.NoError(t, r.SaveSnapshot(12, []byte("next")))
				require.NoError(t, r.Close())
			})
		}
	}
}

// manifestFull fails every op of kind on Pebble's MANIFEST with ENOSPC while it is on.
func manifestFull(kind errorfs.OpKind) *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(o errorfs.Op) error {
		if strings.Contains(o.Path, "MANIFEST") && o.Kind == kind {
			return syscall.ENOSPC
		}
		return nil
	})}
}
