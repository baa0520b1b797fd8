package main

import (
	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/projections"
)

// crewd sends a run, a task or a delegation whose texts would not fit in its frame without them — a run's goal,
// summary and reason, a task's title, cwd, model, error, status reason and its question's options, a delegation's
// title, cwd and model empty, textsOmitted true — rather than refuse the read; a run that would not fit without them
// either without its names too (team, workflow, cwd and its waitState's taskId empty, namesOmitted true), and a task
// without its dependsOn (null, dependsOnOmitted true), then without its names (role, agent, stepId, failureCause and
// runId empty, namesOmitted true), then without its waiting question's id (empty), and a delegation without its role,
// runId and messageId (empty, namesOmitted true). These are the daemon's views as sent, the flags kept (broker's
// WireRun, WireTask and WireDelegation), but for a task's or a delegation's runId, the run crewctl asked about, which
// it puts back (withRunIDs): the views print them, and the diff compares what was sent. A dependsOn is the one
// omission crewctl reads back (readOmittedDependsOn), as it reads an account's history: crewd pages it (query.tasks
// {taskId}), so the diff compares it and show run --json shows it whole, where it pages no text nor name.

// omittedNote is what the views print for a text crewd left out.
const omittedNote = "(omitted: larger than crewd's frame; the dashboard shows it)"

// orOmitted is what the views print for a field crewd sent empty when omitted (textsOmitted, namesOmitted), else
// the field's value.
func orOmitted(omitted bool, value string) string {
	if omitted {
		return omittedNote
	}
	return value
}

// withRunIDs puts runID back in each of ws, tasks or delegations, crewd sent without it: it sends an item's runId
// empty only when the item would not fit in its frame with it (namesOmitted), and it is the run the query named.
// omitted gives an item's runId field when crewd left it out, nil when it did not.
func withRunIDs[W any](ws []W, runID string, omitted func(*W) *string) []W {
	for i := range ws {
		if id := omitted(&ws[i]); id != nil {
			*id = runID
		}
	}
	return ws
}

// taskRunID is t's runId field when crewd left it out (withRunIDs).
func taskRunID(t *broker.WireTask) *string {
	if t.NamesOmitted {
		return &t.RunID
	}
	return nil
}

// delegationRunID is d's runId field when crewd left it out (withRunIDs).
func delegationRunID(d *broker.WireDelegation) *string {
	if d.NamesOmitted {
		return &d.RunID
	}
	return nil
}

// cutAsSent leaves in mine, the rebuilt pool, only the first holders, as many as crewd listed in sent when it left
// the others out (subIdsOmitted: too many for its frame), so that a diff compares the holders crewd sent.
func cutAsSent(mine *projections.Slots, sent broker.WireSlots) {
	if sent.SubIDsOmitted {
		mine.SubIDs = mine.SubIDs[:min(len(mine.SubIDs), len(sent.SubIDs))]
	}
}

// omittedTexts are the runs, tasks and delegations crewd sent without some of their fields, and what it left out.
type omittedTexts map[omittedItem]omission

// omittedItem names a run (id empty), or a task or a delegation of run.
type omittedItem struct{ kind, run, id string }

// omission is what crewd left out of an item: its texts, its names, a task's waiting question's id (left out after
// its names), and a dependsOn crewctl read back page by page.
type omission struct{ texts, names, question, dependsOnRead bool }

// note records the items of v crewd sent without some of their fields.
func (o omittedTexts) note(v runViews) {
	if v.Run.TextsOmitted || v.Run.NamesOmitted {
		o[omittedItem{"run", v.Run.RunID, ""}] = omission{texts: v.Run.TextsOmitted, names: v.Run.NamesOmitted}
	}
	for _, t := range v.Tasks {
		if read := v.dependsOnRead[t.TaskID]; t.TextsOmitted || t.NamesOmitted || read {
			// NB: a question id is never empty: one sent empty was left out, after the names (OmitQuestion).
			question := t.NamesOmitted && t.Waiting != nil && t.Waiting.QuestionID == ""
			o[omittedItem{"task", t.RunID, t.TaskID}] = omission{texts: t.TextsOmitted, names: t.NamesOmitted,
				question: question, dependsOnRead: read}
		}
	}
	for _, d := range v.Delegations {
		if d.TextsOmitted || d.NamesOmitted {
			o[omittedItem{"delegation", d.RunID, d.SubID}] = omission{texts: d.TextsOmitted, names: d.NamesOmitted}
		}
	}
}

// apply leaves out of v the fields crewd left out of its views, as crewd leaves them out, so that a diff compares
// what crewd sent.
func (o omittedTexts) apply(v *audit.View) {
	for i := range v.Runs {
		rv := &v.Runs[i]
		if om, ok := o[omittedItem{"run", rv.Run.RunID, ""}]; ok {
			w := broker.WireRun{Run: rv.Run}
			omitAs(&w, om)
			rv.Run = w.Run
		}
		for j := range rv.Tasks {
			t := &rv.Tasks[j]
			om, ok := o[omittedItem{"task", t.RunID, t.TaskID}]
			if !ok {
				continue
			}
			w := broker.WireTask{Task: *t}
			omitAs(&w, om)
			if om.question {
				w.OmitQuestion()
			}
			w.RunID = t.RunID // NB: put back on the daemon's side too (withRunIDs)
			if om.dependsOnRead && len(w.DependsOn) == 0 {
				w.DependsOn = []string{} // NB: as query.tasks {taskId} writes an empty list, which a task may hold as nil
			}
			*t = w.Task
		}
		for j := range rv.Delegations {
			d := &rv.Delegations[j]
			if om, ok := o[omittedItem{"delegation", d.RunID, d.SubID}]; ok {
				w := broker.WireDelegation{Delegation: *d}
				omitAs(&w, om)
				w.RunID = d.RunID // NB: put back on the daemon's side too (withRunIDs)
				*d = w.Delegation
			}
		}
	}
}

// omitAs leaves out of w, a run, a task or a delegation on the wire, the texts and the names crewd left out (om).
func omitAs[W interface {
	OmitTexts()
	OmitNames()
}](w W, om omission) {
	if om.texts {
		w.OmitTexts()
	}
	if om.names {
		w.OmitNames()
	}
}
