package jsonref

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMarshalStringIsGo126s: the bytes Go 1.26's encoding/json wrote, named, on whichever Go runs the test.
func TestMarshalStringIsGo126s(t *testing.T) {
	for in, want := range map[string]string{
		"":                `""`,
		"plain":           `"plain"`,
		"bad\xffutf8":     `"bad\ufffdutf8"`,
		"\xe2\x80":        `"\ufffd\ufffd"`,
		"\xed\xa0\x80":    `"\ufffd\ufffd\ufffd"`,
		"\ufffd":          "\"\ufffd\"",
		"<a&b>\u2028":     `"\u003ca\u0026b\u003e\u2028"`,
		"q\"\\\n\x01\xff": `"q\"\\\n\u0001\ufffd"`,
	} {
		require.Equal(t, want, string(MarshalString(in)), "%q", in)
	}
}

// TestComparable: on a json/v2 build the two spellings meet and nothing else moves; on Go 1.26's encoding/json
// Comparable changes nothing.
func TestComparable(t *testing.T) {
	in := `{"a":"\ufffd\u2028\u2029\\ufffd\u0026","b":"` + "\ufffd\u2028" + `"}`
	if !V2 {
		require.Equal(t, in, string(Comparable([]byte(in))))
		return
	}
	require.Equal(t, `{"a":"`+"\ufffd\u2028\u2029"+`\\ufffd\u0026","b":"`+"\ufffd\u2028"+`"}`, string(Comparable([]byte(in))))
	// The raw value's U+2029, which Go 1.26's Encoder without HTML escaping copied and Go 1.27's escapes.
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(struct{ R json.RawMessage }{json.RawMessage("\"\u2029<\"")}))
	require.Equal(t, string(Comparable([]byte("{\"R\":\"\u2029<\"}\n"))), string(Comparable(raw.Bytes())))
}
