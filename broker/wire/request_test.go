package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeRequest(t *testing.T) {
	long := strings.Repeat("i", MaxIDLen)
	emoji := strings.Repeat("😀", MaxIDLen/2) // 256 UTF-16 units in 512 bytes
	for _, tc := range []struct {
		name  string
		frame string
		want  Request
		err   string // "" means valid
	}{
		{"minimal", `{"id":"1","method":"ping","params":null}`, Request{"1", "ping", json.RawMessage(`null`)}, ""},
		{"object params", `{"id":"x","method":"msg.send","params":{"to":"all"}}`,
			Request{"x", "msg.send", json.RawMessage(`{"to":"all"}`)}, ""},
		{"any params", `{"id":"x","method":"m","params":[1,"a"]}`, Request{"x", "m", json.RawMessage(`[1,"a"]`)}, ""},
		{"extra keys ignored", `{"id":"1","method":"m","params":1,"jsonrpc":"2.0"}`,
			Request{"1", "m", json.RawMessage(`1`)}, ""},
		{"last duplicate wins", `{"id":"1","id":"2","method":"m","params":{}}`,
			Request{"2", "m", json.RawMessage(`{}`)}, ""},
		{"whitespace", " { \"id\" : \"1\" , \"method\" : \"m\" , \"params\" : 0 } ",
			Request{"1", "m", json.RawMessage(`0`)}, ""},
		{"id of 256 chars", `{"id":"` + long + `","method":"m","params":{}}`, Request{long, "m", json.RawMessage(`{}`)}, ""},
		{"id of 256 UTF-16 units", `{"id":"` + emoji + `","method":"m","params":{}}`,
			Request{emoji, "m", json.RawMessage(`{}`)}, ""},
		{"id of an escaped surrogate pair", `{"id":"\ud83d\ude00","method":"m","params":{}}`,
			Request{"😀", "m", json.RawMessage(`{}`)}, ""},
		{"id of an escaped backslash and u", `{"id":"\\ud800","method":"m","params":{}}`,
			Request{`\ud800`, "m", json.RawMessage(`{}`)}, ""},
		{"method of 64 chars", `{"id":"1","method":"` + strings.Repeat("a", 64) + `","params":{}}`,
			Request{"1", strings.Repeat("a", 64), json.RawMessage(`{}`)}, ""},

		{"params missing", `{"id":"1","method":"ping"}`, Request{}, "request has no params"},
		{"id missing", `{"method":"ping","params":{}}`, Request{}, "request id"},
		{"id empty", `{"id":"","method":"ping","params":{}}`, Request{}, "request id"},
		{"id number", `{"id":1,"method":"ping","params":{}}`, Request{}, "request id"},
		{"id null", `{"id":null,"method":"ping","params":{}}`, Request{}, "request id"},
		{"id too long", `{"id":"` + long + `i","method":"m","params":{}}`, Request{}, "request id"},
		{"id too long in UTF-16 units", `{"id":"` + emoji + `a","method":"m","params":{}}`, Request{}, "request id"},
		{"keys are case-sensitive", `{"ID":"1","method":"ping","params":{}}`, Request{}, "request id"},
		{"method missing", `{"id":"1","params":{}}`, Request{}, "request method"},
		{"method empty", `{"id":"1","method":"","params":{}}`, Request{}, "request method"},
		{"method not a string", `{"id":"1","method":["ping"],"params":{}}`, Request{}, "request method"},
		{"method bad start", `{"id":"1","method":"1ping","params":{}}`, Request{}, "request method"},
		{"method bad char", `{"id":"1","method":"pi ng","params":{}}`, Request{}, "request method"},
		{"method too long", `{"id":"1","method":"` + strings.Repeat("a", 65) + `","params":{}}`, Request{}, "request method"},
		{"array", `[{"id":"1","method":"m","params":{}}]`, Request{}, "not a JSON object"},
		{"null", `null`, Request{}, "not a JSON object"},
		{"invalid json", `{"id":"1",}`, Request{}, "not a JSON object"},
		{"invalid utf-8", "{\"id\":\"\xff\",\"method\":\"m\",\"params\":{}}", Request{}, "invalid UTF-8"},
		// A lone surrogate escape decodes to U+FFFD: answered so, the id would not be the one the client waits on.
		{"id of a lone high surrogate", `{"id":"a\ud800","method":"m","params":{}}`, Request{}, msgLoneSurrogateID},
		{"id of a lone low surrogate", `{"id":"\udc00a","method":"m","params":{}}`, Request{}, msgLoneSurrogateID},
		{"id of a reversed pair", `{"id":"\ude00\ud83d","method":"m","params":{}}`, Request{}, msgLoneSurrogateID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeRequest([]byte(tc.frame))
			if tc.err == "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
				return
			}
			require.ErrorIs(t, err, ErrMalformed)
			require.ErrorContains(t, err, tc.err)
			require.Equal(t, Request{}, got)
		})
	}
}

