package projections

import (
	"slices"

	"github.com/crewlog/crewlog/events"
)

// MessageStatus is a message's delivery state: one field, one source of
// truth (pi-crew split it between two files, P18), only ever moving forward.
type MessageStatus string

// Message statuses, in order.
const (
	MessageQueued       MessageStatus = "queued"
	MessageDelivered    MessageStatus = "delivered"
	MessageAcknowledged MessageStatus = "acknowledged"
)

// Message is the read model of a mailbox message (D§2.6). To is the
// recipient: a task id, or events.RunInbox ("") for the run-level inbox.
// Times are unix milliseconds.
type Message struct {
	RunID          string              `json:"runId" msgpack:"runId"`
	ID             string              `json:"id" msgpack:"id"`
	To             string              `json:"to" msgpack:"to"`
	From           string              `json:"from" msgpack:"from"`
	Kind           string              `json:"kind" msgpack:"kind"`
	Priority       string              `json:"priority" msgpack:"priority"`
	DeliveryMode   string              `json:"deliveryMode" msgpack:"deliveryMode"`
	Body           string              `json:"body" msgpack:"body"`
	Subject        string              `json:"subject,omitempty" msgpack:"subject"`
	QuestionID     string              `json:"questionId,omitempty" msgpack:"questionId"`
	ReplyTo        string              `json:"replyTo,omitempty" msgpack:"replyTo"`
	Rerouted       bool                `json:"rerouted,omitempty" msgpack:"rerouted"`
	Data           *events.MessageData `json:"data,omitempty" msgpack:"data"`
	Status         MessageStatus       `json:"status" msgpack:"status"`
	CreatedAt      int64               `json:"createdAt" msgpack:"createdAt"`
	DeliveredAt    int64               `json:"deliveredAt,omitempty" msgpack:"deliveredAt"`
	AcknowledgedAt int64               `json:"acknowledgedAt,omitempty" msgpack:"acknowledgedAt"`
}

func (m Message) clone() Message {
	if m.Data != nil {
		d := *m.Data
		m.Data = &d
	}
	return m
}

// addMessage appends m to the run's log of messages and its recipient's box.
func (r *runState) addMessage(m Message) {
	r.indexMessage(r.msgs.Len(), &m)
	r.msgs.Append(m)
}

// indexMessage indexes m, the i'th message of the run's log.
func (r *runState) indexMessage(i int, m *Message) {
	r.msgIndex[m.ID] = i
	r.boxes[m.To] = append(r.boxes[m.To], i)
	x := r.boxPending[m.To]
	if x == nil {
		x = &pendingIndex{}
		r.boxPending[m.To] = x
	}
	x.appended(m.Status != MessageAcknowledged)
}

func applyMailbox(r *runState, ev events.Event) {
	at := ev.UnixMilli()
	switch ev.Type {
	case events.TypeMailboxAppended:
		p := events.PayloadAs[events.MailboxAppended](ev)
		if p == nil {
			return
		}
		if _, dup := r.msgIndex[p.ID]; dup {
			return
		}
		r.run.Usage.MsgBytes += int64(len(p.Body) + len(p.Subject))
		r.addMessage(Message{
			RunID: r.run.RunID, ID: p.ID, To: p.To, From: p.From, Kind: p.Kind, Priority: p.Priority,
			DeliveryMode: p.DeliveryMode, Body: p.Body, Subject: p.Subject, QuestionID: p.QuestionID,
			ReplyTo: p.ReplyTo, Rerouted: p.Rerouted, Data: p.Data, Status: MessageQueued, CreatedAt: at,
		})
	case events.TypeMailboxDelivered:
		if p := events.PayloadAs[events.MailboxDelivered](ev); p != nil {
			if i, ok := r.msgIndex[p.MessageID]; ok && r.msgs.At(i).Status == MessageQueued {
				m := r.msgs.At(i)
				m.Status = MessageDelivered
				m.DeliveredAt = at
			}
		}
	case events.TypeMailboxAcknowledged:
		if p := events.PayloadAs[events.MailboxAcknowledged](ev); p != nil {
			if i, ok := r.msgIndex[p.MessageID]; ok && r.msgs.At(i).Status != MessageAcknowledged {
				m := r.msgs.At(i)
				m.Status = MessageAcknowledged
				m.AcknowledgedAt = at
				// NB: a box lists its messages' indexes in the run's log in append order, so sorted.
				ord, _ := slices.BinarySearch(r.boxes[m.To], i)
				r.boxPending[m.To].settled(ord)
			}
		}
	}
	// steer.pushed is the durable steering entry of a message appended in
	// the same batch; the message already carries everything it says.
}

// MailboxFilter selects a page of one recipient's mailbox, in append order.
type MailboxFilter struct {
	// Pending drops acknowledged messages (what msg.inbox lists).
	Pending bool
	// Limit caps the page; 0 means no cap.
	Limit int
	// Cursor is NextCursor of the previous page; empty starts at the first.
	Cursor string
	// PastEndIsEmpty reads a cursor past the last message as an empty page,
	// not ErrBadCursor: msg.inbox's cursor is a client's offset, and pi-crew
	// slices its list at it.
	PastEndIsEmpty bool
}

// MailboxPage is one page of messages. Total counts the recipient's messages
// that pass the filter, from the start. NextCursor is empty on the last page.
type MailboxPage struct {
	Messages   []Message
	NextCursor string
	Total      int
}

// Mailbox returns a page of recipient's messages in run runID (recipient
// events.RunInbox for the run inbox). Messages are never removed, so a cursor
// (an offset into the recipient's append-only box) stays valid.
func (s *State) Mailbox(runID, recipient string, f MailboxFilter) (MailboxPage, error) {
	r, err := s.lookupRun(runID)
	if r == nil {
		return MailboxPage{}, err
	}
	box := r.boxes[recipient]
	sel := everything(len(box))
	if f.Pending {
		sel = pendingIn(r.boxPending[recipient])
	}
	cursor := f.Cursor
	if f.PastEndIsEmpty {
		cursor = cursorAtMost(cursor, len(box))
	}
	page, err := filteredPage(len(box), PageFilter{Limit: f.Limit, Cursor: cursor}, sel,
		func(i int) Message { return r.msgs.At(box[i]).clone() })
	if err != nil {
		return MailboxPage{}, err
	}
	return MailboxPage{Messages: page.Items, NextCursor: page.NextCursor, Total: page.Total}, nil
}

// Message returns message id of run runID.
func (s *State) Message(runID, id string) (Message, bool) {
	r := s.run(runID)
	if r == nil {
		return Message{}, false
	}
	i, ok := r.msgIndex[id]
	if !ok {
		return Message{}, false
	}
	return r.msgs.At(i).clone(), true
}
