package broker

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// A TeamEvent's taskId is the "taskId" of its payload's JSON. Reading it back from that JSON cost a full parse of
// every event into a map (the largest single cost of rendering a page of events.since), though nearly every
// payload is a plain struct whose "taskId", when it has one, is a string field. taskIDField finds that field once
// per payload type, so the value is read from the struct: what encoding/json would write and read back, for the
// payloads it accepts. Any payload it cannot vouch for (a custom JSON encoding, an embedded struct, a non-string
// field, a string that is not valid UTF-8) is read from its JSON as before.

// taskIDLifter returns a payload's "taskId" as a TeamEvent shows it; ok is false when only its JSON can say.
type taskIDLifter func(payload any) (taskID string, ok bool)

// taskIDLift is what taskIDField found for one payload type.
type taskIDLift struct {
	ok    bool // the struct's JSON is encoding/json's of its fields: the field (or its absence) says the taskId
	index int  // the field named "taskId" in JSON; -1 when there is none
}

var taskIDLifts sync.Map // reflect.Type → taskIDLift

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// liftTaskID is the taskIDLifter of every rendering: it reads the field of a payload struct it can vouch for.
func liftTaskID(payload any) (taskID string, ok bool) {
	v := reflect.ValueOf(payload)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", false
	}
	lift := taskIDField(v.Type())
	if !lift.ok {
		return "", false
	}
	if lift.index < 0 {
		return "", true
	}
	s := v.Field(lift.index).String()
	if !utf8.ValidString(s) {
		return "", false // encoding/json would write U+FFFD for the invalid bytes
	}
	return s, true
}

// taskIDField is liftTaskID's view of struct type t, computed once per type.
func taskIDField(t reflect.Type) taskIDLift {
	if l, ok := taskIDLifts.Load(t); ok {
		return l.(taskIDLift)
	}
	l := findTaskIDField(t)
	taskIDLifts.Store(t, l)
	return l
}

func findTaskIDField(t reflect.Type) taskIDLift {
	pt := reflect.PointerTo(t)
	for _, m := range []reflect.Type{jsonMarshaler, textMarshaler} {
		if t.Implements(m) || pt.Implements(m) {
			return taskIDLift{}
		}
	}
	found := taskIDLift{ok: true, index: -1}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return taskIDLift{} // embedded fields' keys follow encoding/json's rules of promotion: not mirrored here
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		if name != "taskId" {
			continue
		}
		ft := f.Type
		if found.index >= 0 || ft.Kind() != reflect.String || strings.Contains(opts, "string") ||
			ft.Implements(jsonMarshaler) || reflect.PointerTo(ft).Implements(jsonMarshaler) ||
			ft.Implements(textMarshaler) || reflect.PointerTo(ft).Implements(textMarshaler) {
			return taskIDLift{}
		}
		found.index = i
	}
	return found
}
