package broker

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
)

// TestTeamEventEncodesAsJSONMarshal: a TeamEvent encodes as json.Marshal encodes it, byte for byte (from Go 1.27 up to
// the two spellings jsonref.Comparable names), on events filled at random (strings with HTML characters, quotes, line
// separators, non-ASCII and invalid UTF-8; fields left empty for omitempty; data a payload's json.Marshal, null, or
// omitted; imported events).
func TestTeamEventEncodesAsJSONMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 14))
	types := events.Types()
	for i := range 5000 {
		var te teamEvent
		fillRandom(r, reflect.ValueOf(&te).Elem(), 0)
		te.Metadata.Imported = nil
		switch i % 4 {
		case 0:
			te.Data = nil
		case 1:
			te = te.omitData()
		default:
			p := events.NewPayload(types[r.IntN(len(types))])
			fillRandom(r, reflect.ValueOf(p).Elem(), 0)
			b, err := json.Marshal(p)
			require.NoError(t, err)
			te.Data = b
		}
		if i%8 == 7 {
			te.Metadata.Imported = &importedMeta{Type: "x", Source: "pi-crew", Seq: int64(i)}
			te.Data = json.RawMessage(` { "a" : "<b>" } `) // the source's JSON, as it wrote it
		}
		want, err := json.Marshal(te)
		require.NoError(t, err)
		got, err := te.encodeJSON()
		require.NoError(t, err)
		require.Equal(t, string(jsonref.Comparable(want)), string(jsonref.Comparable(got)), "%#v", te)
	}
	_, err := teamEvent{Data: json.RawMessage{}}.encodeJSON()
	var merr *json.MarshalerError
	require.ErrorAs(t, err, &merr, "empty data fails as json.Marshal fails")
}

// TestTeamEventEncodeAllocatesItsBufferOnly: an event whose strings need escapes (a question's lines, non-ASCII,
// HTML's characters) is encoded in the one buffer it returns, where each such string was json.Marshal'd apart, two
// allocations more each.
func TestTeamEventEncodeAllocatesItsBufferOnly(t *testing.T) {
	te := teamEvent{
		Time: "2026-11-30T12:00:00.000Z", Type: events.TypeAskRequested, RunID: "é", TaskID: "\t",
		Message: "?\n<a>&\"\u2028", Data: json.RawMessage(`{}`),
		Metadata: teamMetadata{Seq: 7, Provenance: "api", Position: 42, SchemaVersion: 1,
			Actor: events.Actor{Role: events.RoleWorker, TaskID: "\t"}},
	}
	requireEncodedInOneBuffer(t, te)
}

// TestTeamEventEncodeSizesItsBufferOnce: an event of ids as long as crewlog and its clients mint them (a run id, a
// command id and a correlation id of a UUID each, a delegation's message of its JSON) is encoded without growing its
// buffer, where the buffer was made for 256 bytes besides the data and the message, fewer than the keys and ids of
// such an event: two allocations of every element of an events.since page and every team.event push, and a copy.
func TestTeamEventEncodeSizesItsBufferOnce(t *testing.T) {
	const uuid = "0193a5c2-7d4e-7b9a-9c1e-2f6d8a4b3c21"
	data := `{"taskId":"02_exec","subId":"gc-` + uuid + `","role":"reviewer","model":"claude-sonnet-4-5",` +
		`"maxTurns":30,"budgetTokens":200000,"timeoutSec":900,"childDepth":2,"grandchildTaskRef":"gc-` + uuid + `"}`
	te := teamEvent{
		Time: "2026-11-30T12:00:00.000Z", Type: events.TypeDelegateAdmitted, RunID: "run-" + uuid, TaskID: "02_exec",
		Message: events.TypeDelegateAdmitted + ": " + truncateUTF16(data, 200), Data: json.RawMessage(data),
		Metadata: teamMetadata{Seq: 123456, Provenance: "api", Position: 98765432, SchemaVersion: 1,
			CommandID: "cmd-" + uuid, CausationID: "cmd-" + uuid, CorrelationID: "corr-" + uuid,
			Actor: events.Actor{Role: events.RoleWorker, TaskID: "02_exec"}},
	}
	requireEncodedInOneBuffer(t, te)
}

// requireEncodedInOneBuffer: te encodes as json.Marshal encodes it, in the one buffer encodeJSON makes.
func requireEncodedInOneBuffer(t *testing.T, te teamEvent) {
	t.Helper()
	want, err := json.Marshal(te)
	require.NoError(t, err)
	got, err := te.encodeJSON()
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	require.LessOrEqual(t, len(got), te.encodedSize(), "the event fits the buffer encodeJSON makes")
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _, _ = te.encodeJSON() }))
}
