package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
)

// errNotOneObject is decodeObject's answer to anything but a single JSON object.
var errNotOneObject = errors.New("not one JSON object")

// decodeObject reads data as one JSON object and returns its members, and the keys it met more than once, sorted.
// encoding/json keeps the last of a key met twice; a config file that sets a key twice is a mistake whichever
// value was meant, so the caller refuses it rather than start with one of them.
func decodeObject(data []byte) (fields map[string]json.RawMessage, duplicates []string, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errNotOneObject
	}
	fields = map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, errNotOneObject
		}
		key, _ := tok.(string) // the decoder gives an object's keys as strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, errNotOneObject
		}
		if _, met := fields[key]; met && !slices.Contains(duplicates, key) {
			duplicates = append(duplicates, key)
		}
		fields[key] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') ||
		len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return nil, nil, errNotOneObject
	}
	slices.Sort(duplicates)
	return fields, duplicates, nil
}
