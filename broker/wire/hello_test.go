package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestDecodeHello(t *testing.T) {
	want := Hello{Protocol: 1, RunID: "run-1", TaskID: "task-1", Token: "secret"}
	long := strings.Repeat("r", 256)
	for _, tc := range []struct {
		name   string
		params string
		ok     bool
	}{
		{"valid", `{"protocol":1,"runId":"run-1","taskId":"task-1","token":"secret"}`, true},
		{"role is ignored", `{"protocol":1,"runId":"run-1","taskId":"task-1","token":"secret","role":"orchestrator"}`, true},
		{"protocol 1.0 is the number 1", `{"protocol":1.0,"runId":"run-1","taskId":"task-1","token":"secret"}`, true},
		{"protocol 2", `{"protocol":2,"runId":"run-1","taskId":"task-1","token":"secret"}`, false},
		{"protocol string", `{"protocol":"1","runId":"run-1","taskId":"task-1","token":"secret"}`, false},
		{"protocol missing", `{"runId":"run-1","taskId":"task-1","token":"secret"}`, false},
		{"runId empty", `{"protocol":1,"runId":"","taskId":"task-1","token":"secret"}`, false},
		{"taskId missing", `{"protocol":1,"runId":"run-1","token":"secret"}`, false},
		{"token not a string", `{"protocol":1,"runId":"run-1","taskId":"task-1","token":7}`, false},
		{"runId too long", `{"protocol":1,"runId":"` + long + `x","taskId":"task-1","token":"secret"}`, false},
		{"params null", `null`, false},
		{"params array", `[1]`, false},
		{"params absent", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeHello(json.RawMessage(tc.params))
			if tc.ok {
				require.NoError(t, err)
				require.Equal(t, want, got)
				return
			}
			// Always the same answer, whichever field was wrong.
			require.Equal(t, &Error{Code: CodeAuth, Message: "hello rejected"}, err)
		})
	}
	_, err := DecodeHello(json.RawMessage(`{"protocol":1,"runId":"` + long + `","taskId":"t","token":"k"}`))
	require.NoError(t, err)
}

func TestHelloStringHidesToken(t *testing.T) {
	h := Hello{Protocol: 1, RunID: "r", TaskID: "t", Token: "secret-token"}
	for _, s := range []string{h.String(), fmt.Sprint(h), fmt.Sprintf("%v %+v", h, h)} {
		require.NotContains(t, s, "secret-token")
	}
	require.Equal(t, "hello{protocol:1 runId:r taskId:t token:***}", h.String())
}

// decodeHelloReference is DecodeHello by encoding/json alone: each credential decoded by json.Unmarshal into a
// string, from a JSON string only (Unmarshal takes null as no change).
func decodeHelloReference(params []byte) (Hello, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(params, &fields) != nil || fields == nil {
		return Hello{}, false
	}
	var protocol float64
	if json.Unmarshal(fields["protocol"], &protocol) != nil || protocol != 1 {
		return Hello{}, false
	}
	h := Hello{Protocol: 1}
	for _, f := range []struct {
		key string
		dst *string
	}{{"runId", &h.RunID}, {"taskId", &h.TaskID}, {"token", &h.Token}} {
		raw := fields[f.key]
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, f.dst) != nil || *f.dst == "" ||
			len(utf16.Encode([]rune(*f.dst))) > 256 {
			return Hello{}, false
		}
	}
	return h, true
}

// FuzzDecodeHelloAgreesWithReference: DecodeHello accepts the params encoding/json accepts, as the same Hello, and
// refuses every other with the one answer; a Hello accepted and encoded again decodes to itself.
func FuzzDecodeHelloAgreesWithReference(f *testing.F) {
	for _, seed := range []string{
		`{"protocol":1,"runId":"run-1","taskId":"task-1","token":"secret"}`,
		`{"protocol":1e0,"runId":"r\u00e9","taskId":"t\ud83d\ude00","token":"k","role":"x"}`,
		`{"protocol":1,"runId":"r","runId":"","taskId":"t","token":"k"}`,
		`{"protocol":1,"runId":null,"taskId":"t","token":"k"}`,
		`{"protocol":1,"runId":"\ud800","taskId":"t","token":"k"}`,
		`{"Protocol":1,"RunId":"r","taskId":"t","token":"k"}`, `[]`, `null`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if !utf8.Valid(params) {
			return // a frame is valid UTF-8 before its params are read (ReadFrame)
		}
		got, err := DecodeHello(params)
		want, ok := decodeHelloReference(params)
		if !ok {
			require.Equal(t, &Error{Code: CodeAuth, Message: MsgHelloRejected}, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
		enc, err := json.Marshal(got)
		require.NoError(t, err)
		again, err := DecodeHello(enc)
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}

// TestDecodeHelloOfMadeUpKeysAllocatesNoMap: hello params of a frame's worth of keys it does not read, plain or
// escaped, are decoded without a map of them: decoded into one, they cost 6.6 MB for params of 256 KiB, 25 times
// the frame, for every hello any peer of the socket sends, before it is authenticated.
func TestDecodeHelloOfMadeUpKeysAllocatesNoMap(t *testing.T) {
	for _, key := range []string{`,"%x":0`, `,"\u0061%x":0`} {
		params := []byte(`{"protocol":1,"runId":"r","taskId":"t","token":"k"`)
		keys := 0
		for ; len(params) < DefaultMaxFrame-64; keys++ {
			params = fmt.Appendf(params, key, keys)
		}
		params = append(params, '}')
		var h Hello
		var err error
		// NB: the credentials' strings, the protocol's decoding and the buffer of the longest escaped key, not a
		// count of keys.
		require.LessOrEqual(t, testing.AllocsPerRun(5, func() { h, err = DecodeHello(params) }), float64(16),
			"allocations for %d made-up keys %s", keys, key)
		require.NoError(t, err)
		require.Equal(t, Hello{Protocol: 1, RunID: "r", TaskID: "t", Token: "k"}, h)
	}
}
