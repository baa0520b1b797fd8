package audit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// contendedLog writes a log of runs competing for a small slot pool: requests admitted and refused (slots
// exhausted, the run's fair share while others wait), spawns, settlements with usage, config changes and runs
// that end, in a seeded random order. It returns the log and the run ids.
func contendedLog(t *testing.T, seed uint64, steps int) (*eventlog.Log, []string) {
	t.Helper()
	l, err := eventlog.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	do := func(actor events.Actor, cmd commands.Command) commands.Decision {
		t.Helper()
		d, err := w.Do(actor, cmd)
		if rej := (*commands.RejectedError)(nil); err != nil && !errors.As(err, &rej) {
			require.NoError(t, err)
		}
		return d
	}
	cfg := projections.DefaultConfig()
	cfg.MaxSlots, cfg.SlotShare, cfg.SlotWaitSec = 3, 1, 20
	do(audittest.Admin, &commands.Configure{Config: cfg})
	rng := rand.New(rand.NewPCG(seed, 1))
	var runs []string
	tasks := map[string][]string{}
	for r := range 4 {
		run := fmt.Sprintf("team_20261001090000_%016x", r)
		runs = append(runs, run)
		do(audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "contend", Cwd: "/srv", BudgetTotal: new(int64(1_000_000))})
		do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"})
		for k := range 2 {
			id := fmt.Sprintf("%02d_work", k)
			do(audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: id, Role: "explorer", Agent: "explorer", Title: "work", Cwd: "/srv", StepID: id})
			do(audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: id, To: "running"})
			tasks[run] = append(tasks[run], id)
		}
	}
	type flight struct{ run, sub string }
	var inFlight []flight
	ended := map[string]bool{}
	for i := 0; i < steps; i++ {
		switch k := rng.IntN(20); {
		case k < 10:
			run := runs[rng.IntN(len(runs))]
			if ended[run] {
				continue
			}
			task := tasks[run][rng.IntN(2)]
			d := do(audittest.Worker(task), &commands.DelegateRequest{RunID: run, TaskID: task, Prompt: "look",
				Role: audittest.Ptr("analyst"), BudgetTokens: audittest.Ptr[int64](100)})
			for _, ev := range d.Events {
				if p, ok := ev.Payload.(*events.DelegateAdmitted); ok {
					inFlight = append(inFlight, flight{run, p.SubID})
					do(audittest.Orchestrator, &commands.DelegateSpawned{RunID: run, SubID: p.SubID, PID: 1000 + i})
				}
			}
		case k < 18 && len(inFlight) > 0:
			j := rng.IntN(len(inFlight))
			f := inFlight[j]
			inFlight = append(inFlight[:j], inFlight[j+1:]...)
			do(audittest.Orchestrator, &commands.DelegateSettle{RunID: f.run, SubID: f.sub, Outcome: commands.OutcomeOK,
				Text: "done", UsageTokens: audittest.Ptr(int64(rng.IntN(200)))})
		case k == 18:
			cfg.MaxSlots, cfg.SlotShare = 2+rng.IntN(3), 1+rng.IntN(2)
			do(audittest.Admin, &commands.Configure{Config: cfg})
		case k == 19 && i > steps/2:
			run := runs[rng.IntN(len(runs))]
			holds := false
			for _, f := range inFlight {
				holds = holds || f.run == run
			}
			if !ended[run] && !holds {
				ended[run] = true
				do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "completed"})
			}
		}
	}
	return l, runs
}

// runAtView is what a run's state shows of it: its records, its questions, the slots it holds and the config in
// force.
type runAtView struct {
	View    audit.View
	Asks    []projections.Ask
	Holders []string
	Held    int
}

func viewOfRun(s *projections.State, run string) runAtView {
	v := audit.ViewOf(s, run)
	v.Slots = projections.Slots{} // daemon-wide: compared on its own below
	return runAtView{View: v, Asks: s.Asks(run), Holders: s.SlotsOf(run).SubIDs, Held: s.SlotsHeldBy(run)}
}

// TestRunAtIsTheFullRebuild: every run folded alone up to a position, from the start or on from its state at the
// position before, shows what the full rebuild (Replay from position 1, what crewctl replay --to does) shows of it
// there, at every position of a generated log.
func TestRunAtIsTheFullRebuild(t *testing.T) {
	l, runs := contendedLog(t, 7, 400)
	head, _ := l.Head()
	full := projections.New()
	continued := map[string]*projections.State{} // each run folded on from its state at the position before
	for pos := uint64(1); pos <= head; pos++ {
		res, err := audit.Replay(l, audit.ReplayOptions{To: pos, From: full})
		require.NoError(t, err)
		full = res.State
		for _, run := range runs {
			on, ok, err := projections.RunAtFrom(t.Context(), l, continued[run], run, pos)
			require.NoError(t, err)
			_, existed := full.Run(run)
			require.Equal(t, existed, ok, "run %s at %d", run, pos)
			if !ok {
				continue
			}
			require.Equal(t, viewOfRun(full, run), viewOfRun(on, run), "run %s continued to %d", run, pos)
			if pos%5 == 0 || pos == head { // from the start: O(the run) each, so at every fifth position
				one, ok, err := projections.RunAt(t.Context(), l, run, pos)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, viewOfRun(full, run), viewOfRun(one, run), "run %s at %d", run, pos)
			}
			continued[run] = on
		}
	}
}

