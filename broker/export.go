package broker

import (
	"encoding/json"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The socket's wire shapes, for crewlog's other read-only front end (package broker/httpapi): an event and a
// message and a ledger account's history look the same over HTTP as in a team.event push, a msg.inbox answer and a
// query.ledger {taskId} answer.

// AdminEventJSON renders a stored event, whose payload ev the caller decoded (projections.FromLog), as
// team.event data as the admin sees it: every field, credential digests removed (see renderEvent).
func AdminEventJSON(r *eventlog.Event, ev events.Event) (json.RawMessage, error) {
	te, err := renderDecoded(r, ev, eventViewer{identity: identity{role: events.RoleAdmin}})
	if err != nil {
		return nil, err
	}
	return te.encodeJSON()
}

// WireMessage is a mailbox message in msg.inbox's shape.
func WireMessage(m projections.Message) any { return toWireMessage(m) }

// LedgerHistory is a page of one ledger account's history (projections.State.AccountHistory) in query.ledger
// {taskId}'s shape.
func LedgerHistory(taskID string, h projections.LedgerHistory) any {
	return accountHistoryOf(taskID, h)
}
