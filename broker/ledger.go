package broker

import (
	"encoding/json"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/projections"
)

// wireAccount is a ledger account on the wire. An account whose history (reservations and charges) alone would
// not fit in a frame is sent without it — reservations and charges null, historyOmitted true — and its history
// is read page by page with query.ledger {taskId}. Nothing is ever hidden: every entry stays reachable.
type wireAccount struct {
	projections.Account
	HistoryOmitted bool `json:"historyOmitted,omitempty"`
}

// accountHistory is query.ledger's answer for one account's history.
type accountHistory struct {
	TaskID       string                    `json:"taskId"`
	Reservations []projections.Reservation `json:"reservations"`
	Charges      []projections.Charge      `json:"charges"`
	NextCursor   string                    `json:"nextCursor,omitempty"`
	HasMore      bool                      `json:"hasMore"`
	Total        int                       `json:"total"`
}

func accountHistoryOf(taskID string, h projections.LedgerHistory) accountHistory {
	return accountHistory{TaskID: taskID, Reservations: h.Reservations, Charges: h.Charges,
		NextCursor: h.NextCursor, HasMore: h.NextCursor != "", Total: h.Total}
}

// query.ledger {limit?, cursor?} → {accounts, nextCursor?, hasMore, total}; with taskId, that account's history
// {taskId, reservations, charges, nextCursor?, hasMore, total}, paged over its reservations then its charges.
//
// NB: an account whose history could not fit in a frame, whatever its entries hold (historyWithin), is read without
// it (projections.LedgerPageWithin), not copied under the engine's read lock and encoded to learn it does not fit: one
// task's metered delegations may fill most of its run, and its orchestrator's every page, one unit, cost them all.
func handleQueryLedger(cl *call) (any, error) {
	room := pageBudget(cl)
	return queryRunPage(cl, "accounts",
		func(st *projections.State, runID string, f projections.PageFilter) (projections.Page[projections.AccountInPage],
			error) {
			return st.LedgerPageWithin(runID, f, historyWithin(room))
		},
		func(a projections.AccountInPage) wireAccount {
			return wireAccount{Account: a.Account, HistoryOmitted: a.HistoryOmitted}
		},
		omission[wireAccount]{room: room, omit: func(w *wireAccount) {
			w.Reservations, w.Charges, w.HistoryOmitted = nil, nil, true
		}}, ledgerHistory)
}

// minHistoryEntry is the shortest entry of an account's history as JSON: a reservation's keys, an empty subId and
// one-digit numbers (a charge has more keys).
const minHistoryEntry = len(`{"subId":"","tokens":0,"at":0}`)

// historyWithin is the most entries of an account's history that may fit in room bytes: an account of more takes more
// than room with its history, whatever its entries hold, and is sent without it (its omission's room is room).
func historyWithin(room int) int { return room / minHistoryEntry }

// ledgerHistory pages one account's history with fitPage, as every paged query: its reservations then its
// charges are one list of entries, and a page that would not fit in a frame is read again with the limit that
// fits, so the projection computes the cursor and no entry is skipped or repeated.
func ledgerHistory(cl *call, runID, taskID string, limit int, cursor string) (any, error) {
	found := true
	pg, err := fitPage(cl, limit, func(limit int) (page[historyEntry], error) {
		h, err := readState(cl, func(st *projections.State) (projections.LedgerHistory, error) {
			h, ok, err := st.AccountHistory(runID, taskID, projections.PageFilter{Limit: limit, Cursor: cursor})
			found = ok
			return h, err
		})
		if err != nil || !found {
			return page[historyEntry]{}, err
		}
		items := make([]historyEntry, 0, len(h.Reservations)+len(h.Charges))
		for i := range h.Reservations {
			items = append(items, historyEntry{reservation: &h.Reservations[i]})
		}
		for i := range h.Charges {
			items = append(items, historyEntry{charge: &h.Charges[i]})
		}
		return page[historyEntry]{items: items, next: h.NextCursor, total: h.Total,
			around: len(historyAround) + jsonLen(taskID)}, nil
	}, same[historyEntry])
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, wire.Errorf(wire.CodeNoTask, "task %q has no ledger account", taskID)
	}
	h := projections.LedgerHistory{Reservations: []projections.Reservation{}, Charges: []projections.Charge{},
		NextCursor: pg.next, Total: pg.total}
	for _, e := range pg.items {
		if e.reservation != nil {
			h.Reservations = append(h.Reservations, *e.reservation)
		} else {
			h.Charges = append(h.Charges, *e.charge)
		}
	}
	return accountHistoryOf(taskID, h), nil
}

// historyAround is what an account's history answer holds besides what pageEnvelope counts and its task's id:
// the task id's key, and two lists where a paged answer has one (counted whole: the bytes of one key more).
const historyAround = `"taskId":,"reservations":[],"charges":[],`

// historyEntry is one entry of an account's history, a reservation or a charge, as the wire shows it.
type historyEntry struct {
	reservation *projections.Reservation
	charge      *projections.Charge
}

func (e historyEntry) MarshalJSON() ([]byte, error) {
	if e.reservation != nil {
		return json.Marshal(e.reservation)
	}
	return json.Marshal(e.charge)
}
