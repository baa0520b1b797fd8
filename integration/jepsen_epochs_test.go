package integration

import (
	"cmp"
	"context"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// Epochs: how a long history is checked in bounded memory.
//
// porcupine keeps, for every step of its search, the set of operations linearized so far (a bitset as long as the
// partition) and the model's state: an hour's partition of hundreds of thousands of operations, each step keeping a
// bitset of tens of kilobytes and a state holding every delegation of the run, outgrew the machine's 24 GiB. So the
// run pauses its clients now and then: at a cut, no operation is in flight (every operation recorded before it
// returned, every one after it is invoked after it). Every linearization of the history then orders the operations
// before a cut before those after it, and the history is linearizable exactly when each epoch (the operations
// between two cuts) is linearizable from the state the epochs before it end in.
//
// That state is one state, whatever the linearization, because every operation of an epoch has its answer: the
// models' writes that take effect commute (admissions of distinct delegations, settlements of their own delegation),
// or are made one at a time (a run's usage reports, revocations and issues come from its orchestrator alone: checked
// by ordered, and a history where they overlap is not checked by epochs), and reads and refusals change nothing. So the end state is found by applying the epoch's writes in the order of their answers (a valid order:
// a client learns a delegation from its admission's answer before it settles it), or, should that order not be a
// valid one, in the linearization porcupine found. A write whose outcome stayed unknown never ends: it straddles
// every later cut, so those cuts are not used, and its epoch lasts to the end of the history.

// epochs pauses a run's clients at its cuts.
type epochs struct {
	mu       sync.Mutex
	changed  *sync.Cond // signalled when inFlight falls to 0 and when a cut ends
	inFlight int        // operations entered and not left
	held     int        // operations waiting to enter while a cut is made
	cutting  bool       // a cut waits for the operations in flight: none may enter
	cuts     []int64    // the history's clock at each cut
	given    int        // cuts given up: an operation stayed in flight too long
}

// enter marks an operation in flight until the returned func is called; it waits while a cut is being made.
func (e *epochs) enter() func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	for e.cutting {
		e.held++
		e.changed.Wait()
		e.held--
	}
	e.inFlight++
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.inFlight--; e.inFlight == 0 {
			e.changed.Broadcast()
		}
	}
}

func (e *epochs) init() {
	if e.changed == nil {
		e.changed = sync.NewCond(&e.mu)
	}
}

// cut stops operations from entering, waits up to patience for those in flight to leave, and if they did, records
// a cut. Then operations enter again.
//
// NB: the patience bounds how long a fault that holds one operation up (a full disk, a restart) holds up every
// client: such a cut is given up, and its epoch lasts until the next.
func (e *epochs) cut(now func() int64, patience time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	e.cutting = true
	expired := false
	timer := time.AfterFunc(patience, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		expired = true
		e.changed.Broadcast()
	})
	defer timer.Stop()
	for e.inFlight > 0 && !expired {
		e.changed.Wait()
	}
	if e.inFlight == 0 {
		e.cuts = append(e.cuts, now())
	} else {
		e.given++
	}
	e.cutting = false
	e.changed.Broadcast()
}

// cutEvery tries a cut every d (never, when d is 0) until stop is closed or ctx is done.
func (e *epochs) cutEvery(ctx context.Context, d time.Duration, now func() int64, stop <-chan struct{}) {
	if d <= 0 {
		return
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
		e.cut(now, d/4)
	}
}

// made is the cuts made so far, and how many were given up.
func (e *epochs) made() (cuts []int64, given int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.cuts), e.given
}

