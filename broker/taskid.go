package broker

import "github.com/crewlog/crewlog/events"

// A TeamEvent's taskId is the "taskId" of its payload's JSON. Reading it back from that JSON cost a full parse of
// every event into a map (the largest single cost of rendering a page of events.since). events.PayloadTaskID,
// generated with the payload codecs from the struct definitions (events/internal/gen, which refuses a payload whose
// JSON is not its fields'), reads it from the struct instead: what encoding/json would write and read back, for every
// payload type of the contract.

// taskIDLifter returns a payload's "taskId" as a TeamEvent shows it; ok is false when only its JSON can say.
type taskIDLifter func(payload any) (taskID string, ok bool)

// liftTaskID is the taskIDLifter of every rendering. ok is false only for a value that is not a payload, which a
// decoded event never holds.
func liftTaskID(payload any) (taskID string, ok bool) {
	id, ok := events.PayloadTaskID(payload)
	if !ok {
		return "", false
	}
	return events.AsJSONReadsBack(id), true
}
