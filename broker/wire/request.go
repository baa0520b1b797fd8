package wire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events/jsonscan"
)

// MaxIDLen is the longest request id, in UTF-16 code units (see UTF16Len).
const MaxIDLen = 256

// msgLoneSurrogateID is why a request whose id holds a lone UTF-16 surrogate is malformed (HoldsLoneSurrogate).
const msgLoneSurrogateID = "request id holds a lone UTF-16 surrogate, which is no Unicode text"

// maxMethodLen is the longest method name, in bytes (method names are ASCII).
const maxMethodLen = 64

// Request is a request frame, client to broker: {"id": …, "method": …, "params": …}. The params key is always
// present on the wire (pi-crew refuses a request without it); nil Params encodes as null.
//
// A Request is a plain value; DecodeRequest returns one that does not alias the frame.
type Request struct {
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// CompactRequest is a Request whose Params its producer wrote as compact, valid JSON: json.Marshal's output, as a
// client's params are. AppendFrame copies them as they are rather than compacting them again; the bytes are those of
// the Request with the same fields, as long as the producer keeps its word (params holding a newline are compacted
// all the same, so a frame stays one line).
type CompactRequest struct {
	ID     string
	Method string
	Params json.RawMessage
}

// MarshalJSON encodes the Request with the same fields.
func (r CompactRequest) MarshalJSON() ([]byte, error) { return marshal(Request(r)) }

// DecodeRequest parses and validates a request frame as pi-crew's broker does (D§7.3):
//
//   - a single JSON object in valid UTF-8; keys match exactly and a repeated key takes its last value, as in
//     JSON.parse (encoding/json would match "ID" to "id");
//   - "id": a string of 1..MaxIDLen UTF-16 code units, without a lone surrogate (HoldsLoneSurrogate);
//   - "method": a string that passes ValidMethod;
//   - "params": present, any JSON value (null included).
//
// Every failure matches ErrMalformed: pi-crew answers an invalid request by closing the connection with no frame
// (code protocol), since a request id that may itself be invalid cannot be echoed.
func DecodeRequest(frame []byte) (Request, error) {
	if !utf8.Valid(frame) {
		return Request{}, malformed("invalid UTF-8")
	}
	// NB: one validation pass and one scan of the top level instead of a map of every member and a second
	// decode of two of them: a request frame is decoded for every call over the socket. The test keeps the
	// straightforward decoding as the reference this must agree with on every input.
	if !validJSON(frame) {
		return Request{}, malformed("request is not a JSON object")
	}
	return ownParams(decodeValidRequest(frame, ""))
}

// ReadRequest reads the next frame and decodes it as DecodeRequest does, without checking a second time what
// ReadFrame checked (one JSON object in valid UTF-8). Errors are ReadFrame's, or DecodeRequest's (ErrMalformed),
// which do not stop the Reader: the caller decides.
func (r *Reader) ReadRequest() (Request, error) {
	return ownParams(r.ReadRequestInPlace())
}

// ReadRequestInPlace is ReadRequest but for the request's Params, which alias the Reader's buffer: they are valid
// until the next read only, and a caller that keeps them longer copies them. The broker reads every request this
// way: a command's parse copies what it keeps (commands.ParseMembers), so the copy of its params, one allocation
// of every request, would be made for nothing.
func (r *Reader) ReadRequestInPlace() (Request, error) {
	frame, err := r.ReadFrame()
	if err != nil {
		return Request{}, err
	}
	req, err := decodeValidRequest(frame, r.method)
	if err == nil {
		r.method = req.Method
	}
	return req, err
}

// ownParams returns req with params of its own, not the frame's.
func ownParams(req Request, err error) (Request, error) {
	if err == nil {
		req.Params = append(json.RawMessage(nil), req.Params...)
	}
	return req, err
}

// decodeValidRequest is DecodeRequest for a frame that is known to be valid JSON in valid UTF-8, the Params
// aliasing the frame. A method spelled as last, a method decoded before, is given as last: a connection mostly calls
// the same few methods, and its method name then costs no allocation.
func decodeValidRequest(frame []byte, last string) (Request, error) {
	id, method, params, ok := requestMembers(frame)
	if !ok {
		return Request{}, malformed("request is not a JSON object")
	}
	idStr, ok := jsonString(id)
	if !ok || idStr == "" || UTF16Len(idStr) > MaxIDLen {
		return Request{}, malformed("request id must be a string of 1..256 characters")
	}
	if HoldsLoneSurrogate(id) {
		// NB: decoded, it holds U+FFFD there: an answer would echo an id other than the one the client waits on.
		return Request{}, malformed(msgLoneSurrogateID)
	}
	var methodStr string
	if len(method) >= 2 && method[0] == '"' && last != "" && string(method[1:len(method)-1]) == last {
		methodStr, ok = last, true // NB: the same bytes as a valid method, which needs no escape
	} else {
		methodStr, ok = jsonString(method)
	}
	if !ok || !ValidMethod(methodStr) {
		return Request{}, malformed("request method must match ^[a-zA-Z][a-zA-Z0-9._-]{0,63}$")
	}
	if params == nil {
		return Request{}, malformed("request has no params")
	}
	return Request{ID: idStr, Method: methodStr, Params: params}, nil
}

// requestKeys are the members a request frame is made of, in the order requestMembers returns them.
var requestKeys = []string{"id", "method", "params"}

// requestMembers returns the raw values of the last "id", "method" and "params" members of frame, which must be
// valid JSON (json.Valid); ok is false when it is not an object. Keys match exactly, as in JSON.parse.
func requestMembers(frame []byte) (id, method, params []byte, ok bool) {
	var v [3][]byte
	ok = lastMembers(frame, requestKeys, v[:])
	return v[0], v[1], v[2], ok
}

// lastMembers sets vals[j] to the raw value of the last top-level member of obj named keys[j] (after unescaping,
// matched exactly, as in JSON.parse), and leaves it nil when there is none. obj must be valid JSON; ok is false when
// it is not an object.
//
// NB: the keys are compared as EachMember gives them, an escaped one decoded into its one buffer: decoded each to a
// string, for each of keys, a frame's worth of escaped keys a peer made up cost megabytes per frame, before its hello.
func lastMembers(obj []byte, keys []string, vals [][]byte) (ok bool) {
	return EachMember(obj, func(key, value []byte) {
		for j, k := range keys {
			if string(key) == k {
				vals[j] = value
			}
		}
	})
}

// EachMember calls fn with the key, decoded, and the raw value of every top-level member of obj, in order; obj must
// be valid JSON, as the params of a decoded Request are, and EachMember reports false, calling nothing, when it is not
// an object. The values alias obj, and so does a key without an escape; a key with one is decoded into a buffer
// reused from one member to the next: a key is valid only until fn returns (copy what is kept).
//
// The broker splits the params of every command this way, taking out the commandId in the same pass, where
// decoding them to a map and encoding them again cost more than the command's own parse; and reads the params of the
// methods it serves itself so. Why a buffer: nothing is allocated per member, where a string of every key (and
// json.Unmarshal's state for one with an escape) made a frame's worth of keys a client made up, tens of thousands,
// cost megabytes per request, which a credential's connections multiply. Only the buffer grows, to the longest
// escaped key.
func EachMember(obj []byte, fn func(key, value []byte)) bool {
	var buf []byte
	return eachMember(obj, func(key, value []byte) {
		if inner := key[1 : len(key)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			fn(inner, value)
			return
		}
		buf = jsonscan.AppendString(buf[:0], key, 0)
		fn(buf, value)
	})
}

// eachMember calls fn with the quoted key and the raw value of every top-level member of obj, valid JSON, in
// order; it reports false when obj is not an object.
func eachMember(obj []byte, fn func(key, value []byte)) bool {
	i := jsonscan.SkipSpace(obj, 0)
	if i == len(obj) || obj[i] != '{' {
		return false
	}
	i = jsonscan.SkipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		keyEnd := jsonscan.SkipString(obj, i)
		key := obj[i:keyEnd]
		i = jsonscan.SkipSpace(obj, keyEnd)
		i = jsonscan.SkipSpace(obj, i+1) // the colon
		valEnd := jsonscan.SkipValue(obj, i)
		fn(key, obj[i:valEnd])
		i = jsonscan.SkipSpace(obj, valEnd)
		if i < len(obj) && obj[i] == ',' {
			i = jsonscan.SkipSpace(obj, i+1)
		}
	}
	return true
}

// jsonString decodes raw, a valid JSON value, when it is a string (never from null, unlike unmarshalling into a
// string).
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), true // valid UTF-8 without escapes: the bytes are the string
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// ValidMethod reports whether name matches pi-crew's method syntax ^[a-zA-Z][a-zA-Z0-9._-]{0,63}$. A name that
// fails it is never sent (client code bad-method) and never dispatched.
func ValidMethod(name string) bool {
	if name == "" || len(name) > maxMethodLen || !isLetter(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !isLetter(c) && !('0' <= c && c <= '9') && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
