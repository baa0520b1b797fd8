package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRestoreKilledPartWayIsRefusedByCrewd: crewctl restore killed (kill -9, a crash) part-way leaves its staging
// directory in the data directory, holding the copy it had begun, and perhaps the backup's server.key already in
// place. crewd started there made a new, empty store and served it with the backup's key, as though the restore were
// done. It exits with status 1 naming the staging directory and what to do; the same restore, run again, finishes,
// and crewd then serves the backup, whose worker credentials still validate.
func TestRestoreKilledPartWayIsRefusedByCrewd(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t)
	t.Cleanup(d.cleanup)
	d.start()
	c := newCrew(ctx, t, d, "w1")
	d.stop()
	backup := filepath.Join(t.TempDir(), "backup")
	d.crewctl(t, "backup", backup)

	// What a restore killed while it copied the store's files, after it put the key in place, leaves.
	r := newDaemon(t)
	t.Cleanup(r.cleanup)
	staging := filepath.Join(r.data, ".crewlog-restore-4242")
	require.NoError(t, os.MkdirAll(filepath.Join(staging, "store"), 0o700))
	files, err := os.ReadDir(filepath.Join(backup, "store"))
	require.NoError(t, err)
	for _, f := range files[:len(files)/2] {
		copyFile(t, filepath.Join(backup, "store", f.Name()), filepath.Join(staging, "store", f.Name()), 0o600)
	}
	copyFile(t, filepath.Join(backup, "server.key"), filepath.Join(r.data, "server.key"), 0o600)

	err = r.tryStart()
	require.Error(t, err, "crewd served an empty store in place of the unfinished restore")
	require.Equal(t, 1, r.state.ExitCode())
	require.Contains(t, r.log(), staging)
	require.Contains(t, r.log(), "run the same crewctl command again")
	require.NoDirExists(t, filepath.Join(r.data, "store"))

	r.crewctl(t, "restore", backup)
	r.start()
	r.mustDial(ctx, c.workers["w1"])
	r.stop()
}