// TestExplainAtIsTheFullExplain: every recorded decision explained from its run alone, with the daemon-wide
// inputs it recorded, is the decision a full replay --explain re-runs, whichever of its events is asked for.
func TestExplainAtIsTheFullExplain(t *testing.T) {
	l, _ := contendedLog(t, 11, 400)
	res, err := audit.Replay(l, audit.ReplayOptions{Explain: true})
	require.NoError(t, err)
	require.Zero(t, res.Drift())
	rejections := map[string]int{}
	states := &keptStates{}
	explained := map[uint64]bool{}
	for _, want := range res.Decisions {
		for pos := want.Position; pos <= want.Last; pos++ {
			got, recorded, ok, err := audit.ExplainAt(t.Context(), l, pos, states)
			require.NoError(t, err)
			require.True(t, ok, "decision at %d", pos)
			require.Equal(t, want, got, "decision at %d", pos)
			require.Equal(t, want.Command == "delegate.request", recorded)
			explained[pos] = true
		}
		if r, ok := strings.CutPrefix(want.Recorded, "rejected: "); ok {
			rejections[r]++
		}
	}
	// Every other event is not a decision.
	for pos := uint64(1); pos <= res.Head; pos++ {
		if !explained[pos] {
			_, _, ok, err := audit.ExplainAt(t.Context(), l, pos, nil)
			require.NoError(t, err)
			require.False(t, ok, "position %d", pos)
		}
	}
	// The log exercises both daemon-wide inputs: the slots held in all and the other runs waiting.
	require.Positive(t, rejections[events.ReasonSlotsExhausted], "rejections: %v", rejections)
	require.Positive(t, rejections[events.ReasonSlotShareExceeded], "rejections: %v", rejections)
}

// TestExplainAtStopsWhenItsContextEnds: an explain whose context has ended stops before its run's fold with the
// context's error and keeps none of it; with a context that goes on it explains and keeps the run's state.
func TestExplainAtStopsWhenItsContextEnds(t *testing.T) {
	l, _ := contendedLog(t, 11, 100)
	res, err := audit.Replay(l, audit.ReplayOptions{Explain: true})
	require.NoError(t, err)
	require.NotEmpty(t, res.Decisions)
	pos := res.Decisions[len(res.Decisions)-1].Position
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	states := &keptStates{}
	_, recorded, ok, err := audit.ExplainAt(ended, l, pos, states)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ok)
	require.False(t, recorded)
	require.Empty(t, states.states, "nothing kept of a fold that stopped")

	_, _, ok, err = audit.ExplainAt(t.Context(), l, pos, states)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, states.states, 1)
}

// TestPositionAtIsTheFirstLaterEvent: the time a replay --at stops at is the position before the first event
// later than it (what a replay reading the log in order finds), for times at, between and around the events'.
func TestPositionAtIsTheFirstLaterEvent(t *testing.T) {
	l, _ := contendedLog(t, 3, 100)
	times := eventTimes(t, l)
	for _, ns := range append([]int64{times[0] - 1, times[len(times)-1] + 1}, times...) {
		for _, at := range []int64{ns - 500e6, ns, ns + 500e6} {
			requireStopBeforeLater(t, l, times, at, false)
		}
	}
}

