package wire

import (
	"encoding/json"
	"fmt"
)

// Response is a response frame, broker to client, answering the request with the same ID. On the wire it is one of
// two shapes, never both:
//
//	{"id": …, "result": …}                             success (Error == nil; nil Result encodes as null)
//	{"id": …, "error": {"code": …, "message": …}}      failure (Error != nil; Result is ignored)
//
// A Response is a plain value; it is safe to share once built.
type Response struct {
	ID     string
	Result json.RawMessage
	Error  *Error
}

// CompactResponse is a success Response whose Result its producer wrote as compact, valid JSON: json.Marshal's
// output, or such outputs joined by JSON punctuation. AppendFrame copies the result as it is rather than compacting
// it again (for a page of events.since, the compaction cost as much as reading the events): the bytes are those of
// the Response with the same ID and Result, as long as the producer keeps its word. A result holding a newline is
// compacted all the same, so a frame stays one line whatever the producer wrote.
type CompactResponse struct {
	ID     string
	Result json.RawMessage
}

// MarshalJSON encodes the success shape, as Response does.
func (r CompactResponse) MarshalJSON() ([]byte, error) {
	return Response{ID: r.ID, Result: r.Result}.MarshalJSON()
}

type resultFrame struct {
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result"`
}

type errorFrame struct {
	ID    string `json:"id"`
	Error *Error `json:"error"`
}

// MarshalJSON encodes the success or the failure shape.
func (r Response) MarshalJSON() ([]byte, error) {
	if r.Error != nil {
		return marshal(errorFrame{r.ID, r.Error})
	}
	return marshal(resultFrame{r.ID, r.Result})
}

// UnmarshalJSON decodes either shape, for clients. A frame with an "error" key that is not null is a failure;
// otherwise it must carry "result". Errors match ErrMalformed.
func (r *Response) UnmarshalJSON(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		return malformed("response is not a JSON object")
	}
	id, ok := jsonString(fields["id"])
	if !ok {
		return malformed("response id must be a string")
	}
	if raw, ok := fields["error"]; ok && string(raw) != "null" {
		var e Error
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("%w: response error must be {code, message}: %w", ErrMalformed, err)
		}
		*r = Response{ID: id, Error: &e}
		return nil
	}
	result, ok := fields["result"]
	if !ok {
		return malformed("response has neither result nor error")
	}
	*r = Response{ID: id, Result: result}
	return nil
}

// responseKeys are the members a client reads of a frame, in the order ReadResponse uses them.
var responseKeys = []string{"id", "result", "error", "event"}

// Push is a push frame as ReadResponse returns it: its event name, and the frame itself to decode (valid until the
// next read). A zero Push (Frame nil) is none.
type Push struct {
	Name  string
	Frame []byte
}

// ReadResponse reads the next frame for a client. A push (a frame whose "event" member is not null) is returned
// with its name, undecoded; any other frame is decoded as Response.UnmarshalJSON decodes it, without checking again
// what ReadFrame checked. Errors are ReadFrame's, or ErrMalformed for a frame that is neither a response nor a
// push named by a string.
func (r *Reader) ReadResponse() (resp Response, push Push, err error) {
	frame, err := r.ReadFrame()
	if err != nil {
		return Response{}, Push{}, err
	}
	var v [4][]byte
	lastMembers(frame, responseKeys, v[:]) // ReadFrame returns objects only
	if v[3] != nil && string(v[3]) != "null" {
		name, ok := jsonString(v[3])
		if !ok {
			return Response{}, Push{}, malformed("push event must be a string")
		}
		return Response{}, Push{Name: name, Frame: frame}, nil
	}
	id, ok := jsonString(v[0])
	if !ok {
		return Response{}, Push{}, malformed("response id must be a string")
	}
	if v[2] != nil && string(v[2]) != "null" {
		var e Error
		if err := json.Unmarshal(v[2], &e); err != nil {
			return Response{}, Push{}, fmt.Errorf("%w: response error must be {code, message}: %w", ErrMalformed, err)
		}
		return Response{ID: id, Error: &e}, Push{}, nil
	}
	if v[1] == nil {
		return Response{}, Push{}, malformed("response has neither result nor error")
	}
	return Response{ID: id, Result: append(json.RawMessage(nil), v[1]...)}, Push{}, nil
}
