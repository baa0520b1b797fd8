package broker

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// taskIDFromJSON is the taskId a TeamEvent showed before taskid.go: read back from the payload's JSON.
func taskIDFromJSON(t *testing.T, payload any) string {
	t.Helper()
	data, err := json.Marshal(payload)
	require.NoError(t, err)
	var fields map[string]json.RawMessage
	var id string
	if json.Unmarshal(data, &fields) == nil {
		if raw, ok := fields["taskId"]; ok {
			json.Unmarshal(raw, &id)
		}
	}
	return id
}

// fillRandom sets every settable field of v to a random value: strings from a set that includes HTML characters,
// line separators, non-ASCII and invalid UTF-8, and empty values (omitempty), so the JSON differs between fills.
func fillRandom(r *rand.Rand, v reflect.Value, depth int) {
	strs := []string{"", "P", "task-1", "<a&b>", "a&b", "1>0", "héllo ✓", "\u2028x", "bad\xffutf8", `q"uote\`, "00_work"}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strs[r.IntN(len(strs))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(r.Int64N(1000) - 500)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(r.Uint64N(1000))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(r.Float64() * 100)
	case reflect.Pointer:
		if depth < 3 && r.IntN(3) > 0 {
			p := reflect.New(v.Type().Elem())
			fillRandom(r, p.Elem(), depth+1)
			v.Set(p)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillRandom(r, v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if depth < 3 {
			n := r.IntN(3)
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				fillRandom(r, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		if depth < 3 && v.Type().Key().Kind() == reflect.String {
			m := reflect.MakeMap(v.Type())
			for range r.IntN(3) {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				fillRandom(r, k, depth+1)
				fillRandom(r, e, depth+1)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	}
}

// TestTaskIDLiftedAsItsJSONSays: for every event type, on payloads filled at random (strings that are not valid UTF-8
// included), the taskId read from the payload struct is the one its JSON says, and every payload type of the contract
// is read from its struct (else events.since pays a JSON parse per event again).
func TestTaskIDLiftedAsItsJSONSays(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 14))
	for _, typ := range events.Types() {
		for range 50 {
			p := events.NewPayload(typ)
			fillRandom(r, reflect.ValueOf(p).Elem(), 0)
			id, ok := liftTaskID(p)
			require.True(t, ok, "%s: not lifted", typ)
			require.Equal(t, taskIDFromJSON(t, p), id, "%s: %+v", typ, p)
			v, ok := liftTaskID(reflect.ValueOf(p).Elem().Interface())
			require.True(t, ok, "%s by value", typ)
			require.Equal(t, id, v, "%s by value", typ)
		}
	}
}

// TestTaskIDLiftOfWhatIsNotAPayload: a value that is not a payload is not lifted (only its JSON can say); a nil
// payload has no taskId, as its JSON (null) has none; a taskId that is not valid UTF-8 reads as encoding/json reads
// it back, one U+FFFD per bad byte.
func TestTaskIDLiftOfWhatIsNotAPayload(t *testing.T) {
	for _, p := range []any{map[string]any{"taskId": "T"}, struct{ TaskID string }{"T"}, "T", nil} {
		_, ok := liftTaskID(p)
		require.False(t, ok, "%#v", p)
	}
	id, ok := liftTaskID((*events.TaskCreated)(nil))
	require.True(t, ok)
	require.Empty(t, id)
	bad := &events.TaskStarted{TaskID: "a\xff\xfeb\xe2\x82"}
	id, ok = liftTaskID(bad)
	require.True(t, ok)
	require.Equal(t, taskIDFromJSON(t, bad), id)
	require.Equal(t, "a\ufffd\ufffdb\ufffd\ufffd", id)
}
