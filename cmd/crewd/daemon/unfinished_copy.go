package daemon

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/crewlog/crewlog/eventlog"
)

// The prefixes of the staging directories crewctl builds a copy of a store in, inside the data directory it copies
// into, before it moves the copy into place (eventlog.StagingDir).
const (
	RestoreStaging = ".crewlog-restore-" // crewctl restore: the store and server.key
	StreamStaging  = ".crewlog-stream-"  // crewctl migrate-store --to pebble and backup --nats: a copy of a stream
)

// unfinishedCopies names the copies into a data directory that leave a staging directory there until they are done.
var unfinishedCopies = []struct{ prefix, copy string }{
	{RestoreStaging, "restore"},
	{StreamStaging, "migrate-store --to pebble (or backup --nats)"},
	{eventlog.CheckpointStaging, "backup"},
}

// checkNoUnfinishedCopy refuses a data directory without a store (Run looks) that holds the staging directory of a
// crewctl copy into it: one killed before its copy was in place (kill -9, a crash), or still running. NB: crewd would
// make a new, empty store there, with the server.key a restore may have put in place already, and serve it as though
// the copy were done; the admin.token and store it wrote would then have the copy, run again, refuse the directory as
// not empty. A staging directory beside a store is one whose copy was moved into place, the last step, and is left.
func checkNoUnfinishedCopy(dataDir string) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return fmt.Errorf("daemon: data directory: %w", err)
	}
	for _, e := range entries {
		for _, u := range unfinishedCopies {
			if e.IsDir() && eventlog.IsStagingDirName(e.Name(), u.prefix) { // as eventlog's cleanup reads them
				staging := filepath.Join(dataDir, e.Name())
				return fmt.Errorf("daemon: %s holds %s, left by a crewctl %s into it that did not finish (or is still "+
					"running), and no store: crewd would start a new, empty one; run the same crewctl command again to "+
					"finish the copy, or remove %s (and the server.key the copy may have put there) to start on an "+
					"empty store", dataDir, staging, u.copy, staging)
			}
		}
	}
	return nil
}
