package picrew

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// servedReason is the report of a run directory whose id names a run of the store served through crewd's socket.
const servedReason = "run not imported: the store's run %s was created through crewd's socket (it has an " +
	"orchestrator credential), and an import does not write to it"

// servedRun reports whether run runID of l has an orchestrator credential: it was created through crewd's socket
// (an import records no credential), and its principals decide what it records. NB: crewd's import.append refuses
// every write to such a run; a crew root's directory of that name (a worker can make one under any name) would
// otherwise add its tasks, messages and end to it as the admin. It reads the run's stream, which a run the store
// does not hold has none of.
func servedRun(l *eventlog.Log, runID string) (bool, error) {
	it := l.ReadStreamTransient(runID, 1)
	defer it.Close()
	for it.Next() {
		ev := it.Event()
		if ev.Type != events.TypeCredentialIssued {
			continue
		}
		p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
		if err != nil {
			return false, fmt.Errorf("picrew: run %s: %w", runID, err)
		}
		if c, ok := p.(*events.CredentialIssued); ok && c.TaskID == events.OrchestratorKey {
			return true, nil
		}
	}
	if err := it.Err(); err != nil {
		return false, fmt.Errorf("picrew: run %s: %w", runID, err)
	}
	return false, nil
}
