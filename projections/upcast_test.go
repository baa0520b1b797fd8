package projections

import (
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// Stored version-1 task.created events (the committed fixtures of package
// events) reach every reader in the version-2 shape: FromLog, the one
// decoder of projections, replay and queries, upcasts them.
func TestFromLogUpcastsV1TaskCreated(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	run, err := events.EncodePayload(&events.RunCreated{Team: "t", Goal: "g", Cwd: "/srv/app"})
	require.NoError(t, err)
	ws := []eventlog.Write{{CommandID: "c0", Events: []eventlog.Event{{Stream: "R", Type: events.TypeRunCreated,
		SchemaVersion: 1, Time: 1e15, Payload: run}}}}
	for i, name := range []string{"task.created.v1.workflow.hex", "task.created.v1.shadow.hex"} {
		h, err := os.ReadFile("../events/testdata/" + name)
		require.NoError(t, err)
		b, err := hex.DecodeString(strings.TrimSpace(string(h)))
		require.NoError(t, err)
		ws = append(ws, eventlog.Write{CommandID: "c" + string(rune('1'+i)), Events: []eventlog.Event{
			{Stream: "R", Type: events.TypeTaskCreated, SchemaVersion: 1, Time: 1e15, Payload: b}}})
	}
	_, err = l.Append(ws...)
	require.NoError(t, err)

	var kinds []string
	it := l.Read(1)
	for it.Next() {
		ev, err := FromLog(it.Event())
		require.NoError(t, err)
		if p, ok := ev.Payload.(*events.TaskCreated); ok {
			require.Equal(t, uint16(1), ev.SchemaVersion, "the envelope keeps the stored version")
			kinds = append(kinds, p.Kind)
		}
	}
	require.NoError(t, it.Close())
	require.Equal(t, []string{events.TaskKindWorkflow, events.TaskKindShadow}, kinds)

	s, _, err := Load(l)
	require.NoError(t, err)
	tasks := s.Tasks("R")
	require.Len(t, tasks, 2)
	require.False(t, tasks[0].Shadow())
	require.True(t, tasks[1].Shadow())
}