// DecodeRequest's result must not alias the frame: the Reader reuses its buffer.
func TestDecodeRequestCopies(t *testing.T) {
	frame := []byte(`{"id":"1","method":"m","params":{"a":1}}`)
	req, err := DecodeRequest(frame)
	require.NoError(t, err)
	for i := range frame {
		frame[i] = ' '
	}
	require.Equal(t, `{"a":1}`, string(req.Params))
}

func TestValidMethod(t *testing.T) {
	for name, ok := range map[string]bool{
		"ping": true, "msg.send": true, "task.waitStatus": true, "a": true, "Z9._-": true,
		strings.Repeat("m", 64): true, strings.Repeat("m", 65): false,
		"": false, "9a": false, ".a": false, "_a": false, "a b": false, "a/b": false, "é": false, "a\n": false,
	} {
		require.Equal(t, ok, ValidMethod(name), "%q", name)
	}
}

// BenchmarkDecodeRequest decodes a delegate.request frame with DecodeRequest and with the reference decoding it
// replaced (fuzz_test.go), in the same run.
//
//	go test ./broker/wire -run '^$' -bench DecodeRequest -benchmem
func BenchmarkDecodeRequest(b *testing.B) {
	frame := []byte(`{"id":"c1942","method":"delegate.request","params":{"prompt":"find X in the tree and report",` +
		`"description":"look for X","budgetTokens":1000,"model":"anthropic/m1","commandId":"b-12-345"}}`)
	for _, d := range []struct {
		name   string
		decode func([]byte) (Request, error)
	}{{"one-scan", DecodeRequest}, {"reference", decodeRequestReference}} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.decode(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestEachMember(t *testing.T) {
	type member struct{ key, value string }
	for _, tc := range []struct {
		name, obj string
		want      []member
		object    bool
	}{
		{"empty", `{}`, nil, true},
		{"in order, duplicates too", `{"k":"v","a":1,"k":2}`, []member{{"k", `"v"`}, {"a", "1"}, {"k", "2"}}, true},
		{"nested values whole", `{"a":{"x":"}"},"b":[1,{"k":2}]}`, []member{{"a", `{"x":"}"}`}, {"b", `[1,{"k":2}]`}}, true},
		{"escaped key decoded", `{"\u006b":3}`, []member{{"k", "3"}}, true},
		{"whitespace", " { \"a\" : 1 , \"b\" : \"k\" } ", []member{{"a", "1"}, {"b", `"k"`}}, true},
		{"not an object", `["k"]`, nil, false},
		{"null", `null`, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []member
			require.Equal(t, tc.object, EachMember([]byte(tc.obj), func(k, v []byte) {
				got = append(got, member{string(k), string(v)})
			}))
			require.Equal(t, tc.want, got)
		})
	}
}

// TestEachMemberAllocatesOneBuffer: EachMember allocates nothing for keys without an escape, and for escaped ones one
// buffer, grown to the longest and reused, however many members: a frame of keys a client made up costs no string a
// key, as decoding each to a string cost.
func TestEachMemberAllocatesOneBuffer(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		most float64
	}{
		{"plain", `"k%d"`, 0},
		{"escaped", `"\u006b%d"`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := []byte{'{'}
			for i := range 10000 {
				if i > 0 {
					obj = append(obj, ',')
				}
				obj = fmt.Appendf(obj, tc.key+`:[%d]`, i, i)
			}
			obj = append(obj, '}')
			n := 0
			require.LessOrEqual(t, testing.AllocsPerRun(10, func() {
				n = 0
				EachMember(obj, func(k, v []byte) { n++ })
			}), tc.most)
			require.Equal(t, 10000, n)
		})
	}
}

// TestDecodeRequestOfMadeUpKeysAllocatesNoStringPerKey: a request frame of its id, method and params and a frame's
// worth of top-level keys it does not read, escaped, is decoded comparing each key where it is (EachMember), not
// decoding each to a string for each of the three it looks for: that cost 10 MB for a frame of 256 KiB, 38 times the
// frame, for every frame a peer sends, before its hello.
func TestDecodeRequestOfMadeUpKeysAllocatesNoStringPerKey(t *testing.T) {
	frame := []byte(`{"id":"1","method":"ping","params":{}`)
	keys := 0
	for ; len(frame) < DefaultMaxFrame-64; keys++ {
		frame = fmt.Appendf(frame, `,"\u0061%x":0`, keys)
	}
	frame = append(frame, '}')
	var req Request
	var err error
	// NB: the id's and the method's strings, and the buffer of the longest escaped key, not a count of keys.
	require.LessOrEqual(t, testing.AllocsPerRun(5, func() { req, err = decodeValidRequest(frame, "") }), float64(8),
		"allocations for %d made-up keys", keys)
	require.NoError(t, err)
	require.Equal(t, Request{ID: "1", Method: "ping", Params: json.RawMessage(`{}`)}, req)
}