// splitAt splits ops into the epochs between cuts, leaving out every cut an operation straddles.
func splitAt(ops []porcupine.Operation, cuts []int64) [][]porcupine.Operation {
	byCall := slices.Clone(ops)
	slices.SortStableFunc(byCall, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var (
		parts   [][]porcupine.Operation
		cur     []porcupine.Operation
		reach   int64 // the latest return of the operations in cur
		nextCut = 0
	)
	for _, op := range byCall {
		// The cuts before op's invocation that no operation of cur straddles end cur.
		for nextCut < len(cuts) && cuts[nextCut] < op.Call {
			if len(cur) > 0 && reach < cuts[nextCut] {
				parts = append(parts, cur)
				cur = nil
			}
			nextCut++
		}
		if len(cur) == 0 {
			reach = op.Return
		}
		cur = append(cur, op)
		reach = max(reach, op.Return)
	}
	if len(cur) > 0 {
		parts = append(parts, cur)
	}
	return parts
}

// endState is the state the epoch ops ends in, from init: its writes applied in the order of their answers, or in
// the linearization porcupine finds when that order is not a valid one. ok is false when neither gives one (the
// epoch is not linearizable, or porcupine timed out).
func endState(model porcupine.Model, init any, ops []porcupine.Operation, timeout time.Duration) (state any, ok bool) {
	apply := func(order []porcupine.Operation) (any, bool) {
		s := init
		for _, op := range order {
			legal, next := model.Step(s, op.Input, op.Output)
			if !legal {
				if isWrite(op.Input.(opInput).Kind) {
					return nil, false
				}
				continue // a read that saw an earlier state changes nothing
			}
			s = next
		}
		return s, true
	}
	if !ordered(ops) {
		return nil, false
	}
	byReturn := slices.Clone(ops)
	sortByReturn(byReturn)
	if s, ok := apply(byReturn); ok {
		return s, true
	}
	m := model
	m.Partition, m.PartitionEvent = nil, nil
	m.Init = func() any { return init }
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	if res != porcupine.Ok {
		return nil, false
	}
	lin := info.PartialLinearizations()[0][0]
	order := make([]porcupine.Operation, len(lin))
	for i, id := range lin {
		order[i] = ops[id]
	}
	return apply(order)
}

// ordered says the writes of ops whose order changes the end state (a task's usage reports; a run's revocations
// and issues) do not overlap: each was answered before the next was sent.
func ordered(ops []porcupine.Operation) bool {
	last := map[string]int64{} // the latest return of such a write, by what it changes
	byCall := slices.Clone(ops)
	slices.SortStableFunc(byCall, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	for _, op := range byCall {
		in := op.Input.(opInput)
		var what string
		switch in.Kind {
		case opUsage:
			what = "usage " + in.Run + " " + in.Task
		case opRevoke, opIssue:
			what = "credential " + in.Run
		default:
			continue
		}
		if ret, seen := last[what]; seen && ret >= op.Call {
			return false
		}
		last[what] = max(last[what], op.Return)
	}
	return true
}

// epochOp is an operation of client on [call, ret].
func epochOp(client int, call, ret int64, in opInput, out opOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

// TestSplitAt: a history is cut only where no operation is in flight; a write of unknown outcome is in flight to
// the end.
func TestSplitAt(t *testing.T) {
	a := epochOp(0, 0, 10, opInput{Kind: opLedger}, opOutput{})
	b := epochOp(1, 5, 30, opInput{Kind: opLedger}, opOutput{}) // straddles the cut at 20
	c := epochOp(0, 40, 50, opInput{Kind: opLedger}, opOutput{})
	d := epochOp(1, 60, math.MaxInt64, opInput{Kind: opUsage}, opOutput{Code: unknownOutcome})
	e := epochOp(0, 80, 90, opInput{Kind: opLedger}, opOutput{})
	parts := splitAt([]porcupine.Operation{e, d, c, b, a}, []int64{20, 35, 55, 70, 100})
	calls := func(part []porcupine.Operation) (c []int64) {
		for _, op := range part {
			c = append(c, op.Call)
		}
		return c
	}
	require.Len(t, parts, 3)
	require.Equal(t, []int64{0, 5}, calls(parts[0]), "the cut at 20 is straddled")
	require.Equal(t, []int64{40}, calls(parts[1]))
	require.Equal(t, []int64{60, 80}, calls(parts[2]), "the unknown write holds every later cut")
}

// TestEpochsCarryTheState: a history checked epoch by epoch finds what the whole check finds, including a read
// that contradicts a write of an earlier epoch — which only the state carried across the cut shows.
func TestEpochsCarryTheState(t *testing.T) {
	admit := epochOp(0, 0, 10, opInput{Kind: opAdmit, Run: "r", Task: "w0", Tokens: 5}, opOutput{Sub: "gc-1"})
	admit2 := epochOp(1, 2, 12, opInput{Kind: opAdmit, Run: "r", Task: "w1", Tokens: 7}, opOutput{Sub: "gc-2"})
	settle := epochOp(2, 25, 35, opInput{Kind: opSettle, Run: "r", Sub: "gc-1", Tokens: 9}, opOutput{Charged: 4})
	since := func(admitted ...string) porcupine.Operation {
		return epochOp(1, 50, 60, opInput{Kind: opSince, Run: "r"}, opOutput{Admitted: admitted, Terminal: []string{"gc-1"}})
	}
	ledger := func(w0 int64) porcupine.Operation {
		return epochOp(0, 52, 58, opInput{Kind: opLedger, Run: "r"}, opOutput{Spent: w0 + 7, SpentBy: map[string]int64{"w0": w0, "w1": 7}})
	}
	cuts := []int64{20, 40}
	check := func(ops ...porcupine.Operation) (whole, split porcupine.CheckResult) {
		whole = checkHistory("runs", runModel(), freezeRun, ops, nil, time.Minute, t.TempDir()).result
		split = checkHistory("runs", runModel(), freezeRun, ops, cuts, time.Minute, t.TempDir()).result
		return whole, split
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"every read right", []porcupine.Operation{admit, admit2, settle, since("gc-1", "gc-2"), ledger(9)}, porcupine.Ok},
		{"a read missing an admission of the first epoch", []porcupine.Operation{admit, admit2, settle, since("gc-1"), ledger(9)}, porcupine.Illegal},
		{"a read missing a charge of the second epoch", []porcupine.Operation{admit, admit2, settle, since("gc-1", "gc-2"), ledger(5)}, porcupine.Illegal},
		{"a read showing a delegation twice", []porcupine.Operation{admit, admit2, settle, since("gc-1", "gc-1"), ledger(9)}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole, split := check(tc.ops...)
			require.Equal(t, tc.want, whole)
			require.Equal(t, tc.want, split)
		})
	}
	require.Len(t, splitAt([]porcupine.Operation{admit, admit2, settle, since("gc-1"), ledger(9)}, cuts), 3)
}

// TestEndStateUsesALinearization: when the writes in the order of their answers are not a valid order, the end
// state is the one of porcupine's linearization; and writes whose order decides the end state may not overlap.
func TestEndStateUsesALinearization(t *testing.T) {
	model := runModel()
	init := newRunState()
	// u2 took effect before u1 although it was answered after it: the run's usage ends at u1's 10.
	u1 := epochOp(0, 0, 40, opInput{Kind: opUsage, Run: "r", Task: "w0", Tokens: 10}, opOutput{BudgetUsed: 10})
	read := epochOp(1, 41, 42, opInput{Kind: opLedger, Run: "r"}, opOutput{})
	admit := epochOp(1, 45, 50, opInput{Kind: opAdmit, Run: "r", Task: "w0", Tokens: 5}, opOutput{Sub: "gc-1"})
	s, ok := endState(model, init, []porcupine.Operation{u1, read, admit}, time.Minute)
	require.True(t, ok)
	require.Equal(t, int64(10), s.(runState).usage["w0"])
	require.Equal(t, int64(5), s.(runState).spent)

	// A settle answered before the admission it settles (no client could send it so, but a history may show it):
	// the order of the answers fails, and porcupine's linearization is used.
	admit2 := epochOp(1, 60, 100, opInput{Kind: opAdmit, Run: "r", Task: "w1", Tokens: 3}, opOutput{Sub: "gc-2"})
	settle2 := epochOp(2, 70, 80, opInput{Kind: opSettle, Run: "r", Sub: "gc-2", Tokens: 4}, opOutput{Charged: 1})
	s, ok = endState(model, init, []porcupine.Operation{admit2, settle2}, time.Minute)
	require.True(t, ok)
	require.Equal(t, int64(4), s.(runState).spent)

	u2 := epochOp(2, 5, 30, opInput{Kind: opUsage, Run: "r", Task: "w0", Tokens: 20}, opOutput{BudgetUsed: 20})
	_, ok = endState(model, init, []porcupine.Operation{u1, u2}, time.Minute)
	require.False(t, ok, "two usage reports of one task in flight at once: the end state depends on their order")
}

// TestEpochsCut: a cut waits for the operations in flight and holds new ones back; one that an operation outlasts
// is given up. The order is read from the clock each step takes, not from how long anything took.
func TestEpochsCut(t *testing.T) {
	var e epochs
	var clock atomic.Int64
	now := func() int64 { return clock.Add(1) }
	leave := e.enter()
	cut := make(chan struct{})
	go func() { defer close(cut); e.cut(now, time.Minute) }()
	for { // NB: until the cut holds new operations back
		e.mu.Lock()
		cutting := e.cutting
		e.mu.Unlock()
		if cutting {
			break
		}
		runtime.Gosched()
	}
	var entered atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer e.enter()()
		entered.Store(now())
	}()
	for { // NB: until the operation waits to enter (or, were the cut not holding it back, has entered)
		e.mu.Lock()
		held := e.held
		e.mu.Unlock()
		if held > 0 || entered.Load() != 0 {
			break
		}
		runtime.Gosched()
	}
	left := now()
	leave()
	<-cut
	<-done
	cuts, given := e.made()
	require.Len(t, cuts, 1)
	require.Zero(t, given)
	require.Greater(t, cuts[0], left, "the cut waited for the operation in flight")
	require.Greater(t, entered.Load(), cuts[0], "no operation entered while the cut waited")

	leave = e.enter()
	e.cut(now, time.Millisecond)
	leave()
	cuts, given = e.made()
	require.Len(t, cuts, 1, "an operation outlasted the patience: no cut")
	require.Equal(t, 1, given)
}
