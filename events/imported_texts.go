package events

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
		return []ImportedText{{"summary", &s.Summary, MaxStatusTextChars}, {"reason", &s.Reason, MaxStatusTextChars}}
	}
	ended := func(e *TaskEnded) []ImportedText {
		return []ImportedText{{"error", &e.Error, MaxStatusTextChars}, {"failureCause", &e.FailureCause, MaxIDChars}}
	}
	switch e := p.(type) {
	case *RunCreated:
		return []ImportedText{{"team", &e.Team, MaxIDChars}, {"workflow", &e.Workflow, MaxIDChars},
			{"goal", &e.Goal, MaxBodyChars},
			{"cwd", &e.Cwd, MaxCwdChars}}
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
		return []ImportedText{{"role", &e.Role, MaxIDChars}, {"agent", &e.Agent, MaxIDChars},
			{"title", &e.Title, MaxTitleChars},
			{"cwd", &e.Cwd, MaxCwdChars}, {"stepId", &e.StepID, MaxIDChars}, {"model", &e.Model, MaxModelChars}}
	case *TaskStarted:
		return []ImportedText{{"role", &e.Role, MaxIDChars}, {"agent", &e.Agent, MaxIDChars},
			{"runtime", &e.Runtime, MaxIDChars},
			{"cwd", &e.Cwd, MaxCwdChars}, {"worktreePath", &e.WorktreePath, MaxCwdChars},
			{"worktreeBranch", &e.WorktreeBranch, MaxIDChars}}
	case *TaskCompleted:
		return ended((*TaskEnded)(e))
	case *TaskFailed:
		return ended((*TaskEnded)(e))
	case *TaskNeedsAttention:
		return ended((*TaskEnded)(e))
	case *TaskCancelled:
		return []ImportedText{{"reason", &e.Reason, MaxStatusTextChars}, {"phase", &e.Phase, MaxIDChars}}
	case *TaskSkipped:
		return []ImportedText{{"reason", &e.Reason, MaxStatusTextChars}}
	case *TaskRetried:
		return []ImportedText{{"reason", &e.Reason, MaxStatusTextChars}}
	case *AskRequested:
		return []ImportedText{{"question", &e.Question, MaxQuestionChars}}
	case *MailboxAppended:
		body := MaxBodyChars
		if e.Kind == KindSteer {
			body = MaxSteerChars
		}
		return []ImportedText{{"from", &e.From, MaxIDChars}, {"body", &e.Body, body},
			{"subject", &e.Subject, MaxSubjectChars},
			{"replyTo", &e.ReplyTo, MaxIDChars}}
	case *DelegateRequested:
		return []ImportedText{{"role", &e.Role, MaxRecordedRoleChars}}
	case *DelegateRejected:
		return []ImportedText{{"reason", &e.Reason, MaxIDChars}, {"message", &e.Message, MaxRejectedMessageChars}}
	case *DelegateAdmitted:
		return []ImportedText{{"role", &e.Role, MaxRecordedRoleChars}, {"model", &e.Model, MaxModelChars},
			{"cwd", &e.Cwd, MaxCwdChars},
			{"title", &e.Title, MaxTitleChars}, {"description", &e.Description, MaxDescriptionChars},
			{"prompt", &e.Prompt, MaxPromptChars}, {"parentRole", &e.ParentRole, MaxIDChars}}
	}
	return nil
}
