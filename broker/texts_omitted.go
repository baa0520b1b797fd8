package broker

import (
	"encoding/json"

	"github.com/crewlog/crewlog/projections"
)

// A run's goal (up to 262,144 chars) and the free text of a status change (a run's summary and reason, a task's
// error and status reason: up to 576 Ki chars, a worker's captured stderr) can each be larger than a frame by themselves,
// and a page cannot cut an item. A run or a task whose answer would not fit in a frame with them is sent without
// them — those fields empty, textsOmitted true — every other field as it is, so that query.run answers and the pages
// of query.runs and query.tasks go on past it (an item too large alone was oversize-frame at every read, and no
// cursor passed it). The texts are in the dashboard's API, which has no frame, and in the events that recorded them.
//
// So is a message's body and subject: the socket refuses a worker's message its recipient could not read
// (messageFits), but not the orchestrator's or the admin's, nor one imported (a body of 262,144 chars of six-byte
// escapes) or recorded under a larger --max-frame, which left msg.inbox and query.mailbox answering oversize-frame
// at it for good, its recipient reading neither it nor any message after it, nor learning its id to acknowledge it.

// omitRoom is what a page's next cursor may take beside an item sent alone (pageBudget leaves it out): the cursors
// of runs and tasks are a few dozen bytes.
const omitRoom = 128

// wireRun is a run on the wire.
type wireRun struct {
	projections.Run
	TextsOmitted bool `json:"textsOmitted,omitempty"`
}

// wireTask is a task on the wire.
type wireTask struct {
	projections.Task
	TextsOmitted bool `json:"textsOmitted,omitempty"`
}

// runFitting renders r, without its long texts when it would take more than room bytes with them.
func runFitting(r projections.Run, room int) wireRun {
	w := wireRun{Run: r}
	if !fits(w, room) {
		w.omitTexts()
	}
	return w
}

func (w *wireRun) omitTexts() { w.Goal, w.Summary, w.Reason, w.TextsOmitted = "", "", "", true }

// taskFitting renders t, without its long texts when it would take more than room bytes with them.
func taskFitting(t projections.Task, room int) wireTask {
	w := wireTask{Task: t}
	if !fits(w, room) {
		w.Error, w.StatusReason, w.TextsOmitted = "", "", true
	}
	return w
}

// messageFitting renders m, without its body and subject when it would take more than room bytes with them.
func messageFitting(m projections.Message, room int) wireMessage {
	w := toWireMessage(m)
	if !fits(w, room) {
		w.Body, w.Subject, w.TextsOmitted = "", "", true
	}
	return w
}

// fits reports whether v, as JSON and with one more byte (its comma in a page), takes at most room bytes.
func fits(v any, room int) bool {
	b, _ := json.Marshal(v)
	return len(b)+1 <= room
}
