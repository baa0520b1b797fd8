package commands

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// fxCrew is a running run with workflow tasks 02_exec (running), 03_test
// (running), 04_docs (queued), 01_plan (completed) and a delegation gc-a of
// 02_exec.
func fxCrew(t *testing.T) *fxLog {
	return fxRunning(t, 0).
		task("03_test", projections.TaskRunning).
		task("04_docs", projections.TaskQueued).
		task("01_plan", projections.TaskCompleted).
		delegation("02_exec", "gc-a", 2)
}

func fxAppended(id, to, from, kind, priority, body string) fxE {
	return fxE{events.TypeMailboxAppended, &events.MailboxAppended{ID: id, To: to, From: from, Kind: kind,
		Priority: priority, DeliveryMode: events.DeliveryNextTurn, Body: body}}
}

func TestMessageSend(t *testing.T) {
	id := fxMsgID("msg", 1)
	tests := []struct {
		name string
		cmd  MessageSend
		want []fxE
	}{
		{"orchestrator to one task", MessageSend{To: []string{"03_test"}, Body: "hi"},
			[]fxE{fxAppended(id+"_03_test", "03_test", "orchestrator", "message", "normal", "hi")}},
		{"orchestrator to a list, duplicates once, kind and priority kept",
			MessageSend{To: []string{"03_test", "gc-a", "03_test", "parent"}, Body: "b", MessageKind: "follow-up",
				Priority: "urgent"},
			[]fxE{
				fxAppended(id+"_03_test", "03_test", "orchestrator", "follow-up", "urgent", "b"),
				fxAppended(id+"_gc-a", "gc-a", "orchestrator", "follow-up", "urgent", "b"),
				fxAppended(id+"_parent", events.RunInbox, "orchestrator", "follow-up", "urgent", "b"),
			}},
		{"orchestrator to all: every workflow task, finished ones included",
			MessageSend{To: []string{"all"}, Body: "b", MessageKind: "group_join"}, []fxE{
				fxAppended(id+"_02_exec", "02_exec", "orchestrator", "group_join", "normal", "b"),
				fxAppended(id+"_03_test", "03_test", "orchestrator", "group_join", "normal", "b"),
				fxAppended(id+"_04_docs", "04_docs", "orchestrator", "group_join", "normal", "b"),
				fxAppended(id+"_01_plan", "01_plan", "orchestrator", "group_join", "normal", "b"),
			}},
		{"worker to parent: the run inbox, from its task",
			MessageSend{FromTask: "03_test", To: []string{"parent"}, Body: "done", MessageKind: "notify"},
			[]fxE{fxAppended(id+"_parent", events.RunInbox, "03_test", "notify", "normal", "done")}},
		{"worker to group: the other live workflow tasks",
			MessageSend{FromTask: "03_test", To: []string{"group"}, Body: "b", Priority: "low"}, []fxE{
				fxAppended(id+"_02_exec", "02_exec", "03_test", "message", "low", "b"),
				fxAppended(id+"_04_docs", "04_docs", "03_test", "message", "low", "b"),
			}},
		{"orchestrator answers a parked question",
			MessageSend{To: []string{"03_test"}, Body: "yes", MessageKind: "response", QuestionID: "q1"},
			[]fxE{{events.TypeMailboxAppended,
				&events.MailboxAppended{ID: id + "_03_test", To: "03_test", From: "orchestrator",
					Kind: "response", Priority: "normal", DeliveryMode: events.DeliveryNextTurn, Body: "yes",
					QuestionID: "q1"}}}},
		{"worker to a sibling", MessageSend{FromTask: "03_test", To: []string{"02_exec"}, Body: "b"},
			[]fxE{fxAppended(id+"_02_exec", "02_exec", "03_test", "message", "normal", "b")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := fxCrew(t)
			tc.cmd.RunID = fxRun
			dec, err := fxDecide(t, l.s, &tc.cmd)
			require.NoError(t, err)
			fxRequireEvents(t, dec.Events, tc.want...)
			require.Equal(t, SendResult{MessageID: id, RecipientCount: len(tc.want), DurableStatus: "ok",
				LiveDeliveryStatus: "ok"}, dec.Result)
			l.apply(dec)
			m, ok := l.s.Message(fxRun, tc.want[0].p.(*events.MailboxAppended).ID)
			require.True(t, ok)
			require.Equal(t, projections.MessageQueued, m.Status)
		})
	}
}

