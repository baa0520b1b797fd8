package daemon

import (
	"errors"
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
)

// openError explains why the event log did not open. A store at another
// format is the operator's to fix, so the message says how: an older store
// is migrated with crewctl (crewd never migrates on its own, so an upgrade
// is a deliberate step with a backup), a newer one needs a newer crewd. A
// store another process holds is, as a rule, crewd started twice on one data
// directory, which the lock's own words do not say.
func openError(dataDir string, err error) error {
	var fe *eventlog.FormatError
	switch {
	case errors.Is(err, eventlog.ErrLocked):
		return fmt.Errorf("daemon: the store in %s is held by another process, most likely a crewd already running on "+
			"%s (or a crewctl command that reads the store offline): stop it first, or start this crewd with another "+
			"--data: %w", dataDir, dataDir, err)
	case errors.As(err, &fe) && errors.Is(err, eventlog.ErrFormatTooOld):
		return fmt.Errorf("daemon: the store in %s is at format %d and this crewd needs format %d: "+
			"stop here and run 'crewctl migrate --data %s' (it takes a backup first), then start crewd again: %w",
			dataDir, fe.Store, fe.Supported, dataDir, err)
	case errors.As(err, &fe):
		return fmt.Errorf("daemon: the store in %s is at format %d, newer than format %d, the newest this crewd supports: "+
			"run a newer crewd (or restore a backup made before the upgrade): %w", dataDir, fe.Store, fe.Supported, err)
	}
	return fmt.Errorf("daemon: open the event log: %w", err)
}
