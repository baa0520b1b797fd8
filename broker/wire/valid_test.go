package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
)

// validSeeds are inputs on either side of every rule of the grammar.
var validSeeds = []string{
	``, ` `, `{}`, ` {} `, `[]`, `[ ]`, `{ }`, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{"a":}`, `{,}`, `{"a":1 "b":2}`,
	`[1,]`, `[,1]`, `[1 2]`, `[1],`, `{}{}`, `{} x`, `"a"`, `"a`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\x"`, `"\u00e9"`,
	`"\u00g9"`, `"\u00e"`, "\"\x01\"", "\"\x7f\xff\"", "\"\t\"", `true`, `tru`, `truex`, `false`, `fals`, `null`,
	`nul`, `nulls`, `0`, `-0`, `01`, `-01`, `-`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1e+5`, `1E-5`, `1.5e05`, `-1.0E+2`,
	`1x`, `+1`, `[1,{"a":[true,false,null,{"b":"c"}]}]`, `{"a":{"b":{"c":[]}}}`, "\v{}", "{}\f", "{\n\t\"a\"\r: 1}",
	`{"a":1}}`, `{"a":1]`, `[1}`, `[{]}`, `{"a":[}`, `{1:2}`, `{"a":1,"b"}`, `[[[[[[]]]]]]`, `[[[[[[]]]]]`,
}

func FuzzValidJSONAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		require.Equal(t, json.Valid(b), validJSON(b), "%q", b)
	})
}

func FuzzAppendCompactAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range append(validSeeds, " { \"a\" : [ 1 , \" x \\\" y \" ] } ", "\"a b\"", " 1 ", "{\"<\":\"\u2028\"}") {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want bytes.Buffer
		wantErr := json.Compact(&want, raw)
		got, ok := appendCompact([]byte("prefix"), raw)
		require.Equal(t, wantErr == nil, ok, "%q", raw)
		if ok {
			wantFrame := append([]byte("prefix"), want.Bytes()...)
			require.Equal(t, string(jsonref.Comparable(wantFrame)), string(jsonref.Comparable(got)), "%q", raw)
		} else {
			require.Equal(t, "prefix", string(got))
		}
	})
}

func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range validSeeds {
		require.Equal(t, json.Valid([]byte(s)), validJSON([]byte(s)), "%q", s)
	}
}

func TestValidJSONKeepsEncodingJSONsNestingLimit(t *testing.T) {
	for _, depth := range []int{maxNesting - 1, maxNesting, maxNesting + 1, 3 * maxNesting} {
		for _, open := range []string{"[", `{"a":`} {
			closing := map[string]string{"[": "]", `{"a":`: "}"}[open]
			doc := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(closing, depth))
			require.Equal(t, json.Valid(doc), validJSON(doc), "depth %d of %s", depth, open)
			require.Equal(t, depth <= maxNesting, validJSON(doc), "depth %d of %s", depth, open)
		}
	}
	mixed := []byte(strings.Repeat(`[{"a":`, maxNesting/2) + "[]" + strings.Repeat(`}]`, maxNesting/2))
	require.Equal(t, json.Valid(mixed), validJSON(mixed))
	require.False(t, validJSON(mixed), "one more than the limit: the innermost []")
}

func BenchmarkValidateFrame(b *testing.B) {
	frame := []byte(`{"id":"12345","method":"delegate.request","params":{"prompt":"explore the module and report ` +
		`the call graph of the admission path","description":"map the admission path","budgetTokens":1000,` +
		`"commandId":"0b6c3f0e-2d7e-4f57-9a57-3e8a3c1a2b9d"}}`)
	for _, v := range []struct {
		name  string
		valid func([]byte) bool
	}{{"encoding-json", json.Valid}, {"validJSON", validJSON}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if !v.valid(frame) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
