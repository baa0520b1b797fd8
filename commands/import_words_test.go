package commands

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestAnImportedMessagesWordsAreOnesCrewlogRecords: an imported message's kind, priority and delivery mode are
// empty (the default) or one of the words msg.send and pi-crew write (events.MessageKindOK, PriorityOK,
// DeliveryModeOK). import.append recorded any string, one of 60,000 '<' included, which every read of the message
// copies, so msg.inbox and query.mailbox answered oversize-frame at that message for good whatever the frame.
func TestAnImportedMessagesWordsAreOnesCrewlogRecords(t *testing.T) {
	long := strings.Repeat("<", 60_000)
	for name, c := range map[string]struct {
		m    events.MailboxAppended
		want string // "" when recorded
	}{
		"every word": {events.MailboxAppended{Kind: events.KindSteer, Priority: events.PriorityUrgent,
			DeliveryMode: events.DeliveryInterrupt}, ""},
		"no word":         {events.MailboxAppended{}, ""},
		"a long kind":     {events.MailboxAppended{Kind: long}, "mailbox.appended: kind must be"},
		"an unknown kind": {events.MailboxAppended{Kind: "shout"}, "mailbox.appended: kind must be"},
		"a long priority": {events.MailboxAppended{Priority: long}, "mailbox.appended: priority must be"},
		"an unknown delivery": {events.MailboxAppended{DeliveryMode: "never"},
			"mailbox.appended: deliveryMode must be"},
	} {
		t.Run(name, func(t *testing.T) {
			m := c.m
			m.ID, m.To, m.From = "m1", "t1", "orchestrator"
			err := decideAfterTask(t, &m)
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.want)
		})
	}
}
