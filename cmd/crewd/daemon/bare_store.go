package daemon

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
)

// checkNotABareStore refuses a data directory without a store (Run looks) that is itself one: a checkpoint such as
// migrate's pre-migrate backups, which crewctl reads as a data directory. NB: crewd would make a new, empty store
// inside it and serve that, and the directory and secrets it wrote among Pebble's files would have restore refuse the
// copy.
func checkNotABareStore(dataDir string) error {
	if !eventlog.IsStore(dataDir) {
		return nil
	}
	return fmt.Errorf("daemon: %s is a store itself (a checkpoint, such as a backup migrate wrote), not a data "+
		"directory: crewd would start a new, empty store inside it; copy it into a data directory with "+
		"'crewctl restore %s --data NEWDIR' and start crewd on NEWDIR", dataDir, dataDir)
}
