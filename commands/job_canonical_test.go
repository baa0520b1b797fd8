package commands

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// referenceCanonical is canonicalJSON done the slow, obvious way: decode,
// re-encode with sorted keys (encoding/json sorts map keys), numbers as
// JavaScript prints them. It cannot see duplicate keys (the last wins).
func referenceCanonical(raw []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing bytes
	}
	ok := true
	var conv func(any) any
	conv = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = conv(e)
			}
		case []any:
			for i, e := range x {
				x[i] = conv(e)
			}
		case json.Number:
			f, err := strconv.ParseFloat(string(x), 64)
			if err != nil || math.IsInf(f, 0) || f == 0 && math.Signbit(f) {
				ok = false
				return nil
			}
			return json.RawMessage(jsNumber(f))
		}
		return v
	}
	v = conv(v)
	if !ok {
		return nil, false
	}
	out, err := json.Marshal(v)
	return out, err == nil
}

var canonicalSeeds = []string{
	`{}`, `[]`, `{"a":1}`, `{"b":1,"a":2}`, `{"z":{"y":[3,{"b":true,"a":null}],"x":"s"},"a":[]}`,
	`{"path":"src/main.go","n":12}`, `"<a&b>"`, `"é\u2028\n\"q\""`, `{"é":1,"e":2,"\u00e9x":3}`,
	`1.0`, `1e3`, `-1.5e-7`, `12345678901234567890`, `0.1`, `100000000000000000000000`, `-0`, `-0.0`, `1e999`,
	` { "a" : [ 1 , 2 ] } `, `{"a":1,}`, `[1,]`, `{"a"}`, `"abc`, `tru`, `nul`, `{"a":1}x`, `01`, `"\ud800"`,
	`{"b":{"d":1,"c":2},"a":{"f":[{"h":1,"g":2}]}}`,
}

// FuzzCanonicalJSON: the scanner writes exactly what decoding and
// re-encoding writes, and refuses exactly what that refuses (duplicate keys
// aside, which only the scanner sees); it never panics.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got bytes.Buffer
		err := canonicalJSON(&got, raw, 0)
		want, ok := referenceCanonical(raw)
		if err != nil && hasDuplicateKey(raw) {
			return
		}
		require.Equal(t, ok, err == nil, "%q: scanner %v", raw, err)
		if ok {
			require.Equal(t, string(want), got.String(), "%q", raw)
		}
	})
}

// hasDuplicateKey reports whether some object of raw repeats a key.
func hasDuplicateKey(raw []byte) bool {
	var b bytes.Buffer
	err := canonicalJSON(&b, raw, 0)
	return err != nil && bytes.Contains([]byte(err.Error()), []byte("appears twice"))
}

func TestCanonicalJSONRefusals(t *testing.T) {
	for _, raw := range []string{`{"a":1,"a":2}`, `{"b":1,"a":2,"b":3}`, `-0`, `{"x":-0.0}`, `1e400`,
		`[[[[` + `]]]]`} {
		var b bytes.Buffer
		err := canonicalJSON(&b, []byte(raw), maxJSONDepth-2)
		require.ErrorIs(t, err, errNotJSONSafe, raw)
	}
}

// TestCanonicalJSONNestedOutOfOrder: objects nested in one another, each
// with its keys out of order, cost work in proportion to their size: every
// level used to read everything inside it again when it fell back to
// sorting, doubling the work per level, so a proxied call's arguments of
// 700 bytes nested 60 deep held the single writer for ever. Allocations
// stand for the work (each fallback allocates); the bound, linear in the
// depth, leaves room for the race detector's own allocations and is still
// far below the doubling (133,187 at depth 16 before).
func TestCanonicalJSONNestedOutOfOrder(t *testing.T) {
	for _, depth := range []int{16, maxJSONDepth} {
		raw := []byte(strings.Repeat(`{"b":`, depth) + "1" + strings.Repeat(`,"a":1}`, depth))
		var out bytes.Buffer
		allocs := testing.AllocsPerRun(1, func() {
			out.Reset()
			require.NoError(t, canonicalJSON(&out, raw, 0))
		})
		require.Less(t, allocs, float64(64*depth), "depth %d", depth)
		want, ok := referenceCanonical(raw)
		require.True(t, ok)
		require.Equal(t, string(want), out.String())
	}
}