func TestMessageSendRejections(t *testing.T) {
	l := fxCrew(t)
	long := strings.Repeat("x", MaxBodyChars+1)
	many := make([]string, MaxRecipients+1)
	for i := range many {
		many[i] = "03_test"
	}
	tests := []struct {
		name               string
		cmd                MessageSend
		code, reason, text string
	}{
		{"worker kind", MessageSend{FromTask: "03_test", To: []string{"parent"}, Body: "b", MessageKind: "steer"},
			CodeBadParams, "invalid-params", "worker kind must be 'notify' or 'message'"},
		{"unknown kind", MessageSend{To: []string{"03_test"}, Body: "b", MessageKind: "shout"}, CodeBadParams,
			"invalid-params", "kind must be"},
		{"bad priority", MessageSend{To: []string{"03_test"}, Body: "b", Priority: "high"}, CodeBadParams,
			"invalid-params", "priority"},
		{"empty body", MessageSend{To: []string{"03_test"}}, CodeBadParams, "invalid-params",
			"body must be 1..262144 chars"},
		{"body too long", MessageSend{To: []string{"03_test"}, Body: long}, CodeOversizeFrame, "body-too-large",
			"msg.send: body too large"},
		{"subject too long", MessageSend{To: []string{"03_test"}, Body: "b", Subject: strings.Repeat("s", 257)},
			CodeBadParams, "invalid-params", "subject"},
		{"questionId without response", MessageSend{To: []string{"03_test"}, Body: "b", QuestionID: "q1"},
			CodeBadParams, "invalid-params", "kind 'response' only"},
		{"questionId too long", MessageSend{To: []string{"03_test"}, Body: "b", MessageKind: "response",
			QuestionID: strings.Repeat("q", MaxQuestionIDChars+1)}, CodeBadParams, "invalid-params", "questionId"},
		{"no recipient", MessageSend{Body: "b"}, CodeBadParams, "invalid-params", "recipient count out of range"},
		{"65 recipients", MessageSend{To: many, Body: "b"}, CodeBadParams, "invalid-params",
			"recipient count out of range"},
		{"unknown recipient", MessageSend{To: []string{"03_test", "99_nope"}, Body: "b"}, CodeBadParams,
			"invalid-params", `recipient "99_nope"`},
		{"worker to all", MessageSend{FromTask: "03_test", To: []string{"all"}, Body: "b"}, CodeForbidden,
			"forbidden", "parent, group"},
		{"orchestrator to group", MessageSend{To: []string{"group"}, Body: "b"}, CodeBadParams, "invalid-params",
			"for workers"},
		{"worker task missing", MessageSend{FromTask: "99_nope", To: []string{"parent"}, Body: "b"}, CodeNoTask,
			"no-task", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cmd.RunID = fxRun
			dec, err := fxDecide(t, l.s, &tc.cmd)
			fxRejected(t, dec, err, tc.code, tc.reason, tc.text)
		})
	}
	t.Run("no run", func(t *testing.T) {
		dec, err := fxDecide(t, l.s, &MessageSend{RunID: "nope", To: []string{"x"}, Body: "b"})
		fxRejected(t, dec, err, CodeNoManifest, "no-manifest", "")
	})

	// A worker alone among live workflow tasks has an empty group.
	solo := fxRunning(t, 0)
	dec, err := fxDecide(t, solo.s, &MessageSend{RunID: fxRun, FromTask: "02_exec", To: []string{"group"}, Body: "b"})
	fxRejected(t, dec, err, CodeBadParams, "invalid-params", "recipient count out of range")
}

