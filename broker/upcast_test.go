package broker

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// events.since and events.subscribe render stored records through
// renderEvent: a version-1 task.created reaches the wire in the version-2
// shape (with kind), while metadata.schemaVersion names what is stored.
func TestEventsSinceUpcastsV1(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	h, err := os.ReadFile("../events/testdata/task.created.v1.shadow.hex")
	require.NoError(t, err)
	b, err := hex.DecodeString(strings.TrimSpace(string(h)))
	require.NoError(t, err)
	_, err = l.Append(eventlog.Write{CommandID: "c1", Events: []eventlog.Event{
		{Stream: "R", Type: events.TypeTaskCreated, SchemaVersion: 1, Time: 1e15, Payload: b}}})
	require.NoError(t, err)

	it := l.ReadStream("R", 1)
	defer it.Close()
	require.True(t, it.Next())
	te, err := renderEvent(it.Event(), eventViewer{identity: identity{role: events.RoleAdmin}})
	require.NoError(t, err)
	require.Equal(t, uint16(1), te.Metadata.SchemaVersion)
	require.Equal(t, "gc-5f0c2a9e", te.TaskID)
	var data map[string]any
	require.NoError(t, json.Unmarshal(te.Data, &data))
	require.Equal(t, events.TaskKindShadow, data["kind"])
}
