package broker

import (
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// eventViewer is who reads a run's events (events.since, a subscription): its identity and, for a worker, the engine
// whose state says which jobs are its task's. A worker reads every event of its run, as in pi-crew, but not what the
// methods that read the same records keep from it: another mailbox's message bodies and subjects (msg.inbox reads its
// own mailbox alone; pi-crew's events never carry a body), the prompt, description and title of a delegation neither
// its task's nor the one its task is the grandchild of (no method shows a worker the run's delegations; pi-crew's
// delegate.admitted carries no prompt), and the arguments and results of another task's proxied calls (proxy.result
// answers for its own job alone).
type eventViewer struct {
	identity
	// eng tells a worker's own jobs; nil: none is the viewer's (a rendering that has no state at hand).
	eng *commands.Engine
}

// viewer is the eventViewer of c.
func (c *conn) viewer() eventViewer { return eventViewer{identity: c.id, eng: c.s.eng} }

// visiblePayload is payload as v may read it: the payload itself, or a view of it without what is not v's to read.
func (v eventViewer) visiblePayload(payload any) any {
	if v.role != events.RoleWorker {
		return payload
	}
	switch p := payload.(type) {
	case *events.MailboxAppended:
		if p.To != v.taskID && p.From != v.taskID {
			return messageWithoutText{MailboxAppended: p}
		}
	case *events.DelegateAdmitted:
		if p.TaskID != v.taskID && p.SubID != v.taskID {
			return delegationWithoutText{DelegateAdmitted: p}
		}
	case *events.ProxyRequested:
		if !v.ownsJob(p.JobID) {
			return callWithoutArgs{ProxyRequested: p}
		}
	case *events.ProxyCompleted:
		if !v.ownsJob(p.JobID) {
			return callWithoutResult{ProxyCompleted: p}
		}
	}
	return payload
}

// ownsJob reports whether job jobID of the viewer's run is its task's. NB: read from the published state, which
// holds every job whose events a reader is given (they are read up to its position) and never changes a job's task.
func (v eventViewer) ownsJob(jobID string) bool {
	if v.eng == nil {
		return false
	}
	mine := false
	v.eng.Read(func(st *projections.State) { mine = jobOfTask(st, v.runID, jobID, v.taskID) })
	return mine
}

// jobOfTask reports whether job jobID of run runID is task taskID's: what proxy.result and a worker's view of the
// run's events ask before they show a call's arguments or result.
func jobOfTask(st *projections.State, runID, jobID, taskID string) bool {
	h, ok := st.JobHeader(runID, jobID)
	return ok && h.TaskID == taskID
}

// messageWithoutText, delegationWithoutText, callWithoutArgs and callWithoutResult are a payload without what the
// viewer may not read: each shallower field hides the payload's of the same name and, nil, is left out. A message's
// subject is its text as much as its body is (msg.inbox shows both to its recipient alone), and a delegation's
// description, and the title of its shadow task made of it, as much as its prompt.
type (
	messageWithoutText struct {
		*events.MailboxAppended
		Body    *struct{} `json:"body,omitempty"`
		Subject *struct{} `json:"subject,omitempty"`
	}
	delegationWithoutText struct {
		*events.DelegateAdmitted
		Prompt      *struct{} `json:"prompt,omitempty"`
		Description *struct{} `json:"description,omitempty"`
		Title       *struct{} `json:"title,omitempty"`
	}
	callWithoutArgs struct {
		*events.ProxyRequested
		Args *struct{} `json:"args,omitempty"`
	}
	callWithoutResult struct {
		*events.ProxyCompleted
		Result *struct{} `json:"result,omitempty"`
	}
)
