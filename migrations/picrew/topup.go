package picrew

import (
	"fmt"
	"math"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// topUps makes each allocation top-up of todo, the writes of run runID the one-shot import appends (in order),
// record what its task lacks of the spend it carries, given what l holds and what todo's earlier writes add, as
// crewd's import.append does for a follower's (commands.Import): the files' history may have lost (compacted)
// admissions whose reservations the log holds from an earlier import, and counted again they overspent the run.
func topUps(l *eventlog.Log, runID string, todo []eventlog.Write, items [][]Item) error {
	if !hasTopUp(items) {
		return nil
	}
	spent, err := spendInLog(l, runID)
	if err != nil {
		return err
	}
	for i := range todo {
		for j, it := range items[i] {
			if r, ok := it.Payload.(*events.BudgetReserved); ok && r.SubID == events.ImportTopUpSubID {
				c := *r
				c.Tokens = max(c.Tokens-spent[c.TaskID], 0)
				b, err := events.EncodePayload(&c)
				if err != nil {
					return err
				}
				todo[i].Events[j].Payload, items[i][j].Payload = b, &c
			}
			if task, n := spendOf(items[i][j].Payload); task != "" {
				spent[task] = addSpend(spent[task], n)
			}
		}
	}
	return nil
}

func hasTopUp(items [][]Item) bool {
	for _, w := range items {
		for _, it := range w {
			if r, ok := it.Payload.(*events.BudgetReserved); ok && r.SubID == events.ImportTopUpSubID {
				return true
			}
		}
	}
	return false
}

// spendInLog is the tokensSpent of each task of run runID that l holds: the Σ of its budget.reserved and
// budget.charged, as the ledger folds them (projections).
func spendInLog(l *eventlog.Log, runID string) (map[string]int64, error) {
	spent := map[string]int64{}
	it := l.ReadStream(runID, 1)
	defer it.Close()
	for it.Next() {
		ev := it.Event()
		if ev.Type != events.TypeBudgetReserved && ev.Type != events.TypeBudgetCharged {
			continue
		}
		p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
		if err != nil {
			return nil, fmt.Errorf("picrew: run %s: %w", runID, err)
		}
		if task, n := spendOf(p); task != "" {
			spent[task] = addSpend(spent[task], n)
		}
	}
	return spent, it.Err()
}

// spendOf is what p, a budget.reserved or budget.charged payload, adds to its task's tokensSpent, and the task; ""
// for any other payload.
func spendOf(p any) (taskID string, tokens int64) {
	switch b := p.(type) {
	case *events.BudgetReserved:
		return b.TaskID, max(b.Tokens, 0)
	case *events.BudgetCharged:
		return b.TaskID, max(b.Tokens, 0)
	}
	return "", 0
}

// addSpend is spent + tokens (tokens ≥ 0), held at the largest int64 as the ledger holds it.
func addSpend(spent, tokens int64) int64 { return min(spent, math.MaxInt64-tokens) + tokens }
