package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
)

// fuzzLimit is the smallest cap, so that short fuzz inputs reach the oversize paths.
const fuzzLimit = MaxFrameFloor

// readOutcome is everything a Reader reports about a stream: the frames and the final error's text.
type readOutcome struct {
	Frames []string
	Err    string
}

// Caps a fuzz Reader of frames is given below the configurable floor (newReader), so that inputs of tens of
// bytes reach what a configured Reader reaches only with kilobytes: a frame of exactly the cap, one over it, blank
// lines counting toward it, and a line longer than the read-ahead spilling into chunks. The fuzzer minimises every
// input it finds new, and seeds of a kilobyte kept it minimising; the table of TestReadFrame still reads them at the
// floor itself.
const (
	fuzzFrameCap       = 48
	fuzzFrameReadAhead = 16
)

func FuzzReadFrame(f *testing.F) {
	for _, seed := range []string{
		"", "\n", "{}\n", "{}", "{}\r\n{}\n", "\n\n{}\n \n", "{}{}\n", "[1]\n", "{\"a\":\"\xff\"}\n",
		"{\"id\":\"1\",\"method\":\"ping\",\"params\":null}\n",
		object(fuzzFrameCap-1) + "\n", object(fuzzFrameCap) + "\n", object(fuzzFrameCap-2) + "\r\n{}\n",
		"{}\n" + object(fuzzFrameCap+10), "{\"a\":1}\r", "\r", " {\"a\":[1,2,{\"b\":null}]} \n",
		" \n \n" + object(fuzzFrameCap-5) + "\n", object(fuzzFrameReadAhead+4) + "\n{}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var outcomes []readOutcome
		for _, split := range []func([]byte) io.Reader{splits["whole"], splits["halves"], splits["one byte"]} {
			frames, err := readFrames(newReader(split(data), fuzzFrameCap, fuzzFrameReadAhead))
			require.True(t, err == io.EOF || errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrMalformed) ||
				errors.Is(err, ErrTruncated), "unexpected error %v", err)
			for _, fr := range frames {
				require.Less(t, len(fr), fuzzFrameCap)
				require.NotContains(t, fr, "\n")
				require.True(t, utf8.ValidString(fr))
				require.True(t, json.Valid([]byte(fr)))
				require.Equal(t, byte('{'), bytes.TrimLeft([]byte(fr), " \t\r")[0])
			}
			outcomes = append(outcomes, readOutcome{frames, err.Error()})
		}
		require.Equal(t, outcomes[0], outcomes[1], "whole vs halves")
		require.Equal(t, outcomes[0], outcomes[2], "whole vs one byte at a time")
	})
}

