package picrew

// decodeTask decodes task record b of tasks.json into t as encoding/json does, but for a field of another JSON type
// than pi-crew writes, which is taken as absent (a stepId as empty: mistypedStepID) and returned in mistyped, for its
// caller to report (the times never fail: flexTime). NB: a run's workers write tasks.json, and one such field (a
// status that is a number, a usage counter that is a string) failed the whole record: the task was left out, and with
// it its delegations' shadow links and every event line naming it. The fields are decoded as decodeManifest decodes a
// manifest's.
func decodeTask(b []byte, t *task) (mistyped []mistypedField, err error) {
	text := func(name string, v *string) looseField[string] { return loose(&mistyped, name, "string", v) }
	err = decodeLoose(b, t, &struct {
		*task
		ID           looseField[string]          `json:"id"`
		RunID        looseField[string]          `json:"runId"`
		StepID       looseField[*string]         `json:"stepId"`
		Role         looseField[string]          `json:"role"`
		Agent        looseField[string]          `json:"agent"`
		Title        looseField[string]          `json:"title"`
		Status       looseField[string]          `json:"status"`
		Cwd          looseField[string]          `json:"cwd"`
		DependsOn    looseField[[]string]        `json:"dependsOn"`
		Error        looseField[string]          `json:"error"`
		FailureCause looseField[string]          `json:"failureCause"`
		Model        looseField[string]          `json:"model"`
		Depth        looseField[int]             `json:"depth"`
		Allocation   looseField[*taskAllocation] `json:"allocation"`
		Waiting      looseField[*taskWaiting]    `json:"waiting"`
		Usage        looseField[*taskUsage]      `json:"usage"`
	}{
		task: t, ID: text("id", &t.ID), RunID: text("runId", &t.RunID), Role: text("role", &t.Role),
		Agent: text("agent", &t.Agent), Title: text("title", &t.Title), Status: text("status", &t.Status),
		Cwd: text("cwd", &t.Cwd), DependsOn: loose(&mistyped, "dependsOn", "list of strings", &t.DependsOn),
		Error: text("error", &t.Error), FailureCause: text("failureCause", &t.FailureCause),
		Model: text("model", &t.Model), Depth: loose(&mistyped, "depth", "whole number", &t.Depth),
		Allocation: loose(&mistyped, "allocation", "record of whole token counts", &t.Allocation),
		Waiting:    loose(&mistyped, "waiting", "question record", &t.Waiting),
		Usage:      loose(&mistyped, "usage", "record of counts", &t.Usage),
		StepID:     looseAs(&mistyped, "stepId", "string", &t.StepID, new(string), mistypedStepID),
	})
	return mistyped, err
}

// mistypedStepID is what a task's stepId of another JSON type is taken as: empty, not absent. NB: pi-crew tells a
// delegation's shadow task by its stepId alone, one that is absent (BR-09: stepId === undefined), so such a stepId is
// there, and its task the workflow task pi-crew's scheduler takes it for. Taken as absent, a field a run's worker can
// write made a workflow task a shadow: its task.created left out, and a delegation admitted under its id took it.
const mistypedStepID = "empty, the task a workflow task (a shadow has none)"
