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
