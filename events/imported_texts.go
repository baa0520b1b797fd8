package events

// Bounds of the free texts crewlog's own commands record (commands.MaxIDChars, MaxTitleChars, MaxCwdChars,
// MaxModelChars, MaxBodyChars, MaxStatusTextChars, MaxQuestionChars, MaxSubjectChars, MaxSteerChars,
// MaxRecordedRoleChars, MaxDescriptionChars, MaxPromptChars, and the 120 chars of a rejection's message), which
// ImportedTexts holds an import to. NB: here, as the importers may use neither commands nor projections.
const (
	idChars           = 256
	titleChars        = 4 * idChars
	cwdChars          = 4096
	modelChars        = 256
	bodyChars         = 262144
	statusTextChars   = 576 << 10
	questionChars     = 8192
	subjectChars      = 256
	steerChars        = 4096
	recordedRoleChars = 64
	descriptionChars  = 512
	promptChars       = 32768
	rejectedChars     = 120
)

// ImportedText is a free text of a payload, by its field's JSON name, and the bound in chars of crewlog's own command
// that records it.
type ImportedText struct {
	Name string
	Text *string
	Max  int
}

// ImportedTexts are the free texts an import records in payload p (a pointer to a payload struct), each with the
// bound of crewlog's own command that records it (run.create, run.transition, task.create, task.transition,
// wait.request, msg.send, steer.push, delegate.request); none for another payload. NB: an import is bounded otherwise
// only by the store's payload limit, and an imported record holding more than any command could write is carried by
// the dashboard, every query and every snapshot of its run: importers cut what their source holds to these bounds,
// and the engine's import.append refuses more.
func ImportedTexts(p any) []ImportedText {
	status := func(s *RunStatusChanged) []ImportedText {
		return []ImportedText{{"summary", &s.Summary, statusTextChars}, {"reason", &s.Reason, statusTextChars}}
	}
	ended := func(e *TaskEnded) []ImportedText {
		return []ImportedText{{"error", &e.Error, statusTextChars}, {"failureCause", &e.FailureCause, idChars}}
	}
	switch e := p.(type) {
	case *RunCreated:
		return []ImportedText{{"team", &e.Team, idChars}, {"workflow", &e.Workflow, idChars}, {"goal", &e.Goal, bodyChars},
			{"cwd", &e.Cwd, cwdChars}}
	case *RunQueued:
		return status((*RunStatusChanged)(e))
	case *RunPlanning:
		return status((*RunStatusChanged)(e))
	case *RunRunning:
		return status((*RunStatusChanged)(e))
	case *RunBlocked:
		return status((*RunStatusChanged)(e))
	case *RunCompleted:
		return status((*RunStatusChanged)(e))
	case *RunFailed:
		return status((*RunStatusChanged)(e))
	case *RunCancelled:
		return status((*RunStatusChanged)(e))
	case *TaskCreated:
		return []ImportedText{{"role", &e.Role, idChars}, {"agent", &e.Agent, idChars}, {"title", &e.Title, titleChars},
			{"cwd", &e.Cwd, cwdChars}, {"stepId", &e.StepID, idChars}, {"model", &e.Model, modelChars}}
	case *TaskStarted:
		return []ImportedText{{"role", &e.Role, idChars}, {"agent", &e.Agent, idChars}, {"runtime", &e.Runtime, idChars},
			{"cwd", &e.Cwd, cwdChars}, {"worktreePath", &e.WorktreePath, cwdChars},
			{"worktreeBranch", &e.WorktreeBranch, idChars}}
	case *TaskCompleted:
		return ended((*TaskEnded)(e))
	case *TaskFailed:
		return ended((*TaskEnded)(e))
	case *TaskNeedsAttention:
		return ended((*TaskEnded)(e))
	case *TaskCancelled:
		return []ImportedText{{"reason", &e.Reason, statusTextChars}, {"phase", &e.Phase, idChars}}
	case *TaskSkipped:
		return []ImportedText{{"reason", &e.Reason, statusTextChars}}
	case *TaskRetried:
		return []ImportedText{{"reason", &e.Reason, statusTextChars}}
	case *AskRequested:
		return []ImportedText{{"question", &e.Question, questionChars}}
	case *MailboxAppended:
		body := bodyChars
		if e.Kind == KindSteer {
			body = steerChars
		}
		return []ImportedText{{"from", &e.From, idChars}, {"body", &e.Body, body}, {"subject", &e.Subject, subjectChars},
			{"replyTo", &e.ReplyTo, idChars}}
	case *DelegateRequested:
		return []ImportedText{{"role", &e.Role, recordedRoleChars}}
	case *DelegateRejected:
		return []ImportedText{{"reason", &e.Reason, idChars}, {"message", &e.Message, rejectedChars}}
	case *DelegateAdmitted:
		return []ImportedText{{"role", &e.Role, recordedRoleChars}, {"model", &e.Model, modelChars}, {"cwd", &e.Cwd, cwdChars},
			{"title", &e.Title, titleChars}, {"description", &e.Description, descriptionChars},
			{"prompt", &e.Prompt, promptChars}, {"parentRole", &e.ParentRole, idChars}}
	}
	return nil
}
