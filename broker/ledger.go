package broker

import (
	"encoding/json"
	"fmt"

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
func handleQueryLedger(cl *call) (any, error) {
	var (
		limit          int
		cursor, taskID string
	)
	p, runID := queryParams(cl, func(p *params) {
		limit, cursor = pageParams(p)
		taskID = p.str("taskId", false, 256)
	})
	if p.err != nil {
		return nil, p.err
	}
	if taskID != "" {
		return ledgerHistory(cl, runID, taskID, limit, cursor)
	}
	budget := pageBudget(cl)
	pg, err := runPage(cl, runID, limit, cursor, (*projections.State).LedgerPage, func(a projections.Account) wireAccount {
		w := wireAccount{Account: a}
		if b, _ := json.Marshal(w); len(b)+1 > budget {
			w.Reservations, w.Charges, w.HistoryOmitted = nil, nil, true
		}
		return w
	})
	if err != nil {
		return nil, err
	}
	return pagedResult("accounts", pg), nil
}

// ledgerHistory pages one account's history, halving the page until it fits in a frame (entries are small, so
// this ends after a few reads).
func ledgerHistory(cl *call, runID, taskID string, limit int, cursor string) (any, error) {
	budget := pageBudget(cl)
	for {
		var (
			h   projections.LedgerHistory
			ok  bool
			err error
		)
		cl.c.s.eng.Read(func(st *projections.State) {
			h, ok, err = st.AccountHistory(runID, taskID, projections.PageFilter{Limit: limit, Cursor: cursor})
		})
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, wire.Errorf(wire.CodeNoTask, "task %q has no ledger account", taskID)
		}
		res := accountHistoryOf(taskID, h)
		b, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		if len(b)+1 <= budget {
			return res, nil
		}
		if limit <= 1 {
			return nil, fmt.Errorf("%w: %s", errTooLarge, cl.method)
		}
		limit /= 2
	}
}
