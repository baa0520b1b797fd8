package broker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// TestForeignEventServedAsTheSourceWroteIt: events.since and pushes show an imported pi-crew event with its own
// type, task, message and data, and metadata.imported says what it is stored as and its seq at the source.
func TestForeignEventServedAsTheSourceWroteIt(t *testing.T) {
	ev := events.Event{Stream: "R1", Type: events.TypeForeignImported, StreamVersion: 9, Position: 40, SchemaVersion: 1,
		Time: 1790928605000 * 1e6, Actor: events.Actor{Role: events.RoleAdmin},
		Payload: &events.ForeignImported{Source: events.ForeignSourcePicrew, Type: "hook.executed", Seq: 17,
			Time: "2026-10-02T08:10:05.000Z", TaskID: "P", Message: "pre-commit ok", Data: `{"hook":"pre-commit","ok":true}`}}
	te, err := renderDecoded(&eventlog.Event{Stream: "R1", ActorRole: events.RoleAdmin}, ev,
		eventViewer{identity: identity{role: events.RoleOrchestrator, runID: "R1", key: events.OrchestratorKey}})
	require.NoError(t, err)
	got, err := json.Marshal(te)
	require.NoError(t, err)
	require.JSONEq(t, `{"time":"2026-10-02T08:10:05.000Z","type":"hook.executed","runId":"R1","taskId":"P",
		"message":"pre-commit ok","data":{"hook":"pre-commit","ok":true},
		"metadata":{"seq":9,"provenance":"api","position":40,"schemaVersion":1,"actor":{"role":"admin"},
		"imported":{"type":"foreign.imported","source":"picrew","seq":17}}}`, string(got))
}