// A key twice is refused at the top level of a grant's tool and of a
// proxied call's result as it is deeper in them (T3): decoding those
// objects into a map kept the last of the two, silently.
func TestKeyTwiceAtTheTopLevel(t *testing.T) {
	w := loopWorld(t, 1_000_000)
	tool := `{"name":"read","label":"Read","description":"d","description":"another",` +
		`"parameters":{"type":"object"},"sourceInfo":{"path":"/t","source":"pi","scope":"user","origin":"package"},` +
		`"callable":"mgr:read"}`
	o := w.send(orch("job.create", `{"jobId":"J","taskId":"W","tools":[`+tool+`]}`)) // nonce secret-1
	require.NotNil(t, o.err)
	require.Len(t, o.events, 1)
	p := events.PayloadAs[events.JobRejected](o.events[0])
	require.NotNil(t, p)
	require.Equal(t, reasonNotJSONSafe, p.Reason)
	require.Contains(t, p.Message, `key "description" appears twice`)

	for _, r := range []loopRequest{
		orch("job.create", `{"jobId":"J","taskId":"W","tools":`+loopGrant+`}`), // nonce secret-2
		orch("lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"root"}`),
		{events.RoleWorker, "proxy.request", `{"jobId":"J","requestId":"r1","nonce":"secret-2","tool":"read"}`},
		orch("manifest.revalidate", `{"jobId":"J","requestId":"r1","tools":`+loopGrant+`}`),
	} {
		require.Nil(t, w.send(r).err, "setup %s", r.method)
	}
	o = w.send(orch("proxy.complete", `{"jobId":"J","requestId":"r1","nonce":"secret-2",`+
		`"result":{"content":[{"type":"text","text":"a"}],"content":[{"type":"text","text":"b"}]}}`))
	require.NotNil(t, o.err)
	require.Equal(t, CodeBadParams, o.err.Code)
	require.Contains(t, o.err.Message, `key "content" appears twice`)
	require.Empty(t, o.events)
}

// T20 reads annotations.readOnlyHint as JSON.parse does, by its exact key: a tool is read-only only when that key
// holds true. A key spelled otherwise ("ReadOnlyHint", "READONLYHINT") is another key, which the tool's canonical
// JSON keeps as such, and does not make a tool read-only, nor overrule the readOnlyHint beside it.
func TestReadOnlyHintIsReadByItsExactKey(t *testing.T) {
	for _, tc := range []struct {
		annotations string
		readOnly    bool
	}{
		{`{"readOnlyHint":true}`, true},
		{`{"readOnlyHint":false}`, false},
		{`{"readOnlyHint":1}`, false},
		{`{"ReadOnlyHint":true}`, false},
		{`{"readonlyhint":true}`, false},
		{`{"readOnlyHint":false,"READONLYHINT":true}`, false},
		{`{"READONLYHINT":false,"readOnlyHint":true}`, true},
	} {
		t.Run(tc.annotations, func(t *testing.T) {
			item := `{"name":"edit","label":"Edit","description":"edit a file","parameters":{"type":"object"},` +
				`"annotations":` +
				tc.annotations + `,"sourceInfo":{"path":"/t/edit.ts","source":"pi","scope":"user",` +
				`"origin":"package"},"callable":"mgr:edit"}`
			tool, _, merr := parseTool(0, json.RawMessage(item))
			require.Nil(t, merr)
			require.Equal(t, tc.readOnly, tool.readOnly)
		})
	}
}
