package daemon

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// failedStoreClose is how long crewd waits for its engine and event log to close once the log failed stop. A
// variable for tests only.
var failedStoreClose = 10 * time.Second

// closeStore closes the cluster node (when crewd is one), the engine and then the event log. Once the log failed stop
// it waits for them at most failedStoreClose and returns the failure without them: an append that waits inside Pebble
// for a flush that failed (a full disk, once two memtables are queued for it) never ends, and the engine's close and
// the log's wait for it. Nothing acknowledged is lost by exiting then: it is in the WAL, which the next start replays
// and flushes; the append that waits was not acknowledged.
func closeStore(clustered *clusterEngine, eng *commands.Engine, log *eventlog.Log, lg *slog.Logger) error {
	closed := make(chan error, 1)
	go func() {
		if clustered != nil {
			clustered.Close()
		}
		eng.Close()
		closed <- log.Close()
	}()
	select {
	case err := <-closed:
		return closeError(err, log)
	case <-log.Failed():
	}
	select {
	case err := <-closed:
		return closeError(err, log)
	case <-time.After(failedStoreClose):
		lg.Error("the event log did not close after its failure: an append waits in the storage engine for good; "+
			"exiting without it, nothing acknowledged is lost (it is in the write-ahead log)", "err", log.Err(),
			"waited", failedStoreClose)
		return fmt.Errorf("daemon: the event log failed stop and did not close: %w", log.Err())
	}
}

// closeError is what crewd exits with after the event log's close returned err: its error, else the log's failure
// when it failed stop meanwhile (a stop asked for, during which a write failed), so that crewd does not exit 0 with
// a store its next start must recover.
func closeError(err error, log *eventlog.Log) error {
	if err != nil {
		return fmt.Errorf("daemon: close the event log: %w", err)
	}
	if err := log.Err(); err != nil {
		return fmt.Errorf("daemon: the event log failed stop: %w", err)
	}
	return nil
}
