package broker

import (
	"encoding/json"
	"strings"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// readerIDLen is the longest request id (as written) whose answer a record sent here must fit in: the msg.inbox page
// of a message, the proxy.result answer of a delivered result, the events.since page of a proxy call's arguments.
const readerIDLen = 64

// widestReaderID is a request id of readerIDLen bytes, which every measure of a reader's room takes: made once, not
// for every request measured.
var widestReaderID = strings.Repeat("x", readerIDLen)

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
// NB: a command the engine refuses anyway (a param it refuses whatever the state, recipients it does not know or
// more of them than a message may reach) is left to it, so that its answer is the engine's. The copies are measured
// against the published state it reads, not the state the engine decides on: a recipient created between that read
// and the decision ("group" expanding to a task made meanwhile) is not measured.
func (c *conn) messageFits(cmd commands.Command) error {
	var (
		m      projections.Message
		params func() error
	)
	switch x := cmd.(type) {
	case *commands.MessageSend:
		if x.FromTask == "" {
			return nil
		}
		m = projections.Message{RunID: x.RunID, From: x.FromTask, Body: x.Body, Subject: x.Subject,
			ReplyTo: x.ReplyTo, QuestionID: x.QuestionID}
		params = x.CheckParams
	case *commands.Escalate:
		if x.FromTask == "" {
			return nil
		}
		m = projections.Message{RunID: x.RunID, From: x.FromTask, Body: x.Body}
		params = x.CheckParams
	default:
		return nil
	}
	room := inboxPageRoom(c.s.opts.MaxFrame)
	texts := len(m.RunID) + len(m.From) + len(m.Body) + len(m.Subject) + len(m.ReplyTo) + len(m.QuestionID)
	if 6*texts+widestMessageRest <= room {
		return nil // NB: the common case, without a read: JSON writes no byte in more than six
	}
	if params() != nil {
		return nil
	}
	var boxes []string
	c.s.eng.Read(func(st *projections.State) {
		switch x := cmd.(type) {
		case *commands.MessageSend:
			boxes = x.Mailboxes(st)
		case *commands.Escalate:
			box, ok := x.Mailbox()
			if ok && box != events.RunInbox {
				_, ok = st.Task(x.RunID, box)
			}
			if ok {
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

// inboxPageRoom is the bytes a message may take as the one message of a msg.inbox page (a next cursor after it)
// answering a request id of readerIDLen bytes, in a frame of maxFrame. NB: every settle and every worker's message
// is measured against it, so it neither allocates nor marshals.
func inboxPageRoom(maxFrame int) int {
	return frameBudget(maxFrame, widestReaderID) - widestInboxCursorBytes
}

// widestInboxCursor is the widest next cursor of a mailbox's page: msg.inbox's offset below 2^32 (query.mailbox's,
// the same ordinal in base 36, is narrower).
const widestInboxCursor = "4294967295"

// widestInboxCursorBytes is what widestInboxCursor takes as a page's nextCursor.
var widestInboxCursorBytes = cursorBytes(widestInboxCursor)

// fitResult cuts the text of delegate.settle x so that the message delivering its result, to the parent task or
// rerouted to the run inbox, fits in a page of its own as msg.inbox answers it (messageFits). The text is a
// grandchild's, which the runtime passes on: one whose chars take six bytes each in JSON would otherwise leave the
// parent's msg.inbox (or the run inbox) answering oversize-frame at the result for good, so that the parent read
// neither its result nor any message after it. A settlement cannot be refused for it (it frees the slot, and a
// run must be able to finish), so the text is cut, as the fence cuts it at commands.MaxResultChars, and the engine
// follows the fence with a note of the cut (made room for in the text), so that the parent learns that there was
// more than it reads. NB: the engine leaves the note out where the text as cut is shorter than it: in a frame under
// about 1.6 KiB (1.9 KiB for a run id of the longest), the room for a parent task id of the longest leaves too
// little for the text (in 1 KiB, none).
func (c *conn) fitResult(x *commands.DelegateSettle) {
	room := inboxPageRoom(c.s.opts.MaxFrame)
	if 6*(len(x.Text)+4*len(x.SubID)+len(x.RunID)+commands.MaxIDChars)+widestMessageRest <= room {
		// NB: the common case, without a read: the fence writes the sub id twice, the message twice more (sender and
		// data); commands.MaxIDChars covers the run id an admin may leave out (commands.MaxRunIDChars of
		// [A-Za-z0-9_-]) and the text the result's message adds around its ids (the fence's markers and tag, the
		// sender's "delegate:", the data's keys).
		return
	}
	// NB: the engine fingerprints the text as sent (SentText), whatever the cut, so that a retry through another
	// frame is the same request; an outcome recorded by a build before SentText holds the digest of the text as cut,
	// which a retry cut the same matches. So the cut is made by the request and the frame alone, never by what the
	// run holds when it arrives: a settle of a delegation not admitted yet (or not yet in this crewd's copy) would be
	// left uncut and refused, that refusal recorded, and its retry, cut once the delegation is there, match that
	// build's outcome no more; the admin's settle that leaves out runId names its run only through the slot the
	// settle frees. So it is cut for the widest parent task id, and without runId for the widest run id too.
	runID, parent := x.RunID, strings.Repeat("z", commands.MaxIDChars)
	if runID == "" {
		runID = strings.Repeat("z", commands.MaxRunIDChars)
	}
	// The widest the engine may make of the rest of the message: the widest data (ok and timedOut false, which
	// JSON writes a byte wider than true, cancelled set), every time shown.
	m := projections.Message{RunID: runID, From: events.ResultSenderPrefix + x.SubID, Kind: events.KindGroupJoin,
		Priority: events.PriorityNormal, DeliveryMode: events.DeliveryInterrupt,
		Body: commands.ResultBody(x.SubID, x.Outcome, ""), Rerouted: true,
		Data:   &events.MessageData{SubID: x.SubID, Cancelled: true},
		Status: projections.MessageAcknowledged, CreatedAt: widestMessageTime, DeliveredAt: widestMessageTime,
		AcknowledgedAt: widestMessageTime}
	rest := 0
	for _, box := range []string{parent, events.RunInbox} {
		m.To, m.ID = box, widestMessageID(box)
		if b, err := json.Marshal(toWireMessage(m)); err == nil {
			rest = max(rest, len(b)+1)
		}
	}
	if cut := commands.JSONPrefix(x.Text, room-rest); cut != x.Text {
		x.Text, x.SentText = cut, x.Text
	}
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