func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","method":"ping","params":null}`,
		`{"id":"1","method":"hello","params":{"protocol":1,"runId":"r","taskId":"t","token":"k"}}`,
		`{"id":"1","method":"hello","params":{"protocol":1.0,"runId":"","taskId":"t","token":7}}`,
		`{"id":"1","id":"2","method":"m","params":[]}`,
		`{"ID":"1","method":"m","params":{}}`,
		`{"id":"\ud800","method":"a.b-c_d","params":"x"}`,
		`{"id":"1","method":"ping"}`, `[]`, `null`, `{`, "{\"id\":\"\xff\"}", `{"id":"1","method":"9","params":0}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := DecodeRequest(frame)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		require.True(t, ValidMethod(req.Method))
		require.True(t, req.ID != "" && UTF16Len(req.ID) <= MaxIDLen)
		require.True(t, json.Valid(req.Params))

		// What we frame, we decode to the same request. NB: framed as a connection frames it, not by json.Marshal,
		// which escapes <, > and & in the params where json.Compact keeps them.
		enc, err := AppendFrame(nil, req, 0)
		require.NoError(t, err)
		again, err := DecodeRequest(bytes.TrimSuffix(enc, []byte{'\n'}))
		require.NoError(t, err)
		require.Equal(t, req.ID, again.ID)
		require.Equal(t, req.Method, again.Method)
		var compact bytes.Buffer
		require.NoError(t, json.Compact(&compact, req.Params))
		require.Equal(t, compact.String(), string(again.Params))

		if req.Method == MethodHello {
			if _, err := DecodeHello(req.Params); err != nil {
				require.Equal(t, &Error{Code: CodeAuth, Message: MsgHelloRejected}, err)
			}
		}
	})
}

// decodeRequestReference is DecodeRequest as first written, straightforwardly: the member map of
// encoding/json and a second decode of id and method. DecodeRequest must agree with it on every input.
func decodeRequestReference(frame []byte) (Request, error) {
	if !utf8.Valid(frame) {
		return Request{}, malformed("invalid UTF-8")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(frame, &fields); err != nil || fields == nil {
		return Request{}, malformed("request is not a JSON object")
	}
	str := func(key string) (string, bool) {
		raw, ok := fields[key]
		if !ok || len(raw) == 0 || raw[0] != '"' {
			return "", false
		}
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	}
	id, ok := str("id")
	if !ok || id == "" || UTF16Len(id) > MaxIDLen {
		return Request{}, malformed("request id must be a string of 1..256 characters")
	}
	if loneSurrogateReference(string(fields["id"])) {
		return Request{}, malformed(msgLoneSurrogateID)
	}
	method, ok := str("method")
	if !ok || !ValidMethod(method) {
		return Request{}, malformed("request method must match ^[a-zA-Z][a-zA-Z0-9._-]{0,63}$")
	}
	params, ok := fields["params"]
	if !ok {
		return Request{}, malformed("request has no params")
	}
	return Request{ID: id, Method: method, Params: params}, nil
}

// FuzzDecodeRequestAgreesWithReference: the one-scan DecodeRequest answers every input as the reference does.
func FuzzDecodeRequestAgreesWithReference(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","method":"ping","params":null}`, `{"id":"1","id":"2","method":"m","params":[]}`,
		`{"ID":"1","method":"m","params":{}}`, `{"i\u0064":"1","method":"m","params":{}}`,
		`{"id":"\ud800","method":"a.b-c_d","params":"x"}`, `{"id":"a\"b","method":"m","params":{"x":"}\"]"}}`,
		` { "id" : "1" , "method" : "m" , "params" : [ 1 , { "a" : [ ] } ] , "x" : -1.5e3 } `,
		`{"id":"1","method":"ping"}`, `[]`, `null`, `{`, `{}`, "{\"id\":\"\xff\"}", `"x"`, `1`,
		`{"id":"1","method":"m","params":true,"params":false}`, `{"id":"1","method":"m","params":null}x`,
		`{"id":"1","method":"\u0070ing","params":0}`, `{"id":null,"method":"m","params":0}`,
		"{\"id\":\"1\",\"method\":\"m\",\"params\":{\"a\":\"\\\\\"}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		got, gotErr := DecodeRequest(frame)
		want, wantErr := decodeRequestReference(frame)
		require.Equal(t, wantErr, gotErr, "%q", frame)
		require.Equal(t, want, got, "%q", frame)
	})
}

// genericFrame is AppendFrame's encoding through encoding/json, which appendPlain must reproduce byte for byte.
func genericFrame(v any) ([]byte, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// requireEncodesAsEncodingJSON: AppendFrame appends v's frame as encoding/json encodes it, byte for byte (from Go
// 1.27 up to the two spellings jsonref.Comparable names), or fails as encoding/json fails, appending nothing.
func requireEncodesAsEncodingJSON(t *testing.T, v any) {
	want, wantErr := genericFrame(v)
	got, gotErr := AppendFrame([]byte("prefix"), v, 0)
	if wantErr != nil {
		require.Error(t, gotErr)
		require.Equal(t, "prefix", string(got))
		return
	}
	require.NoError(t, gotErr)
	want = append([]byte("prefix"), want...)
	require.Equal(t, string(jsonref.Comparable(want)), string(jsonref.Comparable(got)), "%#v", v)
}

// FuzzAppendResultAgreesWithEncodingJSON: a success response's frame is encoding/json's, byte for byte, whatever
// the id and the result; a result that is not JSON fails as encoding/json fails.
func FuzzAppendResultAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range [][2]string{
		{"c1", `{"grandchildTaskRef":"gc-1","admitted":true}`}, {"1", ` { "a" : [ 1 , 2 ] } `}, {"x", `null`},
		{"<&>", `"<&>\u2028"`}, {"a\"b", `1`}, {"é", `"é"`}, {"\u2028", `{}`}, {"t\x01", `[]`}, {"k", `{"a":`},
		{"", ``}, {"id", "\"\xff\""}, {"id", "{\"a\":\"\u2029\"}"}, {"\\", `true`},
	} {
		f.Add(seed[0], []byte(seed[1]), seed[1] == "")
	}
	f.Fuzz(func(t *testing.T, id string, result []byte, nilResult bool) {
		r := Response{ID: id, Result: result}
		if nilResult {
			r.Result = nil
		}
		requireEncodesAsEncodingJSON(t, r)
	})
}

