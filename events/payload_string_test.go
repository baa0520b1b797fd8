package events

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// stringField is a top-level string field of a payload struct: its msgpack key, and whether an empty one is left out.
type stringField struct {
	key       string
	index     int
	omitEmpty bool
}

func stringFields(typ string) []stringField {
	var out []stringField
	rt := reflect.TypeOf(NewPayload(typ)).Elem()
	for i := range rt.NumField() {
		if f := rt.Field(i); f.Type.Kind() == reflect.String {
			key, opts, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
			out = append(out, stringField{key: key, index: i, omitEmpty: strings.Contains(opts, "omitempty")})
		}
	}
	return out
}

// requirePayloadStringAgrees: where PayloadString reads key of b, it reads the string the decode of b, decoded,
// holds in key's field; where it does not, the field is empty (its key absent) or the decode refuses b.
func requirePayloadStringAgrees(t testing.TB, typ string, b []byte, decoded any, f stringField) (ok bool) {
	t.Helper()
	s, ok := PayloadString(typ, SchemaVersion(typ), b, f.key)
	want := reflect.ValueOf(decoded).Elem().Field(f.index).String()
	if ok {
		require.Equal(t, want, s, "%s.%s of %x", typ, f.key, b)
	}
	return ok
}

// TestPayloadStringReadsWhatTheDecodeReads: every string field of every type, on random payloads as the engine
// encodes them (where the key is written, it is read) and as another writer might (keys in any order, unknown keys,
// nil for "", every string and binary width).
func TestPayloadStringReadsWhatTheDecodeReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range Types() {
		t.Run(typ, func(t *testing.T) {
			fields := stringFields(typ)
			for range 50 {
				p := NewPayload(typ)
				randomFill(rng, reflect.ValueOf(p).Elem())
				canonical, err := EncodePayload(p)
				require.NoError(t, err)
				variant := (&variantWriter{rng: rng}).payload(reflect.ValueOf(p).Elem())
				for i, b := range [][]byte{canonical, variant} {
					decoded, err := DecodePayload(typ, SchemaVersion(typ), b)
					if err != nil {
						require.ErrorIs(t, err, ErrBadPayload, "only a payload that refuses itself") // checked
						decoded = NewPayload(typ)
						require.NoError(t, decodeInto(decoded, b))
					}
					for _, f := range fields {
						ok := requirePayloadStringAgrees(t, typ, b, decoded, f)
						value := reflect.ValueOf(p).Elem().Field(f.index).String()
						if i == 0 && (!f.omitEmpty || value != "") {
							require.True(t, ok, "%s.%s is written, so it is read", typ, f.key)
						}
					}
				}
			}
		})
	}
}

// TestPayloadStringLeavesOddPayloadsToTheDecode: what it does not read as the decode would, it does not read.
func TestPayloadStringLeavesOddPayloadsToTheDecode(t *testing.T) {
	settled := func(parts ...[]byte) []byte {
		b := []byte{0x80 | byte(len(parts)/2)}
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	subID, taskID := []byte{0xa5, 's', 'u', 'b', 'I', 'd'}, []byte{0xa6, 't', 'a', 's', 'k', 'I', 'd'}
	x, y, z := []byte{0xa1, 'x'}, []byte{0xa1, 'y'}, []byte{0xa1, 'z'}
	const dc = TypeDelegateCompleted
	for _, tc := range []struct {
		name    string
		typ     string
		version uint16
		b       []byte
		want    string
		ok      bool
	}{
		{"as the engine writes it", dc, 1, settled(taskID, y, subID, []byte{0xa2, 's', '1'}), "s1", true},
		{"nil is empty", dc, 1, settled(subID, []byte{0xc0}), "", true},
		{"as binary", dc, 1, settled(subID, []byte{0xc4, 2, 's', '1'}), "s1", true},
		{"an unknown key passed over", dc, 1, settled(z, []byte{0x92, 0x01, 0xa0}, subID, x), "x", true},
		{"absent", dc, 1, settled(taskID, y), "", false},
		{"given twice", dc, 1, settled(subID, x, subID, y), "", false},
		{"not a string", dc, 1, settled(subID, []byte{0x07}), "", false},
		{"a nil payload", dc, 1, []byte{0xc0}, "", false},
		{"an empty payload", dc, 1, nil, "", false},
		{"a struct as an array", dc, 1, []byte{0x92, 0xa1, 'P', 0xa1, 'x'}, "", false},
		{"trailing bytes", dc, 1, append(settled(subID, x), 0xc0), "", false},
		{"a string past the end", dc, 1, settled(subID, []byte{0xdb, 0x7f, 0xff, 0xff, 0xff, 'x'}), "", false},
		{"a map longer than its bytes", dc, 1, []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, "", false},
		{"a skipped array past the end", dc, 1, settled(z, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, subID,
			x), "", false},
		{"after a reserved code", dc, 1, settled(z, []byte{0xc1}, subID, x), "", false},
		{"an older schema version", TypeTaskCreated, 1, settled(taskID, x), "", false},
		{"a newer schema version", dc, 2, settled(subID, x), "", false},
		{"an unknown type", "delegate.unknown", 1, settled(subID, x), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "subId"
			if tc.typ == TypeTaskCreated {
				key = "taskId"
			}
			s, ok := PayloadString(tc.typ, tc.version, tc.b, key)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, s)
			if ok {
				decoded, err := DecodePayload(tc.typ, tc.version, tc.b)
				require.NoError(t, err)
				require.Equal(t, tc.want, decoded.(*DelegateCompleted).SubID)
			}
		})
	}
}

// TestPayloadStringAllocatesNothing: the string is read where it is.
func TestPayloadStringAllocatesNothing(t *testing.T) {
	b, err := EncodePayload(&DelegateCompleted{TaskID: "01_parent", SubID: "gc-3f9c2e", OK: true, MessageID: "msg_1"})
	require.NoError(t, err)
	var s string
	require.Zero(t, testing.AllocsPerRun(100, func() { s, _ = PayloadString(TypeDelegateCompleted, 1, b, "subId") }))
	require.Equal(t, "gc-3f9c2e", s)
}
