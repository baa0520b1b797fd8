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

// TestTaskIDLiftedAsItsJSONSays: for every event type, on payloads filled at random, the taskId read from the payload
// struct is the one its JSON says; and the struct is read for every payload type of the contract (else events.since
// pays a JSON parse per event again), a string that is not valid UTF-8 excepted.
func TestTaskIDLiftedAsItsJSONSays(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 14))
	for _, typ := range events.Types() {
		for range 50 {
			p := events.NewPayload(typ)
			fillRandom(r, reflect.ValueOf(p).Elem(), 0)
			id, ok := liftTaskID(p)
			want := taskIDFromJSON(t, p)
			if !ok {
				require.Contains(t, want, "\ufffd", "%s: %+v not lifted", typ, p)
				continue
			}
			require.Equal(t, want, id, "%s: %+v", typ, p)
		}
	}
}

type (
	embeddedTask struct {
		TaskID string `json:"taskId"`
	}
	withEmbedded struct {
		embeddedTask
		Other string `json:"other"`
	}
	numericTask struct {
		TaskID int `json:"taskId"`
	}
	quotedTask struct {
		TaskID string `json:"taskId,string"`
	}
	customTask struct {
		TaskID string `json:"taskId"`
	}
	customTaskID string
	customField  struct {
		TaskID customTaskID `json:"taskId"`
	}
	noTask struct {
		Other string `json:"other"`
	}
	omittedTask struct {
		TaskID string `json:"taskId,omitempty"`
	}
	hiddenTask struct {
		TaskID string `json:"-"`
	}
	namedByField struct{ taskId string } // unexported: never in the JSON
)

func (customTask) MarshalJSON() ([]byte, error)      { return []byte(`{"taskId":"other"}`), nil }
func (c customTaskID) MarshalText() ([]byte, error)  { return []byte("t-" + string(c)), nil }
func (c *customTaskID) UnmarshalText(b []byte) error { *c = customTaskID(b); return nil }

// twoTasks is a struct with two string fields named "taskId" in JSON (which encoding/json leaves out both of), made
// at run time: vet refuses the tags in source.
func twoTasks() any {
	tag := reflect.StructTag(`json:"taskId"`)
	t := reflect.StructOf([]reflect.StructField{
		{Name: "A", Type: reflect.TypeFor[string](), Tag: tag},
		{Name: "B", Type: reflect.TypeFor[string](), Tag: tag},
	})
	v := reflect.New(t)
	v.Elem().Field(0).SetString("A")
	v.Elem().Field(1).SetString("B")
	return v.Interface()
}

// TestTaskIDLiftFallsBackToTheJSON: a payload whose JSON the struct does not say field for field is not lifted (its
// taskId is then read from the JSON), and one that is says what its JSON says.
func TestTaskIDLiftFallsBackToTheJSON(t *testing.T) {
	for _, c := range []struct {
		name    string
		payload any
		lifted  bool
	}{
		{"embedded struct", &withEmbedded{embeddedTask{"T"}, "o"}, false},
		{"number", &numericTask{7}, false},
		{"string option", &quotedTask{"T"}, false},
		{"two fields of one name", twoTasks(), false},
		{"custom JSON", &customTask{"T"}, false},
		{"text-marshalled field", &customField{"T"}, false},
		{"invalid UTF-8", &omittedTask{"T\xff"}, false},
		{"nil payload", (*omittedTask)(nil), false},
		{"not a struct", map[string]any{"taskId": "T"}, false},
		{"no taskId", &noTask{"o"}, true},
		{"omitted when empty", &omittedTask{}, true},
		{"set", &omittedTask{"T"}, true},
		{"hidden", &hiddenTask{"T"}, true},
		{"unexported", &namedByField{"T"}, true},
		{"by value", omittedTask{"T"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, ok := liftTaskID(c.payload)
			require.Equal(t, c.lifted, ok)
			if ok {
				require.Equal(t, taskIDFromJSON(t, c.payload), id)
			}
		})
	}
}