// FuzzAppendCompactResultAgreesWithResponse: a CompactResponse whose result is compact, valid JSON (as its producer
// guarantees) has the frame of the Response with the same id and result, byte for byte.
func FuzzAppendCompactResultAgreesWithResponse(f *testing.F) {
	for _, seed := range [][2]string{
		{"c1", `{"events":[{"a":"\u003c\u2028"}],"nextSeq":3,"hasMore":false}`}, {"1", ` { "a" : [ 1 , 2 ] } `},
		{"big", `"` + strings.Repeat("a", 1100) + `"`},
		{"x", `null`}, {"<&>", `"<&>\u2028"`}, {"a\"b", `1`}, {"é", `"é"`}, {"t\x01", `[]`}, {"id", "\"\xff\""},
	} {
		f.Add(seed[0], []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, id string, result []byte) {
		var compact bytes.Buffer
		if json.Compact(&compact, result) != nil {
			t.Skip("a producer of a CompactResponse writes valid JSON")
		}
		want, err := AppendFrame(nil, Response{ID: id, Result: compact.Bytes()}, 0)
		got, gotErr := AppendFrame(nil, CompactResponse{ID: id, Result: compact.Bytes()}, 0)
		require.Equal(t, err, gotErr)
		require.Equal(t, string(want), string(got))
		requireEncodesAsEncodingJSON(t, CompactResponse{ID: id, Result: compact.Bytes()})
		got, gotErr = AppendCompactResponse([]byte("x"), id, compact.Bytes(), 0) // after bytes already there
		require.Equal(t, err, gotErr)
		require.Equal(t, "x"+string(want), string(got))
		if n := len(want); err == nil && n-1 >= MaxFrameFloor { // a cap one byte short: refused, dst as it was
			got, err = AppendCompactResponse([]byte("xyz"), id, compact.Bytes(), n-1)
			require.ErrorIs(t, err, ErrFrameTooLarge)
			require.Equal(t, "xyz", string(got))
		}
	})
}

// FuzzAppendCompactEventAgreesWithEvent: a push whose data is compact, valid JSON (as its producer guarantees) has
// the frame of the Event with the same name, data and seq, byte for byte, the cap included.
func FuzzAppendCompactEventAgreesWithEvent(f *testing.F) {
	for _, seed := range []struct {
		name, data string
		seq        uint64
	}{
		{EventMailboxMessage, `{"id":"m1","body":"\u003c\u2028"}`, 0}, {EventTeamEvent, ` { "a" : [ 1 ] } `, 1 << 63},
		{"big", `"` + strings.Repeat("a", 1100) + `"`, 1}, {"e\"v", `1`, 7}, {"é", `null`, 1}, {"t\x01", `[]`, 2},
		{"x", "\"\xff\"", 3},
	} {
		f.Add(seed.name, []byte(seed.data), seed.seq)
	}
	f.Fuzz(func(t *testing.T, name string, data []byte, seq uint64) {
		var compact bytes.Buffer
		if json.Compact(&compact, data) != nil {
			t.Skip("a producer of a compact push writes valid JSON")
		}
		want, err := AppendFrame(nil, Event{Name: name, Data: compact.Bytes(), Seq: seq}, 0)
		got, gotErr := AppendCompactEvent([]byte("x"), name, compact.Bytes(), seq, 0) // after bytes already there
		require.Equal(t, err, gotErr)
		require.Equal(t, "x"+string(want), string(got))
		if n := len(want); err == nil && n-1 >= MaxFrameFloor { // a cap one byte short: refused, dst as it was
			got, err = AppendCompactEvent([]byte("xyz"), name, compact.Bytes(), seq, n-1)
			require.ErrorIs(t, err, ErrFrameTooLarge)
			require.Equal(t, "xyz", string(got))
		}
	})
}

