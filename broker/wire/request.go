package wire

import (
	"encoding/json"
	"unicode/utf8"
)

// MaxIDLen is the longest request id, in UTF-16 code units (see UTF16Len).
const MaxIDLen = 256

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

// DecodeRequest parses and validates a request frame as pi-crew's broker does (D§7.3):
//
//   - a single JSON object in valid UTF-8; keys match exactly and a repeated key takes its last value, as in
//     JSON.parse (encoding/json would match "ID" to "id");
//   - "id": a string of 1..MaxIDLen UTF-16 code units;
//   - "method": a string that passes ValidMethod;
//   - "params": present, any JSON value (null included).
//
// Every failure matches ErrMalformed: pi-crew answers an invalid request by closing the connection with no frame
// (code protocol), since a request id that may itself be invalid cannot be echoed.
func DecodeRequest(frame []byte) (Request, error) {
	if !utf8.Valid(frame) {
		return Request{}, malformed("invalid UTF-8")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(frame, &fields); err != nil || fields == nil {
		return Request{}, malformed("request is not a JSON object")
	}
	id, ok := stringField(fields, "id")
	if !ok || id == "" || UTF16Len(id) > MaxIDLen {
		return Request{}, malformed("request id must be a string of 1..256 characters")
	}
	method, ok := stringField(fields, "method")
	if !ok || !ValidMethod(method) {
		return Request{}, malformed("request method must match ^[a-zA-Z][a-zA-Z0-9._-]{0,63}$")
	}
	params, ok := fields["params"]
	if !ok {
		return Request{}, malformed("request has no params")
	}
	return Request{ID: id, Method: method, Params: params}, nil
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

// stringField returns fields[key] when it is a JSON string. Unmarshalling into a string would also accept null.
func stringField(fields map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := fields[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
