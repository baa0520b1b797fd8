package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// 64 goroutines submit delegate requests against one budgeted parent with 2
// slots, settling what they get admitted, while readers watch the published
// state. Never more than 2 in flight, never more reserved than granted, and
// every answer is what the log recorded for that command. The budget is an
// exact multiple of the ask, so the last admission reserves exactly what
// remains: a sufficiency check off by one (> for ≥) admits one fewer.
// Goroutines only record what they see; the test goroutine asserts.
func TestEngineConcurrentAdmissionsNeverOverAdmit(t *testing.T) {
	const submitters, maxEach, budget, ask = 64, 200, 99_000, 3_000
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("R", budget)

	type answer struct {
		id  string
		sub string
		rej *RejectedError
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answers  []answer
		failures []error // what a goroutine saw go wrong, asserted below
		stop     atomic.Bool
		watched  atomic.Int64
	)
	failed := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Errorf(format, args...))
		mu.Unlock()
	}
	// Readers check the invariants on every state they can see.
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				f.eng.Read(func(s *projections.State) {
					if held := s.SlotsHeld(); held > 2 {
						failed("a reader saw %d slots held of 2", held)
					}
					if a, ok := s.Account("R", "02_exec"); ok && a.TokensSpent > a.TokensGranted {
						failed("a reader saw %d spent of a grant of %d", a.TokensSpent, a.TokensGranted)
					}
				})
				watched.Add(1)
			}
		}()
	}
	var subs sync.WaitGroup
	for g := 0; g < submitters; g++ {
		subs.Add(1)
		go func(g int) {
			defer subs.Done()
			// Each submitter goes on until the grant is spent (bounded).
			for i := 0; i < maxEach; i++ {
				id := fmt.Sprintf("req-%02d-%02d", g, i)
				r, err := f.eng.Submit(context.Background(), Request{Principal: events.WorkerPrincipal("R",
					"02_exec"), CommandID: id, Actor: worker("02_exec"),
					Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p",
						BudgetTokens: ptr(int64(ask))}})
				if err != nil {
					failed("submit %s: %w", id, err)
					return
				}
				a := answer{id: id, rej: r.Rejected}
				if r.Rejected == nil {
					var res DelegateResult
					if err := json.Unmarshal(r.Result, &res); err != nil {
						failed("result of %s: %w", id, err)
						return
					}
					a.sub = res.GrandchildTaskRef
					if _, err := f.eng.Submit(context.Background(), Request{Actor: orchestrator,
						Command: &DelegateSettle{RunID: "R", SubID: a.sub, Outcome: OutcomeOK,
							Text: "done"}}); err != nil {
						failed("settle %s: %w", a.sub, err)
						return
					}
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				if a.rej != nil && a.rej.Reason == events.ReasonBudgetInsufficient {
					return
				}
			}
		}(g)
	}
	subs.Wait()
	stop.Store(true)
	wg.Wait()
	require.Empty(t, failures)
	require.GreaterOrEqual(t, len(answers), budget/ask)
	require.Positive(t, watched.Load())

	// What the log recorded, by command id.
	type decision struct {
		sub    string
		reason string
	}
	logged := map[string]decision{}
	it := f.log.Read(1)
	for it.Next() {
		ev, err := projections.FromLog(it.Event())
		require.NoError(t, err)
		switch p := ev.Payload.(type) {
		case *events.DelegateAdmitted:
			require.NotContains(t, logged, ev.CommandID, "one decision per command")
			logged[ev.CommandID] = decision{sub: p.SubID}
		case *events.DelegateRejected:
			require.NotContains(t, logged, ev.CommandID, "one decision per command")
			logged[ev.CommandID] = decision{reason: p.Reason}
		}
	}
	require.NoError(t, it.Close())
	admitted := 0
	for _, a := range answers {
		d, ok := logged[a.id]
		require.True(t, ok, "answer %s has no decision in the log", a.id)
		if a.rej == nil {
			require.Equal(t, d.sub, a.sub)
			admitted++
		} else {
			require.Equal(t, d.reason, a.rej.Reason)
			require.Contains(t, []string{events.ReasonSlotsExhausted, events.ReasonBudgetInsufficient}, a.rej.Reason)
		}
	}
	require.Equal(t, budget/ask, admitted, "admits until the grant is spent, and no further")
	f.eng.Read(func(s *projections.State) {
		a, _ := s.Account("R", "02_exec")
		require.EqualValues(t, admitted*ask, a.TokensSpent)
		require.EqualValues(t, budget, a.TokensSpent, "the grant is spent to the last token")
		require.Zero(t, s.SlotsHeld())
	})
}
