package events

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportedTextsNameEachFreeTextAndItsCommandsBound: ImportedTexts lists each free text of a payload an import
// records, by its JSON name, pointing at that very field (an importer cuts a text through it), with the bound of
// crewlog's own command that records it: a steer's body steer.push's, a message's msg.send's, a delegation's prompt
// delegate.request's, a task's failureCause an id's; none for a payload without free text. Each field below holds its
// own name, so a pointer at another field shows.
func TestImportedTextsNameEachFreeTextAndItsCommandsBound(t *testing.T) {
	status := map[string]int{"summary": MaxStatusTextChars, "reason": MaxStatusTextChars}
	ended := map[string]int{"error": MaxStatusTextChars, "failureCause": MaxIDChars}
	message := map[string]int{"from": MaxIDChars, "body": MaxBodyChars, "subject": MaxSubjectChars,
		"replyTo": MaxIDChars}
	steer := map[string]int{"from": MaxIDChars, "body": MaxSteerChars, "subject": MaxSubjectChars,
		"replyTo": MaxIDChars}
	for name, c := range map[string]struct {
		payload any
		want    map[string]int
	}{
		"run.created": {&RunCreated{Team: "team", Workflow: "workflow", Goal: "goal", Cwd: "cwd"},
			map[string]int{"team": MaxIDChars, "workflow": MaxIDChars, "goal": MaxBodyChars, "cwd": MaxCwdChars}},
		"run.queued":    {&RunQueued{Summary: "summary", Reason: "reason"}, status},
		"run.planning":  {&RunPlanning{Summary: "summary", Reason: "reason"}, status},
		"run.running":   {&RunRunning{Summary: "summary", Reason: "reason"}, status},
		"run.blocked":   {&RunBlocked{Summary: "summary", Reason: "reason"}, status},
		"run.completed": {&RunCompleted{Summary: "summary", Reason: "reason"}, status},
		"run.failed":    {&RunFailed{Summary: "summary", Reason: "reason"}, status},
		"run.cancelled": {&RunCancelled{Summary: "summary", Reason: "reason"}, status},
		"task.created": {&TaskCreated{TaskID: "T", Role: "role", Agent: "agent", Title: "title", Cwd: "cwd",
			StepID: "stepId", Model: "model"},
			map[string]int{"role": MaxIDChars, "agent": MaxIDChars, "title": MaxTitleChars, "cwd": MaxCwdChars,
				"stepId": MaxIDChars, "model": MaxModelChars}},
		"task.started": {&TaskStarted{TaskID: "T", Role: "role", Agent: "agent", Runtime: "runtime", Cwd: "cwd",
			WorktreePath: "worktreePath", WorktreeBranch: "worktreeBranch"},
			map[string]int{"role": MaxIDChars, "agent": MaxIDChars, "runtime": MaxIDChars, "cwd": MaxCwdChars,
				"worktreePath": MaxCwdChars, "worktreeBranch": MaxIDChars}},
		"task.completed":       {&TaskCompleted{TaskID: "T", Error: "error", FailureCause: "failureCause"}, ended},
		"task.failed":          {&TaskFailed{TaskID: "T", Error: "error", FailureCause: "failureCause"}, ended},
		"task.needs_attention": {&TaskNeedsAttention{TaskID: "T", Error: "error", FailureCause: "failureCause"}, ended},
		"task.cancelled": {&TaskCancelled{TaskID: "T", Reason: "reason", Phase: "phase"},
			map[string]int{"reason": MaxStatusTextChars, "phase": MaxIDChars}},
		"task.skipped": {&TaskSkipped{TaskID: "T", Reason: "reason"}, map[string]int{"reason": MaxStatusTextChars}},
		"task.retried": {&TaskRetried{TaskID: "T", Reason: "reason"}, map[string]int{"reason": MaxStatusTextChars}},
		"ask.requested": {&AskRequested{TaskID: "T", QuestionID: "q", Question: "question"},
			map[string]int{"question": MaxQuestionChars}},
		"message": {&MailboxAppended{ID: "m", To: "T", From: "from", Body: "body", Subject: "subject",
			ReplyTo: "replyTo"}, message},
		"steer": {&MailboxAppended{ID: "m", To: "T", Kind: KindSteer, From: "from", Body: "body",
			Subject: "subject", ReplyTo: "replyTo"}, steer},
		"delegate.requested": {&DelegateRequested{TaskID: "T", SubID: "s", Role: "role"},
			map[string]int{"role": MaxRecordedRoleChars}},
		"delegate.rejected": {&DelegateRejected{TaskID: "T", SubID: "s", Reason: "reason", Message: "message"},
			map[string]int{"reason": MaxIDChars, "message": MaxRejectedMessageChars}},
		"delegate.admitted": {&DelegateAdmitted{TaskID: "T", SubID: "s", Role: "role", Model: "model", Cwd: "cwd",
			Title: "title", Description: "description", Prompt: "prompt", ParentRole: "parentRole"},
			map[string]int{"role": MaxRecordedRoleChars, "model": MaxModelChars, "cwd": MaxCwdChars,
				"title": MaxTitleChars, "description": MaxDescriptionChars, "prompt": MaxPromptChars,
				"parentRole": MaxIDChars}},
		"no free text": {&TaskUsage{TaskID: "T"}, map[string]int{}},
	} {
		got := map[string]int{}
		for _, tx := range ImportedTexts(c.payload) {
			require.Equal(t, tx.Name, *tx.Text, "%s: %s points at its own field", name, tx.Name)
			got[tx.Name] = tx.Max
		}
		require.Equal(t, c.want, got, name)
		require.Len(t, ImportedTexts(c.payload), len(c.want), "%s: each text once", name)
	}
}
