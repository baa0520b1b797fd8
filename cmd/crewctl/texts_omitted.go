package main

import (
	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/projections"
)

// crewd sends a run, a task or a delegation whose texts would not fit in its frame without them — a run's goal,
// summary and reason, a task's title, cwd, model, error, status reason and its question's options, a delegation's
// title, cwd and model empty, textsOmitted true — rather than refuse the read. These are the daemon's views as sent,
// the flag kept (broker's WireRun, WireTask and WireDelegation): the views print it, and the diff compares what was
// sent.

// liveRunView is one run's views as crewd sends them.
type liveRunView struct {
	Run         broker.WireRun
	Tasks       []broker.WireTask
	Delegations []broker.WireDelegation
	Ledger      []projections.Account
}

// view is v in audit's shape, without the flags.
func (v liveRunView) view() audit.RunView {
	rv := audit.RunView{Run: v.Run.Run, Ledger: v.Ledger}
	if v.Tasks != nil {
		rv.Tasks = make([]projections.Task, len(v.Tasks))
		for i, t := range v.Tasks {
			rv.Tasks[i] = t.Task
		}
	}
	if v.Delegations != nil {
		rv.Delegations = make([]projections.Delegation, len(v.Delegations))
		for i, d := range v.Delegations {
			rv.Delegations[i] = d.Delegation
		}
	}
	return rv
}

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

// omittedTexts are the runs, and the tasks and delegations by run, crewd sent without their texts.
type omittedTexts struct {
	runs        map[string]bool
	tasks       map[string]map[string]bool
	delegations map[string]map[string]bool
}

func (o *omittedTexts) note(v liveRunView) {
	if v.Run.TextsOmitted {
		if o.runs == nil {
			o.runs = map[string]bool{}
		}
		o.runs[v.Run.RunID] = true
	}
	for _, t := range v.Tasks {
		if t.TextsOmitted {
			noteOmitted(&o.tasks, t.RunID, t.TaskID)
		}
	}
	for _, d := range v.Delegations {
		if d.TextsOmitted {
			noteOmitted(&o.delegations, d.RunID, d.SubID)
		}
	}
}

// noteOmitted adds id of run runID to by.
func noteOmitted(by *map[string]map[string]bool, runID, id string) {
	if *by == nil {
		*by = map[string]map[string]bool{}
	}
	if (*by)[runID] == nil {
		(*by)[runID] = map[string]bool{}
	}
	(*by)[runID][id] = true
}

// apply leaves out of v the texts crewd left out of its views, as crewd leaves them out, so that a diff compares what
// crewd sent.
func (o omittedTexts) apply(v *audit.View) {
	for i := range v.Runs {
		rv := &v.Runs[i]
		if o.runs[rv.Run.RunID] {
			w := broker.WireRun{Run: rv.Run}
			w.OmitTexts()
			rv.Run = w.Run
		}
		for j := range rv.Tasks {
			if t := &rv.Tasks[j]; o.tasks[t.RunID][t.TaskID] {
				w := broker.WireTask{Task: *t}
				w.OmitTexts()
				*t = w.Task
			}
		}
		for j := range rv.Delegations {
			if d := &rv.Delegations[j]; o.delegations[d.RunID][d.SubID] {
				w := broker.WireDelegation{Delegation: *d}
				w.OmitTexts()
				*d = w.Delegation
			}
		}
	}
}
