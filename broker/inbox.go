package broker

import (
	"fmt"
	"strconv"
	"time"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// msg.inbox paging (D§7.5): limit a number ≥ 1, floored and clamped to 1000, default 100.
const (
	defaultInboxLimit = 100
	maxInboxLimit     = 1000
)

// runInboxName is how the run inbox appears in pi-crew's message shape: workers address it as "parent".
const runInboxName = "parent"

// wireMessage is a mailbox message in pi-crew's MailboxMessage shape (D§2.6): times as ISO strings, the run inbox
// named "parent", and one status field (crewlog has a single source of truth for it).
type wireMessage struct {
	ID             string              `json:"id"`
	RunID          string              `json:"runId"`
	Direction      string              `json:"direction"`
	From           string              `json:"from"`
	To             string              `json:"to"`
	TaskID         string              `json:"taskId,omitempty"`
	Body           string              `json:"body"`
	Subject        string              `json:"subject,omitempty"`
	Kind           string              `json:"kind"`
	Priority       string              `json:"priority"`
	DeliveryMode   string              `json:"deliveryMode,omitempty"`
	Status         string              `json:"status"`
	QuestionID     string              `json:"questionId,omitempty"`
	ReplyTo        string              `json:"replyTo,omitempty"`
	Rerouted       bool                `json:"rerouted,omitempty"`
	Data           *events.MessageData `json:"data,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	DeliveredAt    string              `json:"deliveredAt,omitempty"`
	AcknowledgedAt string              `json:"acknowledgedAt,omitempty"`
	TextsOmitted   bool                `json:"textsOmitted,omitempty"`
	// NamesOmitted says the message's runId, to, taskId, replyTo and questionId were left out: without its texts it
	// would not fit either; and its from and data.subId when it would not fit without those either (message_fit.go).
	NamesOmitted bool `json:"namesOmitted,omitempty"`
}

func isoTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(isoMillis)
}

func toWireMessage(m projections.Message) wireMessage {
	to := m.To
	if to == events.RunInbox {
		to = runInboxName
	}
	return wireMessage{
		ID: m.ID, RunID: m.RunID, Direction: "inbox", From: m.From, To: to, TaskID: m.To, Body: m.Body,
		Subject: m.Subject, Kind: m.Kind, Priority: m.Priority, DeliveryMode: m.DeliveryMode, Status: string(m.Status),
		QuestionID: m.QuestionID, ReplyTo: m.ReplyTo, Rerouted: m.Rerouted, Data: m.Data,
		CreatedAt: isoTime(m.CreatedAt), DeliveredAt: isoTime(m.DeliveredAt), AcknowledgedAt: isoTime(m.AcknowledgedAt),
	}
}

type inboxResult struct {
	Messages   []wireMessage `json:"messages"`
	NextCursor string        `json:"nextCursor,omitempty"`
	HasMore    bool          `json:"hasMore"`
	Total      int           `json:"total"`
}

// handleInbox: {limit?, cursor?} → {messages, nextCursor?, hasMore, total}: the messages of the caller's mailbox
// not yet acknowledged, in append order. A worker reads its task's mailbox, the orchestrator the run inbox, the
// admin params.taskId's (or the run inbox) of params.runId.
func handleInbox(cl *call) (any, error) {
	p := readParams(cl)
	limit := int(p.atLeastOne("limit", maxInboxLimit, defaultInboxLimit))
	cursor := p.str("cursor", false, 64)
	box := events.RunInbox
	switch cl.c.id.role {
	case events.RoleWorker:
		box = cl.c.id.taskID
	case events.RoleAdmin:
		box = p.str("taskId", false, 256)
	}
	runID := p.run(cl)
	if p.err != nil {
		return nil, p.err
	}
	ordinal, err := offsetCursor(cursor)
	if err != nil {
		return nil, err
	}
	return mailboxPage(cl, runID, box, projections.MailboxFilter{Pending: true, Limit: limit, Cursor: ordinal,
		PastEndIsEmpty: true}, true)
}

// offsetCursor turns msg.inbox's cursor, a stringified offset (D§7.5: pi-crew's is String(offset)), into the
// projection's cursor. The offset is the ordinal of the next message of the mailbox, acknowledged ones included, so
// it stays valid while messages before it are acknowledged; it equals pi-crew's offset while none is.
func offsetCursor(cursor string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	n, err := strconv.ParseUint(cursor, 10, 32)
	if err != nil {
		return "", fmt.Errorf("%w: %q", projections.ErrBadCursor, cursor)
	}
	return strconv.FormatUint(n, 36), nil
}

// mailboxPage reads a page and, when it would not fit in a frame, shortens it (the projection's cursor then
// points at the first message left out). A message too large for a frame alone is sent without its texts
// (wireMessage.omitTexts), then without its run's, its mailbox's and its reply's ids (wireMessage.omitNames), then
// without its sender's (wireMessage.omitSender). offset gives the next cursor as msg.inbox's stringified offset
// rather than the projection's own.
func mailboxPage(cl *call, runID, box string, f projections.MailboxFilter, offset bool) (inboxResult, error) {
	// NB: the room messageFits measures a worker's message against, so that what it lets through is sent whole.
	om := omission[wireMessage]{room: pageBudget(cl) - cursorBytes(widestInboxCursor)}
	om.omit = func(w *wireMessage) {
		omitToFit(w, om.room, (*wireMessage).omitTexts, (*wireMessage).omitNames, (*wireMessage).omitSender)
	}
	p, err := fitPageOmitting(cl, f.Limit, func(limit int) (page[projections.Message], error) {
		f.Limit = limit
		mp, err := readState(cl, func(st *projections.State) (projections.MailboxPage, error) {
			return st.Mailbox(runID, box, f)
		})
		next := mp.NextCursor
		if offset && next != "" {
			// NB: here, not after fitPage, which counts the cursor's bytes as the page gives it.
			n, _ := strconv.ParseUint(next, 36, 32) // the projection's own cursor always parses
			next = strconv.FormatUint(n, 10)
		}
		return page[projections.Message]{items: mp.Messages, next: next, total: mp.Total}, err
	}, toWireMessage, om)
	if err != nil {
		return inboxResult{}, err
	}
	return inboxResult{Messages: p.items, NextCursor: p.next, HasMore: p.next != "", Total: p.total}, nil
}