// TestPositionAtWithImportedTimes: an import records its events with their source's times, earlier than the events
// the engine wrote before them, so times do not follow positions. A time resolves all the same to the position
// before the first event later than it, in log order, and replay --at stops there; a binary search over the times
// landed on an imported event at or before the time and stopped past engine events later than it.
func TestPositionAtWithImportedTimes(t *testing.T) {
	l, err := eventlog.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	const run, imported = "team_20261001090000_0000000000000001", "team_20261001090000_0000000000000002"
	do := func(actor events.Actor, cmd commands.Command) {
		t.Helper()
		_, err := w.Do(actor, cmd)
		require.NoError(t, err)
	}
	do(audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "g", Cwd: "/srv"})
	do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"})
	source := audittest.Epoch.UnixMilli() - 3_600_000 // an hour before the engine's first event
	do(audittest.Admin, &commands.Import{Source: events.ForeignSourcePicrew, RunID: imported, Events: []commands.ImportedEvent{
		{Type: events.TypeRunCreated, TimeMs: source, Payload: &events.RunCreated{Team: "crew", Goal: "g", Cwd: "/r"}}}})
	for i := range 12 {
		do(audittest.Admin, &commands.Import{Source: events.ForeignSourcePicrew, RunID: imported, Events: []commands.ImportedEvent{
			{Type: events.TypeTaskCreated, TimeMs: source + int64(i), Payload: &events.TaskCreated{
				TaskID: fmt.Sprintf("t%02d", i), Role: "explorer", Agent: "explorer", Title: "t", Cwd: "/r"}}}})
	}
	do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "completed"})
	times := eventTimes(t, l)
	require.Less(t, times[2], times[1], "the imported events are earlier than the engine's before them")
	for _, ns := range times {
		for _, at := range []int64{ns - 1, ns, ns + 1} {
			requireStopBeforeLater(t, l, times, at, true)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	pos, read, err := audit.PositionAt(ctx, l, uint64(len(times)), time.Unix(0, times[len(times)-1]))
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, pos)
	require.Equal(t, uint64(1), read, "the events read before it looked at its context")
}

// TestPositionAtStopsAtTheHeadItIsGiven: the head a caller gives (the position its state is at) bounds the answer even
// when the log holds events after it, all at or before the time: a time after every event resolves to that head, and
// no event past it is read, where one more would show a state the caller has not folded.
func TestPositionAtStopsAtTheHeadItIsGiven(t *testing.T) {
	l, _ := contendedLog(t, 3, 20)
	end, _ := l.Head()
	require.Greater(t, end, uint64(2))
	for _, head := range []uint64{0, 1, end - 1, end} {
		pos, read, err := audit.PositionAt(t.Context(), l, head, time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))
		require.NoError(t, err)
		require.Equal(t, head, pos, "head %d", head)
		require.Equal(t, head, read, "head %d", head)
	}
}

// TestPositionAtOutsideEventTimes: a time before 1678 or after 2262 has no unix nanoseconds (event times are int64
// nanoseconds), and it wrapped around: the year 2300 stopped at 0, before every event, and 1600 at the head. The zero
// time given to Replay is before every event too, where it read as no time given and replayed the whole log.
func TestPositionAtOutsideEventTimes(t *testing.T) {
	l, _ := contendedLog(t, 3, 20)
	head, _ := l.Head()
	for _, tc := range []struct {
		at   time.Time
		want uint64
	}{
		{time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), head},
		{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), head},
		{time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), 0},
		{time.Time{}, 0}, // given, the zero time is a time like any other
	} {
		got, read, err := audit.PositionAt(t.Context(), l, head, tc.at)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "at %s", tc.at)
		require.Equal(t, min(tc.want+1, head), read, "at %s: up to the first later event, that one included", tc.at)
		res, err := audit.Replay(l, audit.ReplayOptions{At: &tc.at})
		require.NoError(t, err)
		require.Equal(t, tc.want, res.State.Position, "replay at %s", tc.at)
	}
}

// eventTimes returns the time of each event of l, in log order.
func eventTimes(t *testing.T, l *eventlog.Log) []int64 {
	t.Helper()
	head, _ := l.Head()
	var times []int64
	for pos := uint64(1); pos <= head; pos++ {
		e, err := l.Event(pos)
		require.NoError(t, err)
		times = append(times, e.Time)
	}
	return times
}

// requireStopBeforeLater requires PositionAt (and, with replay, Replay with At) to stop at time at (unix ns) before
// the first event later than it in log order, the events' times being times.
func requireStopBeforeLater(t *testing.T, l *eventlog.Log, times []int64, at int64, replay bool) {
	t.Helper()
	head := uint64(len(times))
	want := uint64(0)
	for want < head && times[want] <= at {
		want++
	}
	got, read, err := audit.PositionAt(t.Context(), l, head, time.Unix(0, at))
	require.NoError(t, err)
	require.Equal(t, want, got, "at %d", at)
	require.Equal(t, min(want+1, head), read, "at %d: up to the first later event, that one included", at)
	if replay {
		stop := time.Unix(0, at)
		res, err := audit.Replay(l, audit.ReplayOptions{At: &stop})
		require.NoError(t, err)
		require.Equal(t, want, res.State.Position, "replay at %d", at)
	}
}

// keptStates keeps every state ExplainAt folds, so each explain continues from the one before.
type keptStates struct{ states []*projections.State }

func (k *keptStates) Base(run string, to uint64) *projections.State {
	var best *projections.State
	for _, s := range k.states {
		if _, ok := s.Run(run); ok && s.Position <= to && (best == nil || s.Position > best.Position) {
			best = s
		}
	}
	return best
}

func (k *keptStates) Keep(s *projections.State) { k.states = append(k.states, s) }

func (k *keptStates) Searched(int) {}
