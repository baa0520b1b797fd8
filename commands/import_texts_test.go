package commands

import (
	"context"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestImportedTextsAreWhatCommandsRecord: import.append refuses a free text longer than crewlog's own command that
// records it takes (a question over wait.request's 8192 chars, a title over task.create's, a body over msg.send's, a
// steer over steer.push's, ...), by pointer or by value, and takes one at its bound; nothing refused is recorded.
func TestImportedTextsAreWhatCommandsRecord(t *testing.T) {
	long := func(n int) string {
		if n > MaxBodyChars {
			return strings.Repeat("x", n) // NB: as many two-byte chars exceed the store's payload limit
		}
		return strings.Repeat("é", n)
	}
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	r, err := f.eng.Submit(context.Background(), importOf("R", "import:R:run", events.TypeRunCreated,
		&events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}))
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	head := f.eng.Head()
	for name, tc := range map[string]struct {
		typ      string
		over, at any
		want     string
	}{
		"question": {events.TypeAskRequested,
			&events.AskRequested{TaskID: "T", QuestionID: "q1", Question: long(MaxQuestionChars + 1)},
			&events.AskRequested{TaskID: "T", QuestionID: "q2", Question: long(MaxQuestionChars)},
			"question must be at most 8192 chars"},
		"title by value": {events.TypeTaskCreated,
			events.TaskCreated{TaskID: "A", Title: long(MaxTitleChars + 1), Kind: events.TaskKindWorkflow},
			events.TaskCreated{TaskID: "B", Title: long(MaxTitleChars), Kind: events.TaskKindWorkflow},
			"title must be at most 1024 chars"},
		"body": {events.TypeMailboxAppended,
			&events.MailboxAppended{ID: "m1", To: "T", Body: long(MaxBodyChars + 1)},
			&events.MailboxAppended{ID: "m2", To: "T", Body: long(MaxBodyChars)},
			"body must be at most 262144 chars"},
		"steer": {events.TypeMailboxAppended,
			&events.MailboxAppended{ID: "s1", To: "T", Kind: events.KindSteer, Body: long(MaxSteerChars + 1)},
			&events.MailboxAppended{ID: "s2", To: "T", Kind: events.KindSteer, Body: long(MaxSteerChars)},
			"body must be at most 4096 chars"},
		"error": {events.TypeTaskFailed,
			&events.TaskFailed{TaskID: "T", Error: long(MaxStatusTextChars + 1)},
			&events.TaskFailed{TaskID: "T", Error: long(MaxStatusTextChars)}, "error must be at most 589824 chars"},
		"goal": {events.TypeRunRunning, &events.RunRunning{Summary: long(MaxStatusTextChars + 1)},
			&events.RunRunning{Summary: long(MaxStatusTextChars)}, "summary must be at most"},
		"description": {events.TypeDelegateAdmitted,
			&events.DelegateAdmitted{TaskID: "T", SubID: "gc-1", Description: long(MaxDescriptionChars + 1)},
			&events.DelegateAdmitted{TaskID: "T", SubID: "gc-2", Description: long(MaxDescriptionChars)},
			"description must be at most 512 chars"},
	} {
		r, err := f.eng.Submit(context.Background(), importOf("R", "import:R:over:"+name, tc.typ, tc.over))
		require.NoError(t, err, name)
		require.NotNil(t, r.Rejected, name)
		require.Contains(t, r.Rejected.Message, tc.want, name)
		require.Equal(t, head, f.eng.Head(), "%s: nothing recorded", name)
		r, err = f.eng.Submit(context.Background(), importOf("R", "import:R:at:"+name, tc.typ, tc.at))
		require.NoError(t, err, name)
		require.Nil(t, r.Rejected, name)
		head = f.eng.Head()
	}
}
