package broker

import (
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/projections"
)

// A task's dependsOn lists up to commands.MaxDependsOn task ids of up to 256 chars, which the task.create that named
// them carried in a frame where the task read back, its runId, status, usage and times beside them, need not fit (a
// daemon allows a frame of 1 KiB), nor an imported one in any. Its role, agent and stepId are up to 256 chars each,
// of any char: the task.create sends '<' in one byte, the answer in six, so three of them outgrow a frame of 4 KiB.
// And query.tasks answered oversize-frame at such a task for good, its texts left out or not, no cursor passing it,
// so the orchestrator read no later task. A task that would not fit in a frame without its texts is sent without its
// dependsOn too — null, dependsOnOmitted true — whose list query.tasks {taskId} reads page by page; and one that
// would not fit without them either, without its names: role, agent, stepId and failureCause empty, namesOmitted true
// (they are in the dashboard's API, which has no frame, and in the events that recorded them). Every other field is
// sent as it is, and a task that fits is sent as before.
//
// A task's run id (up to 255 chars) and its own (up to 256), beside its usage (four counters of up to 2^40, its cost
// and turns) and times, that the run.create, task.create and task.usage fit in a frame of 1 KiB, read back larger
// than that frame without its texts, dependsOn and names too: its runId is left out with its names, empty (it is the
// run query.tasks names), as a delegation's is (delegation_fit.go). So, once the task would not fit without them
// either, is the id of the question it waits on: an import records one of up to 256 bytes in JSON
// (events.ImportedQuestionIDOK), where crewlog's own wait.request mints one of a few dozen, and a task of an id of
// 256 chars parked on it outgrew that frame without its runId too. It is left out last, empty, namesOmitted true (a
// question id is never empty; query.run's waitState names the question the run is parked on).
//
// NB: last, not with the names: the orchestrator answers a parked task with a response carrying exactly its
// question's id, which the run's waitState names only for the question the run was parked on last, and events.since
// sends the ask.requested of such a task without its data. A task of an id of 256 chars in a run of an id of 255,
// parked on a question crewlog minted, fits in 1 KiB with that id: left out with the names, no read gave it.

// OmitDependsOn leaves out w's dependsOn and says so.
func (w *WireTask) OmitDependsOn() { w.DependsOn, w.DependsOnOmitted = nil, true }

// OmitNames leaves out w's role, agent, stepId, failureCause and runId and says so.
func (w *WireTask) OmitNames() {
	w.Role, w.Agent, w.StepID, w.FailureCause, w.RunID, w.NamesOmitted = "", "", "", "", "", true
}

// OmitQuestion leaves out w's waiting question's id, after its names (namesOmitted says so).
func (w *WireTask) OmitQuestion() {
	w.NamesOmitted = true
	if w.Waiting != nil {
		waiting := *w.Waiting // NB: a copy: the task's own is the state's
		waiting.QuestionID = ""
		w.Waiting = &waiting
	}
}

// taskDependsOnPage is query.tasks' answer for one task's dependsOn.
type taskDependsOnPage struct {
	TaskID     string   `json:"taskId"`
	DependsOn  []string `json:"dependsOn"`
	NextCursor string   `json:"nextCursor,omitempty"`
	HasMore    bool     `json:"hasMore"`
	Total      int      `json:"total"`
}

// dependsOnAround is what a page of a task's dependsOn holds besides what pageEnvelope counts (its list's key is
// shorter than the longest it counts) and its task's id: the task id's key.
const dependsOnAround = `"taskId":,`

// taskDependsOn pages task taskID's dependsOn with fitPage, as every paged query: a page that would not fit in a
// frame is read again with the limit that fits, so the projection computes the cursor and no id is skipped.
func taskDependsOn(cl *call, runID, taskID string, limit int, cursor string) (any, error) {
	found := true
	pg, err := fitPage(cl, limit, func(limit int) (page[string], error) {
		dp, err := readState(cl, func(st *projections.State) (projections.Page[string], error) {
			dp, ok, err := st.TaskDependsOn(runID, taskID, projections.PageFilter{Limit: limit, Cursor: cursor})
			found = ok
			return dp, err
		})
		if err != nil || !found {
			return page[string]{}, err
		}
		return page[string]{items: dp.Items, next: dp.NextCursor, total: dp.Total,
			around: len(dependsOnAround) + jsonLen(taskID)}, nil
	}, same[string])
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, wire.Errorf(wire.CodeNoTask, "task %q not found", taskID)
	}
	return taskDependsOnPage{TaskID: taskID, DependsOn: nonNil(pg.items), NextCursor: pg.next, HasMore: pg.next != "",
		Total: pg.total}, nil
}
