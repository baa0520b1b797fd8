package picrew

import (
	"fmt"

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
			if r := events.TopUpOf(it.Payload); r != nil {
				c := *r
				c.Tokens = events.TopUpTokens(c.Tokens, spent[c.TaskID])
				b, err := events.EncodePayload(&c)
				if err != nil {
					return err
				}
				todo[i].Events[j].Payload, items[i][j].Payload = b, &c
			}
			if task, n, ok := events.SpendOf(items[i][j].Payload); ok {
				spent[task] = events.AddSpend(spent[task], n)
			}
		}
	}
	return nil
}

func hasTopUp(items [][]Item) bool {
	for _, w := range items {
		for _, it := range w {
			if events.TopUpOf(it.Payload) != nil {
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
		if task, n, ok := events.SpendOf(p); ok {
			spent[task] = events.AddSpend(spent[task], n)
		}
	}
	return spent, it.Err()
}