// TestMailboxesAreNoneWhereTheRecipientsAreRefused: Mailboxes, which the
// broker measures the copies of a worker's message on, names none where
// decide refuses the message for its recipients: none at all, or an
// expansion past MaxRecipients ("group" of a worker among 65 live tasks,
// "all" of the orchestrator's 66), which the walk stops one past the bound.
func TestMailboxesAreNoneWhereTheRecipientsAreRefused(t *testing.T) {
	l := fxRunning(t, 0)
	for i := range MaxRecipients + 1 {
		l.task(fmt.Sprintf("t%02d", i), projections.TaskRunning)
	}
	solo := fxRunning(t, 0)
	for _, tc := range []struct {
		name string
		s    *projections.State
		cmd  MessageSend
	}{
		{"a worker's group past the bound", l.s, MessageSend{FromTask: "02_exec", To: []string{"group"}}},
		{"the orchestrator's all past the bound", l.s, MessageSend{To: []string{"all"}}},
		{"a worker alone in its group", solo.s, MessageSend{FromTask: "02_exec", To: []string{"group"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cmd.RunID, tc.cmd.Body = fxRun, "b"
			dec, err := fxDecide(t, tc.s, &tc.cmd)
			fxRejected(t, dec, err, CodeBadParams, "invalid-params", "recipient count out of range")
			require.Nil(t, tc.cmd.Mailboxes(tc.s))
		})
	}
	// At the bound, every recipient is named.
	at := fxRunning(t, 0)
	for i := range MaxRecipients {
		at.task(fmt.Sprintf("t%02d", i), projections.TaskRunning)
	}
	require.Len(t, (&MessageSend{RunID: fxRun, FromTask: "02_exec", To: []string{"group"}}).Mailboxes(at.s),
		MaxRecipients)
}

func TestEscalate(t *testing.T) {
	id := fxMsgID("esc", 1)
	tests := []struct {
		name string
		cmd  Escalate
		want fxE
		to   string
	}{
		{"defaults to the sender's own task", Escalate{FromTask: "03_test", Body: "stuck"},
			fxAppended(id, "03_test", "03_test", "follow-up", "normal", "stuck"), "03_test"},
		{"to parent is the run inbox", Escalate{FromTask: "03_test", To: "parent", Body: "stuck", Priority: "urgent"},
			fxAppended(id, events.RunInbox, "03_test", "follow-up", "urgent", "stuck"), "parent"},
		{"orchestrator names a task", Escalate{To: "02_exec", Body: "look"},
			fxAppended(id, "02_exec", "orchestrator", "follow-up", "normal", "look"), "02_exec"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := fxCrew(t)
			tc.cmd.RunID = fxRun
			dec, err := fxDecide(t, l.s, &tc.cmd)
			require.NoError(t, err)
			fxRequireEvents(t, dec.Events, tc.want)
			require.Equal(t, EscalateResult{MessageID: id, To: tc.to, Durable: true}, dec.Result)
		})
	}
	l := fxCrew(t)
	for _, tc := range []struct {
		name               string
		cmd                Escalate
		code, reason, text string
	}{
		{"orchestrator without to", Escalate{Body: "b"}, CodeBadParams, "invalid-params", "to is required"},
		{"empty body", Escalate{FromTask: "03_test"}, CodeBadParams, "invalid-params", "body"},
		{"bad priority", Escalate{FromTask: "03_test", Body: "b", Priority: "p0"}, CodeBadParams, "invalid-params",
			"priority"},
		{"unknown recipient", Escalate{FromTask: "03_test", To: "99_x", Body: "b"}, CodeBadParams,
			"invalid-params", `"99_x"`},
		{"unknown sender", Escalate{FromTask: "99_x", To: "parent", Body: "b"}, CodeNoTask, "no-task", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cmd.RunID = fxRun
			dec, err := fxDecide(t, l.s, &tc.cmd)
			fxRejected(t, dec, err, tc.code, tc.reason, tc.text)
		})
	}
}

