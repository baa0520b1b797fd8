package broker

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestTeamEventEncodesAsJSONMarshal: a TeamEvent encodes as json.Marshal encodes it, byte for byte, on events
// filled at random (strings with HTML characters, quotes, line separators, non-ASCII and invalid UTF-8; fields
// left empty for omitempty; data a payload's json.Marshal, null, or omitted; imported events).
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
		require.Equal(t, string(want), string(got), "%#v", te)
	}
	_, err := teamEvent{Data: json.RawMessage{}}.encodeJSON()
	var merr *json.MarshalerError
	require.ErrorAs(t, err, &merr, "empty data fails as json.Marshal fails")
}
