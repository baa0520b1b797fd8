package main

import (
	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/projections"
)

// crewd sends a run or a task whose texts alone would not fit in its frame without them — a run's goal, summary and
// reason, a task's error and status reason empty, textsOmitted true — rather than refuse the read. These are the
// daemon's views as sent, the flag kept: the views print it, and the diff compares what was sent.

// liveRun is a run as crewd sends it.
type liveRun struct {
	projections.Run
	TextsOmitted bool `json:"textsOmitted,omitempty"`
}

// liveTask is a task as crewd sends it.
type liveTask struct {
	projections.Task
	TextsOmitted bool `json:"textsOmitted,omitempty"`
}

// liveRunView is one run's views as crewd sends them.
type liveRunView struct {
	Run         liveRun
	Tasks       []liveTask
	Delegations []projections.Delegation
	Ledger      []projections.Account
}

// view is v in audit's shape, without the flags.
func (v liveRunView) view() audit.RunView {
	rv := audit.RunView{Run: v.Run.Run, Delegations: v.Delegations, Ledger: v.Ledger}
	if v.Tasks != nil {
		rv.Tasks = make([]projections.Task, len(v.Tasks))
		for i, t := range v.Tasks {
			rv.Tasks[i] = t.Task
		}
	}
	return rv
}

// goalOf is what the views print for r's goal.
func goalOf(r liveRun) string {
	if r.TextsOmitted {
		return "(omitted: larger than crewd's frame; the dashboard shows it)"
	}
	return r.Goal
}

// omittedTexts are the runs, and the tasks by run, crewd sent without their texts.
type omittedTexts struct {
	runs  map[string]bool
	tasks map[string]map[string]bool
}

func (o *omittedTexts) note(v liveRunView) {
	if v.Run.TextsOmitted {
		if o.runs == nil {
			o.runs = map[string]bool{}
		}
		o.runs[v.Run.RunID] = true
	}
	for _, t := range v.Tasks {
		if !t.TextsOmitted {
			continue
		}
		if o.tasks == nil {
			o.tasks = map[string]map[string]bool{}
		}
		if o.tasks[t.RunID] == nil {
			o.tasks[t.RunID] = map[string]bool{}
		}
		o.tasks[t.RunID][t.TaskID] = true
	}
}

// apply leaves out of v the texts crewd left out of its views, so that a diff compares what crewd sent.
func (o omittedTexts) apply(v *audit.View) {
	for i := range v.Runs {
		rv := &v.Runs[i]
		if o.runs[rv.Run.RunID] {
			rv.Run.Goal, rv.Run.Summary, rv.Run.Reason = "", "", ""
		}
		for j := range rv.Tasks {
			if t := &rv.Tasks[j]; o.tasks[t.RunID][t.TaskID] {
				t.Error, t.StatusReason = "", ""
			}
		}
	}
}
