package commands

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/projections"
)

// The mailbox's bounds hold on both sides: msg.send names at most MaxRecipients recipients and mailbox.deliver /
// mailbox.ack at most MaxMessageIDs ids; a list at the bound is decided, one past it refused with nothing recorded.
func TestMailboxBoundsHoldOnBothSides(t *testing.T) {
	l := fxRunning(t, 0)
	tasks := make([]string, MaxRecipients+1)
	for i := range tasks {
		tasks[i] = fmt.Sprintf("t%02d", i)
		l.task(tasks[i], projections.TaskRunning)
	}
	l.run(&MessageSend{RunID: fxRun, To: []string{"t00"}, Body: "b"})
	page, err := l.s.Mailbox(fxRun, "t00", projections.MailboxFilter{})
	require.NoError(t, err)
	require.Len(t, page.Messages, 1)
	id := page.Messages[0].ID

	for _, tc := range []struct {
		name   string
		cmd    Command
		copies int // the events a decided command records; -1: refused
	}{
		{"msg.send to MaxRecipients tasks", &MessageSend{RunID: fxRun, To: tasks[:MaxRecipients], Body: "b"},
			MaxRecipients},
		{"msg.send naming MaxRecipients, the same task each time",
			&MessageSend{RunID: fxRun, To: slices.Repeat([]string{"t00"}, MaxRecipients), Body: "b"}, 1},
		{"msg.send to one past MaxRecipients", &MessageSend{RunID: fxRun, To: tasks, Body: "b"}, -1},
		{"mailbox.deliver of MaxMessageIDs ids", &MailboxDeliver{RunID: fxRun, Recipient: "t00",
			MessageIDs: slices.Repeat([]string{id}, MaxMessageIDs)}, 1},
		{"mailbox.deliver of one past MaxMessageIDs", &MailboxDeliver{RunID: fxRun, Recipient: "t00",
			MessageIDs: slices.Repeat([]string{id}, MaxMessageIDs+1)}, -1},
		{"mailbox.ack of MaxMessageIDs ids", &MailboxAck{RunID: fxRun, Recipient: "t00",
			MessageIDs: slices.Repeat([]string{id}, MaxMessageIDs)}, 1},
		{"mailbox.ack of one past MaxMessageIDs", &MailboxAck{RunID: fxRun, Recipient: "t00",
			MessageIDs: slices.Repeat([]string{id}, MaxMessageIDs+1)}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := fxDecide(t, l.s, tc.cmd)
			if tc.copies < 0 {
				fxRejected(t, dec, err, CodeBadParams, "invalid-params", "")
				return
			}
			require.NoError(t, err)
			require.Len(t, dec.Events, tc.copies)
			if send, ok := tc.cmd.(*MessageSend); ok {
				require.Equal(t, tc.copies, dec.Result.(SendResult).RecipientCount)
				require.Len(t, send.Mailboxes(l.s), tc.copies)
				return
			}
			require.Equal(t, MailboxResult{OK: true, Changed: []string{id}}, dec.Result)
		})
	}
}
