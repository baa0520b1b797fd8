package audittest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// Newer writes into dir the Scenario's log followed by one event of type typ
// at schema version version, as a build that knows a type or a version this
// one does not would append it: a record whose checksum and chain hold. It
// returns the event's position.
func Newer(t testing.TB, dir, typ string, version uint16) uint64 {
	t.Helper()
	head := Scenario(t, dir)
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	p := events.Principal{Role: events.RoleOrchestrator, RunID: RunBudget}
	_, err = l.Append(eventlog.Write{CommandID: "newer-0000001", Principal: p.Key(), Events: []eventlog.Event{{
		Stream: RunBudget, Type: typ, SchemaVersion: version, Time: Epoch.Add(time.Hour).UnixNano(),
		CommandID: "newer-0000001", ActorRole: events.RoleOrchestrator, Payload: []byte{0x80}, // an empty msgpack map
	}}})
	require.NoError(t, err)
	return head + 1
}
