package broker

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// inboxReaderID is the longest request id (as written) whose msg.inbox page a message sent here must fit in.
const inboxReaderID = 64

// widestMessageRest bounds the bytes a message takes in JSON besides its run id, sender and texts: its keys, its
// id (a recipient's label of at most commands.MaxIDChars), the recipient twice more, kind, priority, delivery mode,
// status and times.
const widestMessageRest = 2048

// widestMessageTime is the widest time a message shows (ISO, 24 chars: 9999-12-31T23:59:59.999Z).
const widestMessageTime = 253402300799999

// messageFits refuses a worker's msg.send or escalate whose message, in one of its copies, msg.inbox could not
// answer in a page of its own (oversize-frame "<method>: body too large", the engine's answer to a body past its
// bound). A message is read back as JSON, where a char can take more bytes than the request that sent it gave it (a
// quote of a JSON body is stored escaped and escaped again as it is read; '<' is read as six bytes): such a message
// would leave its recipient's msg.inbox answering oversize-frame at it for good, so that a worker could keep the
// orchestrator from reading any message after its own in the run inbox, or a sibling from reading its mailbox. The
// orchestrator's and the admin's messages are left as they are: the runtime that sends them runs the run.
//
// NB: a command the engine refuses anyway (recipients it does not know, a field past its own bound) is left to it,
// so that its answer is the engine's.
func (c *conn) messageFits(cmd commands.Command) error {
	var m projections.Message
	switch x := cmd.(type) {
	case *commands.MessageSend:
		if x.FromTask == "" || longerThan(x.Subject, commands.MaxSubjectChars) ||
			longerThan(x.ReplyTo, commands.MaxIDChars) || longerThan(x.QuestionID, commands.MaxQuestionIDChars) {
			return nil
		}
		m = projections.Message{RunID: x.RunID, From: x.FromTask, Body: x.Body, Subject: x.Subject,
			ReplyTo: x.ReplyTo, QuestionID: x.QuestionID}
	case *commands.Escalate:
		if x.FromTask == "" {
			return nil
		}
		m = projections.Message{RunID: x.RunID, From: x.FromTask, Body: x.Body}
	default:
		return nil
	}
	room := frameBudget(c.s.opts.MaxFrame, strings.Repeat("x", inboxReaderID)) - cursorBytes("4294967295")
	texts := len(m.RunID) + len(m.From) + len(m.Body) + len(m.Subject) + len(m.ReplyTo) + len(m.QuestionID)
	if 6*texts+widestMessageRest <= room {
		return nil // NB: the common case, without a read: JSON writes no byte in more than six
	}
	var boxes []string
	c.s.eng.Read(func(st *projections.State) {
		switch x := cmd.(type) {
		case *commands.MessageSend:
			boxes = x.Mailboxes(st)
		case *commands.Escalate:
			if box, ok := x.Mailbox(); ok && (box == events.RunInbox || hasTask(st, x.RunID, box)) {
				boxes = []string{box}
			}
		}
	})
	// The widest the engine may make of the rest: the longest kind, priority and delivery mode, every time shown.
	m.Kind, m.Priority, m.DeliveryMode = events.KindGroupJoin, events.PriorityNormal, events.DeliveryInterrupt
	m.Status, m.CreatedAt, m.DeliveredAt, m.AcknowledgedAt = projections.MessageAcknowledged, widestMessageTime,
		widestMessageTime, widestMessageTime
	for _, box := range widestBoxes(boxes) {
		m.To, m.ID = box, widestMessageID(box)
		if b, err := json.Marshal(toWireMessage(m)); err == nil && len(b)+1 > room {
			return wire.NewError(wire.CodeOversizeFrame, cmd.Kind()+": body too large")
		}
	}
	return nil
}

// widestBoxes are the mailboxes of boxes whose copies are the widest: the run inbox, and the task whose id is the
// longest. A copy differs from another by its recipient alone, so the others need not be measured: each is a
// marshal of the whole body, and a worker's message may have 64 copies.
func widestBoxes(boxes []string) []string {
	var out []string
	longest := ""
	for _, box := range boxes {
		switch {
		case box == events.RunInbox:
			out = append(out, box)
		case len(box) > len(longest):
			longest = box
		}
	}
	if longest != "" {
		out = append(out, longest)
	}
	return out
}

// widestMessageID is as long an id as a copy to box may have: msg_<ms>_<12 chars>_<label>, the time's base 36
// as long as an int64's.
func widestMessageID(box string) string {
	label := box
	if box == events.RunInbox {
		label = runInboxName
	}
	return "msg_" + strings.Repeat("z", 13) + "_" + strings.Repeat("z", 12) + "_" + label
}

// longerThan reports whether s has more than limit chars.
func longerThan(s string, limit int) bool { return len(s) > limit && utf8.RuneCountInString(s) > limit }

func hasTask(st *projections.State, runID, taskID string) bool {
	_, ok := st.Task(runID, taskID)
	return ok
}
