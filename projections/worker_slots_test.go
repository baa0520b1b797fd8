package projections

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// The slots each task holds with its delegations (runState.slotsHeld), kept by admission and settlement, equal a
// recount of the delegations in flight by the task whose share each counts for, after every event of random
// histories and after a snapshot's round trip; in a history the engine could have decided, that task is the one
// the walk up from the delegation's parent finds at any time (shareHolder), not only at admission.
func TestWorkerSlotCountsEqualARecount(t *testing.T) {
	recount := func(r *runState, holderOf func(d *Delegation) string) map[string]int {
		n := make(map[string]int)
		for _, sub := range r.inFlight {
			n[holderOf(r.dels[sub])]++
		}
		return n
	}
	admitted := func(d *Delegation) string { return d.ShareHolder }
	checked := 0
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := New()
		for i, ev := range randomHistory(rng, 50+rng.IntN(300)) {
			Apply(s, ev)
			for id, r := range s.runs {
				require.Equal(t, recount(r, admitted), r.slotsHeld, "seed %d, event %d, run %s", seed, i, id)
				checked += len(r.inFlight)
			}
		}
		b, err := EncodeSnapshot(s)
		require.NoError(t, err)
		restored, err := DecodeSnapshot(b)
		require.NoError(t, err)
		for id, r := range restored.runs {
			require.Equal(t, recount(r, admitted), r.slotsHeld, "seed %d, run %s after a snapshot", seed, id)
			require.Equal(t, s.runs[id].slotsHeld, r.slotsHeld, "seed %d, run %s after a snapshot", seed, id)
		}
	}
	require.Positive(t, checked, "no delegation was in flight")

	s := fold(shadowTaskHistory(true))
	r := s.runs["R"]
	walked := func(d *Delegation) string { return r.shareHolder(d.ParentTaskID) }
	require.Equal(t, map[string]int{"a1": 2, "loop": 1}, r.slotsHeld, "gc-1 and gc-2 count for a1")
	require.Equal(t, recount(r, walked), r.slotsHeld)
	holder, held := s.SlotsHeldByWorker("R", "gc-2")
	require.Equal(t, "a1", holder)
	require.Equal(t, 2, held)
}

// workerSlotHistory is a run R whose workflow tasks a, b and c run, under a config of share 2 with WorkerSlotShare
// as knob says: a holds its share (gc-a1, gc-a2), b one slot (gc-b1); then the worker of a's delegation gc-a1 is
// refused (a holds its share: owed nothing), the worker of b's gc-b1 is refused (b, holding fewer, waits: the
// refusal returned), and c is refused for a slot and by a later check as well (no wait).
func workerSlotHistory(knob bool) (*history, events.Event) {
	var h history
	h.add(events.EngineStream, events.TypeEngineConfigured, &events.EngineConfigured{NestingEnabled: true,
		MaxDepth: 4, MaxSlots: 8, SlotShare: 2, SlotWaitSec: 60, WorkerSlotShare: knob})
	h.add("R", events.TypeRunCreated, &events.RunCreated{Team: "t"})
	h.add("R", events.TypeRunRunning, &events.RunRunning{})
	for _, id := range []string{"a", "b", "c"} {
		h.add("R", events.TypeTaskCreated, &events.TaskCreated{TaskID: id, Role: "executor"})
		h.add("R", events.TypeTaskStarted, &events.TaskStarted{TaskID: id})
	}
	for _, d := range [][2]string{{"a", "gc-a1"}, {"a", "gc-a2"}, {"b", "gc-b1"}} {
		h.add("R", events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: d[0], SubID: d[1], ChildDepth: 2})
	}
	h.add("R", events.TypeDelegateRejected, &events.DelegateRejected{TaskID: "gc-a1",
		Reason: events.ReasonSlotShareExceeded})
	refusedB := h.add("R", events.TypeDelegateRejected, &events.DelegateRejected{TaskID: "gc-b1",
		Reason: events.ReasonSlotsExhausted})
	h.add("R", events.TypeDelegateRejected, &events.DelegateRejected{TaskID: "c",
		Reason: events.ReasonSlotsExhausted, Policy: &events.Policy{Otherwise: events.ReasonBudgetInsufficient}})
	return &h, refusedB
}

// TestWorkerSlotWaiters: under WorkerSlotShare a task waits from the moment its worker, or the worker of a
// delegation it started, is refused a slot while it holds fewer than its share, until a delegation of its is
// admitted or it ends; WorkerSlotWaiters counts the waiting tasks other than the asker's share holder, refused at or
// after now − wait, that hold fewer than the share; a snapshot keeps the waits, and without the knob a refusal
// records none.
func TestWorkerSlotWaiters(t *testing.T) {
	const wait = 60_000
	h, refusedB := workerSlotHistory(true)
	now := refusedB.UnixMilli()
	s := fold(h.evs)
	waitsFrom := func(s *State) map[string]int64 {
		out := map[string]int64{}
		for _, task := range s.Tasks("R") {
			out[task.TaskID] = task.SlotWaitAt
		}
		return out
	}
	require.Equal(t, map[string]int64{"a": 0, "b": now, "c": 0, "gc-a1": 0, "gc-a2": 0, "gc-b1": 0}, waitsFrom(s),
		"b waits for its delegation's refused worker; a held its share; c was refused by a later check as well")

	dec, err := DecodeSnapshot(mustEncode(t, s))
	require.NoError(t, err)
	for _, tc := range []slotWaitCase{
		{"b waits", "a", now, 2, 1},
		{"asked for a shadow task's worker, by its holder", "gc-a1", now, 2, 1},
		{"a task never waits on itself", "b", now, 2, 0},
		{"at the window's last moment", "a", now + wait, 2, 1},
		{"past the window", "a", now + wait + 1, 2, 0},
		{"holding the share asked for, b is owed nothing", "a", now, 1, 0},
	} {
		require.Equal(t, tc.want, s.WorkerSlotWaiters("R", tc.asker, tc.now, wait, tc.share), tc.name)
		require.Equal(t, tc.want, dec.WorkerSlotWaiters("R", tc.asker, tc.now, wait, tc.share),
			"%s, after a snapshot", tc.name)
	}

	for name, end := range map[string]func(h *history){
		"b ends": func(h *history) {
			h.add("R", events.TypeTaskCompleted, &events.TaskCompleted{TaskID: "b"})
		},
		"a delegation of gc-b1's worker is admitted": func(h *history) {
			h.add("R", events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: "gc-b1", SubID: "gc-b1x",
				ChildDepth: 3})
		},
	} {
		h, _ := workerSlotHistory(true)
		end(h)
		s := fold(h.evs)
		require.Zero(t, s.WorkerSlotWaiters("R", "a", now, wait, 2), name)
	}

	h, _ = workerSlotHistory(false)
	s = fold(h.evs)
	require.Equal(t, map[string]int64{"a": 0, "b": 0, "c": 0, "gc-a1": 0, "gc-a2": 0, "gc-b1": 0}, waitsFrom(s),
		"without the knob a refusal records no wait")
	require.Zero(t, s.WorkerSlotWaiters("R", "a", now, wait, 2))
}