// FuzzAppendCompactParamsAgreesWithRequest: a CompactRequest whose params are compact, valid JSON (as a client's
// json.Marshal writes them) has the frame of the Request with the same fields, byte for byte.
func FuzzAppendCompactParamsAgreesWithRequest(f *testing.F) {
	for _, seed := range [][3]string{
		{"1", "delegate.request", `{"prompt":"p","budgetTokens":1000,"commandId":"c-1"}`}, {"2", "ping", `null`},
		{"<&>", "a.b", `"<&>\u2028"`}, {"a\"b", "m", `1`}, {"é", "m", `"é"`}, {"t\x01", "m", `[]`},
		{"id", "m\n", "\"\xff\""}, {"1", "m", ` { "a" : [ 1 , 2 ] } `},
	} {
		f.Add(seed[0], seed[1], []byte(seed[2]))
	}
	f.Fuzz(func(t *testing.T, id, method string, params []byte) {
		var compact bytes.Buffer
		if json.Compact(&compact, params) != nil {
			t.Skip("a producer of a CompactRequest writes valid JSON")
		}
		want, err := AppendFrame(nil, Request{ID: id, Method: method, Params: compact.Bytes()}, 0)
		got, gotErr := AppendFrame(nil, CompactRequest{ID: id, Method: method, Params: compact.Bytes()}, 0)
		require.Equal(t, err, gotErr)
		require.Equal(t, string(want), string(got))
		requireEncodesAsEncodingJSON(t, CompactRequest{ID: id, Method: method, Params: compact.Bytes()})
	})
}

// FuzzMembersAgreesWithMapDecoding: on every valid JSON value, the members EachMember finds, the last of each key
// kept, are the map decoding it gives.
func FuzzMembersAgreesWithMapDecoding(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"p","commandId":"c-1"}`, `{"commandId":null,"x":1}`, `{"\u0063ommandId":"c","x":[1,{"commandId":2}]}`,
		`{"commandId":1,"a":"commandId","commandId":2}`, ` { "a" : { } , "commandId" : "x" } `, `{}`, `[]`, `"s"`,
		`{"a":"\"}","commandId":"\\"}`, "{\"commandId\":\"\xff\"}", "{\"\xff\":1}",
		`{"\ud83d":1,"\ude00":2,"a\u0062":3,"ab":4}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !json.Valid(obj) {
			t.Skip("EachMember is given valid JSON only")
		}
		got := map[string]json.RawMessage{}
		object := EachMember(obj, func(k, v []byte) { got[string(k)] = v })
		var want map[string]json.RawMessage
		if json.Unmarshal(obj, &want) != nil || want == nil {
			require.False(t, object, "%q is not an object", obj)
			require.Empty(t, got)
			return
		}
		require.True(t, object, "%q", obj)
		if len(want) == 0 {
			require.Empty(t, got)
			return
		}
		require.Equal(t, want, got, "%q", obj)
	})
}

