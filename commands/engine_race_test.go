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
// every answer is what the log recorded for that command.
func TestEngineConcurrentAdmissionsNeverOverAdmit(t *testing.T) {
	const submitters, maxEach, budget, ask = 64, 200, 100_000, 3_000
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("R", budget)

	type answer struct {
		id  string
		sub string
		rej *RejectedError
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers []answer
		stop    atomic.Bool
		watched atomic.Int64
	)
	// Readers check the invariants on every state they can see.
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				f.eng.Read(func(s *projections.State) {
					require.LessOrEqual(t, s.SlotsHeld(), 2)
					if a, ok := s.Account("R", "02_exec"); ok {
						require.LessOrEqual(t, a.TokensSpent, a.TokensGranted)
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
				r, err := f.eng.Submit(context.Background(), Request{Principal: events.WorkerPrincipal("R", "02_exec"), CommandID: id, Actor: worker("02_exec"),
					Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p", BudgetTokens: ptr(int64(ask))}})
				require.NoError(t, err)
				a := answer{id: id, rej: r.Rejected}
				if r.Rejected == nil {
					var res DelegateResult
					require.NoError(t, json.Unmarshal(r.Result, &res))
					a.sub = res.GrandchildTaskRef
					_, err := f.eng.Submit(context.Background(), Request{Actor: orchestrator,
						Command: &DelegateSettle{RunID: "R", SubID: a.sub, Outcome: OutcomeOK, Text: "done"}})
					require.NoError(t, err)
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
		require.Zero(t, s.SlotsHeld())
	})
}
