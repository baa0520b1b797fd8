package main

import (
	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/broker"
)

// crewd sends a run, a task or a delegation whose texts would not fit in its frame without them — a run's goal,
// summary and reason, a task's title, cwd, model, error, status reason and its question's options, a delegation's
// title, cwd and model empty, textsOmitted true — rather than refuse the read. These are the daemon's views as sent,
// the flag kept (broker's WireRun, WireTask and WireDelegation): the views print it, and the diff compares what was
// sent.

// omittedNote is what the views print for a text crewd left out.
const omittedNote = "(omitted: larger than crewd's frame; the dashboard shows it)"

// goalOf is what the views print for r's goal.
func goalOf(r broker.WireRun) string {
	if r.TextsOmitted {
		return omittedNote
	}
	return r.Goal
}

// titleOf is what the views print for t's title.
func titleOf(t broker.WireTask) string {
	if t.TextsOmitted {
		return omittedNote
	}
	return t.Title
}

// omittedTexts are the runs, tasks and delegations crewd sent without their texts.
type omittedTexts map[omittedItem]bool

// omittedItem names a run (id empty), or a task or a delegation of run.
type omittedItem struct{ kind, run, id string }

// note records the items of v crewd sent without their texts.
func (o omittedTexts) note(v runViews) {
	if v.Run.TextsOmitted {
		o[omittedItem{"run", v.Run.RunID, ""}] = true
	}
	for _, t := range v.Tasks {
		if t.TextsOmitted {
			o[omittedItem{"task", t.RunID, t.TaskID}] = true
		}
	}
	for _, d := range v.Delegations {
		if d.TextsOmitted {
			o[omittedItem{"delegation", d.RunID, d.SubID}] = true
		}
	}
}

// apply leaves out of v the texts crewd left out of its views, as crewd leaves them out, so that a diff compares what
// crewd sent.
func (o omittedTexts) apply(v *audit.View) {
	for i := range v.Runs {
		rv := &v.Runs[i]
		if o[omittedItem{"run", rv.Run.RunID, ""}] {
			w := broker.WireRun{Run: rv.Run}
			w.OmitTexts()
			rv.Run = w.Run
		}
		for j := range rv.Tasks {
			if t := &rv.Tasks[j]; o[omittedItem{"task", t.RunID, t.TaskID}] {
				w := broker.WireTask{Task: *t}
				w.OmitTexts()
				*t = w.Task
			}
		}
		for j := range rv.Delegations {
			if d := &rv.Delegations[j]; o[omittedItem{"delegation", d.RunID, d.SubID}] {
				w := broker.WireDelegation{Delegation: *d}
				w.OmitTexts()
				*d = w.Delegation
			}
		}
	}
}