// FuzzReadRequestAgreesWithDecodeRequest: reading a request decodes the frame as DecodeRequest does.
func FuzzReadRequestAgreesWithDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","method":"ping","params":null}`, `{"i\u0064":"1","method":"m","params":{}}`, `[]`, `{`,
		`{"id":"1","method":"m","params":true,"params":false}`, "{\"id\":\"\xff\"}", `{"id":"1","method":"ping"}`,
		`{"id":"1","method":"pin\u0067","params":{}}`, `{"id":"1","method":"ping ","params":{}}`, `{"id":"1","method":"ping","params":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		frame, frameErr := NewReader(bytes.NewReader(append(line, '\n')), fuzzLimit).ReadFrame()
		got, err := NewReader(bytes.NewReader(append(line, '\n')), fuzzLimit).ReadRequest()
		inPlace, inPlaceErr := NewReader(bytes.NewReader(append(line, '\n')), fuzzLimit).ReadRequestInPlace()
		require.Equal(t, err, inPlaceErr)
		require.Equal(t, got, inPlace, "%q: in place", line)
		if frameErr != nil {
			require.Equal(t, frameErr, err)
			return
		}
		want, wantErr := DecodeRequest(frame)
		require.Equal(t, wantErr, err, "%q", line)
		require.Equal(t, want, got, "%q", line)
		if bytes.IndexByte(line, '\n') >= 0 {
			return
		}
		// After a request that leaves the reader a last method (ReadRequest then takes a method spelled as it
		// without decoding it), and after the line itself: the same decoding.
		rd := NewReader(bytes.NewReader([]byte(`{"id":"0","method":"ping","params":null}`+"\n"+string(line)+"\n"+string(line)+"\n")), fuzzLimit)
		_, err = rd.ReadRequest()
		require.NoError(t, err)
		for range 2 {
			got, err := rd.ReadRequest()
			require.Equal(t, wantErr, err, "%q after a request", line)
			require.Equal(t, want, got, "%q after a request", line)
		}
	})
}

// readResponseReference is how a client read a frame before ReadResponse: a push when its "event" member is not
// null (its name decoded into a string, or the frame refused), else json.Unmarshal into a Response. Members are
// matched by their exact names, as Response.UnmarshalJSON and a JavaScript client (pi-crew's) match them: a struct
// probe would take "Event" or "evEnt" for "event", as encoding/json matches struct fields regardless of case.
func readResponseReference(frame []byte) (resp Response, push string, isPush bool, err error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(frame, &members); err != nil {
		return Response{}, "", false, err
	}
	if ev, ok := members["event"]; ok && string(ev) != "null" {
		var name string
		if err := json.Unmarshal(ev, &name); err != nil {
			return Response{}, "", false, err
		}
		return Response{}, name, true, nil
	}
	err = json.Unmarshal(frame, &resp)
	return resp, "", false, err
}

// FuzzReadResponseAgreesWithUnmarshal: a client reading a frame gets the push, the response or the refusal that
// decoding it with encoding/json gave.
func FuzzReadResponseAgreesWithUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","result":{"a":[1, 2]}}`, `{"id":"1","result":null}`, `{"id":"1"}`, `{"result":1}`,
		`{"id":"1","error":{"code":"auth","message":"no"}}`, `{"id":"1","error":null,"result":2}`,
		`{"id":"1","error":{"code":1}}`, `{"event":"team.event","data":{},"seq":1}`, `{"event":null,"id":"2","result":0}`,
		`{"event":5}`, `{"evEnt":"team.event","data":{},"seq":1}`, `{"ID":"1","Result":1}`, `{"id":"1","ERROR":{"code":"auth","message":"no"}}`, `{"event":"a\u0062"}`, `{"i\u0064":"x","result":"y","id":"z"}`, `{"id":7,"result":1}`, `[]`, `{"id":"\"","result":"\\"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		frame, frameErr := NewReader(bytes.NewReader(append(line, '\n')), fuzzLimit).ReadFrame()
		got, push, err := NewReader(bytes.NewReader(append(line, '\n')), fuzzLimit).ReadResponse()
		if frameErr != nil {
			require.Equal(t, frameErr, err)
			return
		}
		want, wantName, wantPush, wantErr := readResponseReference(frame)
		require.Equal(t, wantPush, push.Frame != nil, "%q", line)
		if wantPush {
			require.NoError(t, err)
			require.Equal(t, wantName, push.Name)
			require.Equal(t, string(frame), string(push.Frame))
			return
		}
		if wantErr != nil {
			require.ErrorIs(t, err, ErrMalformed, "%q", line)
			return
		}
		require.NoError(t, err, "%q", line)
		require.Equal(t, want, got, "%q", line)
	})
}

// FuzzAppendRequestAgreesWithEncodingJSON: a request's frame is encoding/json's, byte for byte, whatever the id,
// the method and the params; params that are not JSON fail as encoding/json fails.
func FuzzAppendRequestAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range [][3]string{
		{"1", "delegate.request", `{"prompt":"p","commandId":"c"}`}, {"2", "ping", ``}, {"x", "m", ` [ 1 , "<&>" ] `},
		{"a\"b", "m", `1`}, {"é", "m", `"\u2028"`}, {"1", "bad method", `{}`}, {"1", "m\"", `{}`}, {"k", "m", `{"a":`},
		{"id", "m", "\"\xff\""},
	} {
		f.Add(seed[0], seed[1], []byte(seed[2]), seed[2] == "")
	}
	f.Fuzz(func(t *testing.T, id, method string, params []byte, nilParams bool) {
		r := Request{ID: id, Method: method, Params: params}
		if nilParams {
			r.Params = nil
		}
		requireEncodesAsEncodingJSON(t, r)
	})
}

// FuzzAppendEventAgreesWithEncodingJSON: a push's frame is encoding/json's, byte for byte, whatever its name, data
// and seq; data that is not JSON fails as encoding/json fails.
func FuzzAppendEventAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range []struct {
		name, data string
		seq        uint64
	}{
		{EventMailboxMessage, `{"id":"m1","body":"<&>"}`, 0}, {EventTeamEvent, ` { "a" : [ 1 ] } `, 1 << 63},
		{"e\"v", `1`, 7}, {"é", `null`, 1}, {"x", ``, 0}, {"x", `{"a":`, 2}, {"x", "\"\xff\"", 3},
	} {
		f.Add(seed.name, []byte(seed.data), seed.seq, seed.data == "")
	}
	f.Fuzz(func(t *testing.T, name string, data []byte, seq uint64, nilData bool) {
		e := Event{Name: name, Data: data, Seq: seq}
		if nilData {
			e.Data = nil
		}
		requireEncodesAsEncodingJSON(t, e)
	})
}
