package broker

import (
	"encoding/json"

	"github.com/crewlog/crewlog/projections"
)

// A run's goal (up to 262,144 chars) and the free text of a status change (a run's summary and reason, a task's error
// and status reason: up to 576 Ki chars, a worker's captured stderr) can each be larger than a frame by themselves,
// and a page cannot cut an item. A run or a task whose answer would not fit in a frame with them is sent without them
// — those fields empty, textsOmitted true — every other field as it is, so that query.run answers and the pages of
// query.runs and query.tasks go on past it (an item too large alone was oversize-frame at every read, and no cursor
// passed it). The texts are in the dashboard's API, which has no frame, and in the events that recorded them.
//
// So is a message's body and subject: the socket refuses a worker's message its recipient could not read
// (messageFits), but not the orchestrator's or the admin's, nor one imported (a body of 262,144 chars of six-byte
// escapes) or recorded under a larger --max-frame, which left msg.inbox and query.mailbox answering oversize-frame
// at it for good, its recipient reading neither it nor any message after it, nor learning its id to acknowledge it.
//
// And so are the texts a worker names that are bounded in chars, not bytes, and can outgrow a small frame (a daemon
// allows one of 1 KiB; in 4 KiB, a description of 512 chars that take six bytes each in JSON and a model of 256):
// a delegation's title, cwd and model, and a task's title, cwd, model and the options of its question (up to 16 of
// 256 chars), which left query.delegations and query.tasks answering oversize-frame at the worker's delegation, its
// shadow task or its own task for good, the orchestrator reading no later one.

// omitRoom is what a page's next cursor may take beside an item sent alone (pageBudget leaves it out): the cursors
// of runs, tasks, delegations and messages are a few dozen bytes.
const omitRoom = 128

// WireRun is a run on the wire: its texts are left out, textsOmitted true, when they would not fit in a frame.
// crewctl decodes query.run and query.runs into it. It is a plain value: OmitTexts changes only the copy it is
// called on, and never the state's own.
type WireRun struct {
	projections.Run
	TextsOmitted bool `json:"textsOmitted,omitempty"`
	// NamesOmitted says the run's team, workflow, cwd and its waitState's taskId were left out: without its texts it
	// would not fit either (OmitNames).
	NamesOmitted bool `json:"namesOmitted,omitempty"`
}

// OmitTexts leaves out w's long texts (its goal, summary and reason) and says so: the one list of what crewd may
// leave out of a run, which crewctl's replay --diff leaves out of the log's run too.
func (w *WireRun) OmitTexts() { w.Goal, w.Summary, w.Reason, w.TextsOmitted = "", "", "", true }

// OmitNames leaves out w's team, workflow and cwd (up to 256, 256 and 4,096 chars, six bytes each in JSON for '<',
// which the run.create sent in one: they outgrow a frame of 4 KiB), and the id of the task its waitState names (up
// to 256 chars: beside the run's id of 255, its budget and times, it outgrows a frame of 1 KiB; query.tasks lists the
// task waiting on the question), and says so.
func (w *WireRun) OmitNames() {
	w.Team, w.Workflow, w.Cwd, w.NamesOmitted = "", "", "", true
	if w.WaitState != nil {
		park := *w.WaitState // NB: a copy: the run's own is the state's
		park.TaskID = ""
		w.WaitState = &park
	}
}

// WireTask is a task on the wire, as WireRun is a run; its dependsOn, then its names, are left out too (flagged so)
// when the task would not fit in a frame without its texts either (task_fit.go).
type WireTask struct {
	projections.Task
	TextsOmitted     bool `json:"textsOmitted,omitempty"`
	DependsOnOmitted bool `json:"dependsOnOmitted,omitempty"`
	NamesOmitted     bool `json:"namesOmitted,omitempty"`
}

// OmitTexts leaves out w's long texts (its title, cwd, model, error, status reason and the options of its question)
// and says so.
func (w *WireTask) OmitTexts() {
	w.Title, w.Cwd, w.Model, w.Error, w.StatusReason, w.TextsOmitted = "", "", "", "", "", true
	if w.Waiting != nil {
		waiting := *w.Waiting // NB: a copy: the task's own is the state's
		waiting.Options = nil
		w.Waiting = &waiting
	}
}

// WireDelegation is a delegation on the wire, as WireRun is a run; its role and runId are left out too (flagged so)
// when the delegation would not fit in a frame without its texts either (delegation_fit.go).
type WireDelegation struct {
	projections.Delegation
	TextsOmitted bool `json:"textsOmitted,omitempty"`
	NamesOmitted bool `json:"namesOmitted,omitempty"`
}

// OmitTexts leaves out w's title, cwd and model and says so.
func (w *WireDelegation) OmitTexts() { w.Title, w.Cwd, w.Model, w.TextsOmitted = "", "", "", true }

// omitting is how a page of runs, tasks or delegations sends one too large for a page of its own: the first of
// stages leaves its texts out when it takes more than the page's room less omitRoom, and each next one more of it
// while it still does.
func omitting[W any](cl *call, stages ...func(*W)) omission[W] {
	om := omission[W]{room: pageBudget(cl) - omitRoom, omit: stages[0]}
	if len(stages) > 1 {
		om.omit = func(w *W) { omitToFit(w, om.room, stages...) }
	}
	return om
}

// omitToFit applies stages to w in turn until w takes no more than room bytes (its comma counted), or none is left.
func omitToFit[W any](w *W, room int, stages ...func(*W)) {
	for _, omit := range stages {
		omit(w)
		if b, _ := json.Marshal(w); len(b)+1 <= room {
			return
		}
	}
}

// omitTexts leaves out w's body and subject and says so.
func (w *wireMessage) omitTexts() { w.Body, w.Subject, w.TextsOmitted = "", "", true }
