package events

// TypeForeignImported is an event another system wrote that has no crewlog
// counterpart, kept as it was by an import (pi-crew's task.progress,
// hook.executed, workflow.phase_completed, …), so nothing the source wrote
// is lost. It changes no projection: replay, the timeline and events.since
// show it, and a pi-crew client reads it back with its own type, message
// and data.
const TypeForeignImported = "foreign.imported"

// ForeignSourcePicrew is ForeignImported.Source for pi-crew's events.jsonl.
const ForeignSourcePicrew = "picrew"

// ForeignImported is the source event as written: its type, seq in the
// source's log, time (the source's text, ISO-8601 for pi-crew), task,
// message and data (its JSON text, compacted; "" when it had none). The
// event's own time is the source time where it parses.
type ForeignImported struct {
	Source  string `json:"source" msgpack:"source"`
	Type    string `json:"type" msgpack:"type"`
	Seq     int64  `json:"seq" msgpack:"seq"`
	Time    string `json:"time" msgpack:"time"`
	TaskID  string `json:"taskId,omitempty" msgpack:"taskId,omitempty"`
	Message string `json:"message,omitempty" msgpack:"message,omitempty"`
	Data    string `json:"data,omitempty" msgpack:"data,omitempty"`
}
