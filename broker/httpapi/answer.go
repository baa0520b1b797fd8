package httpapi

import (
	"encoding/json"
	"net/http"
)

// object is a JSON answer written field by field, in the order given: a value encoded by json.Marshal, or a list
// of items encoded already (encodeFitting, eventJSON) copied as they are. A page's items are encoded once, to
// measure the page: handing them to json.Marshal as json.RawMessage would not encode them again, but would scan
// every byte of them again (encoding/json compacts a Marshaler's output), which costs as much. The bytes are
// json.Marshal's for the same fields (its escaping of <, >, &, U+2028, U+2029 and invalid UTF-8 included).
type object struct {
	b   []byte
	err error
}

func newObject() *object { return &object{b: []byte{'{'}} }

// name starts field n, a name JSON needs no escape for.
func (o *object) name(n string) {
	if len(o.b) > 1 {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, '"')
	o.b = append(o.b, n...)
	o.b = append(o.b, '"', ':')
}

// value adds field n, v encoded by json.Marshal.
func (o *object) value(n string, v any) {
	if o.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		o.err = err
		return
	}
	o.name(n)
	o.b = append(o.b, b...)
}

// list adds field n, the list of items (null when nil, as json.Marshal writes a nil slice).
func (o *object) list(n string, items []json.RawMessage) {
	o.name(n)
	if items == nil {
		o.b = append(o.b, "null"...)
		return
	}
	size := 2
	for _, it := range items {
		size += len(it) + 1
	}
	o.b = append(make([]byte, 0, len(o.b)+size+64), o.b...)
	o.b = append(o.b, '[')
	for i, it := range items {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = append(o.b, it...)
	}
	o.b = append(o.b, ']')
}

// writeCursorPage answers {key: items, "hasMore", "nextCursor"?}: the shape of the events and runs pages.
func writeCursorPage(w http.ResponseWriter, key string, items []json.RawMessage, hasMore bool, next string) {
	o := newObject()
	o.list(key, items)
	o.value("hasMore", hasMore)
	if next != "" {
		o.value("nextCursor", next)
	}
	o.write(w)
}

// write answers the object, 200, or writeUnencodable when a value could not be encoded.
func (o *object) write(w http.ResponseWriter) {
	if o.err != nil {
		writeUnencodable(w)
		return
	}
	writeBody(w, http.StatusOK, append(o.b, '}'))
}