func TestMailboxDeliverAndAck(t *testing.T) {
	l := fxCrew(t)
	l.run(&MessageSend{RunID: fxRun, To: []string{"03_test"}, Body: "one"})
	l.run(&MessageSend{RunID: fxRun, To: []string{"03_test", "parent"}, Body: "two"})
	var ids []string
	page, err := l.s.Mailbox(fxRun, "03_test", projections.MailboxFilter{})
	require.NoError(t, err)
	for _, m := range page.Messages {
		ids = append(ids, m.ID)
	}
	require.Len(t, ids, 2)

	dec, err := fxDecide(t, l.s, &MailboxDeliver{RunID: fxRun, Recipient: "03_test",
		MessageIDs: []string{ids[0], ids[0]}})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events, fxE{events.TypeMailboxDelivered,
		&events.MailboxDelivered{MessageID: ids[0], Recipient: "03_test"}})
	require.Equal(t, MailboxResult{OK: true, Changed: []string{ids[0]}}, dec.Result)
	l.apply(dec)

	dec, err = fxDecide(t, l.s, &MailboxDeliver{RunID: fxRun, Recipient: "03_test", MessageIDs: []string{ids[0]}})
	require.NoError(t, err)
	require.Empty(t, dec.Events, "delivering again is a no-op")
	require.Equal(t, MailboxResult{OK: true, Changed: []string{}}, dec.Result)

	// Ack: one delivered, one still queued.
	dec, err = fxDecide(t, l.s, &MailboxAck{RunID: fxRun, Recipient: "03_test", MessageIDs: ids})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events,
		fxE{events.TypeMailboxAcknowledged, &events.MailboxAcknowledged{MessageID: ids[0], Recipient: "03_test"}},
		fxE{events.TypeMailboxAcknowledged, &events.MailboxAcknowledged{MessageID: ids[1], Recipient: "03_test"}})
	l.apply(dec)
	for _, id := range ids {
		m, _ := l.s.Message(fxRun, id)
		require.Equal(t, projections.MessageAcknowledged, m.Status)
	}
	dec, err = fxDecide(t, l.s, &MailboxAck{RunID: fxRun, Recipient: "03_test", MessageIDs: ids})
	require.NoError(t, err)
	require.Empty(t, dec.Events, "acknowledging again is a no-op")
	dec, err = fxDecide(t, l.s, &MailboxDeliver{RunID: fxRun, Recipient: "03_test", MessageIDs: ids})
	require.NoError(t, err)
	require.Empty(t, dec.Events, "an acknowledged message is never delivered again")

	// The run inbox is recipient "".
	page, err = l.s.Mailbox(fxRun, events.RunInbox, projections.MailboxFilter{})
	require.NoError(t, err)
	require.Len(t, page.Messages, 1)
	dec, err = fxDecide(t, l.s, &MailboxAck{RunID: fxRun, Recipient: events.RunInbox,
		MessageIDs: []string{page.Messages[0].ID}})
	require.NoError(t, err)
	require.Len(t, dec.Events, 1)

	for _, tc := range []struct {
		name               string
		cmd                Command
		code, reason, text string
	}{
		{"unknown id", &MailboxDeliver{RunID: fxRun, Recipient: "03_test", MessageIDs: []string{ids[0], "msg_x"}},
			CodeBadParams, "invalid-params", `message "msg_x" is not in mailbox "03_test"`},
		{"another mailbox", &MailboxAck{RunID: fxRun, Recipient: "02_exec", MessageIDs: []string{ids[1]}},
			CodeBadParams, "invalid-params", "mailbox.ack: message"},
		{"run inbox named parent", &MailboxAck{RunID: fxRun, Recipient: events.RunInbox,
			MessageIDs: []string{ids[1]}},
			CodeBadParams, "invalid-params", `mailbox "parent"`},
		{"no ids", &MailboxAck{RunID: fxRun, Recipient: "03_test"}, CodeBadParams, "invalid-params", "messageIds"},
		{"no run", &MailboxDeliver{RunID: "nope", Recipient: "03_test", MessageIDs: []string{"x"}}, CodeNoManifest,
			"no-manifest", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := fxDecide(t, l.s, tc.cmd)
			fxRejected(t, dec, err, tc.code, tc.reason, tc.text)
		})
	}
}
