package integration

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// The sequential model of what a client of crewd observes, for the linearizability check of jepsen_test.go. Two
// models, each checked by porcupine: runModel (per run: delegations, the budget ledger, task usage, a worker
// credential's revocation) partitioned per run, and slotModel (the daemon-wide slot pool) over every run's
// admissions, settlements and slot reads.

// opKind names a recorded client operation.
type opKind string

const (
	opAdmit  opKind = "delegate.request"
	opSettle opKind = "delegate.settle"
	opCancel opKind = "delegate.cancel"
	opUsage  opKind = "task.usage"
	opLedger opKind = "query.ledger"
	opSlots  opKind = "query.slots"
	opWait   opKind = "task.waitStatus"
	opSince  opKind = "events.since"
	opRevoke opKind = "credential.revoke"
	opIssue  opKind = "credential.issue"
	opPing   opKind = "ping"
)

// opInput is what a client sent.
type opInput struct {
	Kind   opKind
	Run    string
	Task   string // the worker of an admission, usage report, revocation, issue or ping
	Sub    string // settle, cancel, waitStatus
	Tokens int64  // budgetTokens of an admission, usageTokens of a settle, the usage reported
	Gen    int    // the credential generation a ping used, or an issue created
}

// opOutput is what the client was answered. Code is the wire error code ("" when answered ok).
type opOutput struct {
	Code       string
	SlotsFull  bool             // an admission refused because the pool is full
	Sub        string           // an admission's grandchildTaskRef
	Charged    int64            // a settle's chargedTokens
	BudgetUsed int64            // a usage report's budgetUsed
	Spent      int64            // a ledger read: Σ tokensSpent over the run's accounts on the page
	SpentBy    map[string]int64 // a ledger read: tokensSpent per task of the accounts on the page
	Held       []string         // a slot read: the holders, sorted
	Settled    bool             // a waitStatus: the delegation's task is completed
	Admitted   []string         // events.since: subIds admitted in the page, sorted
	Terminal   []string         // events.since: subIds settled in the page, sorted
	HasMore    bool             // events.since, query.ledger: the page is a prefix of the run's events or accounts
}

func (o opOutput) ok() bool { return o.Code == "" }

// heldDelegation is the model's view of one admitted delegation.
type heldDelegation struct {
	task     string // the worker that delegated: its account holds the reservation and the charge
	reserved int64
	charged  int64
	settled  bool
}

// runState is one run as its clients may observe it. Steps copy it; nothing mutates a state in place.
//
// NB: porcupine keeps a state for every step it takes, and a run's delegations grow with the run: a state holding
// all of them made a long history's check hold gigabytes (an hour's run outgrew the machine). The delegations known
// when an epoch of the history began (jepsen_epochs_test.go) are in base, shared by every state of that epoch; a
// step copies only the delegations its epoch changed (subs), and the aggregates the reads compare are kept as sums.
type runState struct {
	base     *runBase
	subs     map[string]heldDelegation // the delegations changed since base, by subId
	admitted int                       // delegations admitted, base included
	settled  int                       // of which settled
	spent    int64                     // Σ reservations + charges
	spentBy  map[string]int64          // Σ reservations + charges of the delegations each task made
	usage    map[string]int64          // the last usage reported per task
	gen      int                       // the revocable worker's current credential
	revoked  bool
}

// runBase is the delegations of a run when an epoch began: never changed once made.
type runBase struct{ subs map[string]heldDelegation }

func newRunState() runState {
	return runState{base: &runBase{}, subs: map[string]heldDelegation{}, spentBy: map[string]int64{},
		usage: map[string]int64{}}
}

func (s runState) clone() runState {
	c := s
	c.subs = maps.Clone(s.subs)
	c.spentBy = maps.Clone(s.spentBy)
	c.usage = maps.Clone(s.usage)
	return c
}

// sub is the delegation subId, if admitted.
func (s runState) sub(id string) (heldDelegation, bool) {
	if d, ok := s.subs[id]; ok {
		return d, true
	}
	d, ok := s.base.subs[id]
	return d, ok
}

// put records d as delegation id in s, a clone, keeping the sums.
func (s *runState) put(id string, d heldDelegation) {
	old, known := s.sub(id)
	if !known {
		s.admitted++
	}
	if d.settled && !old.settled {
		s.settled++
	}
	added := d.reserved + d.charged - old.reserved - old.charged
	s.spent += added
	s.spentBy[d.task] += added
	s.subs[id] = d
}

// frozen is s with every delegation in a new base: the initial state of the next epoch. It moves s's delegations
// into its base's map, so the states of the epoch that ended must not be stepped again.
//
// NB: copying the base instead made an hour's check copy a run's every delegation at every cut.
func (s runState) frozen() runState {
	all := s.base.subs
	if all == nil {
		all = map[string]heldDelegation{}
	}
	maps.Copy(all, s.subs)
	n := s
	n.base, n.subs = &runBase{subs: all}, map[string]heldDelegation{}
	n.spentBy, n.usage = maps.Clone(s.spentBy), maps.Clone(s.usage)
	return n
}

// key describes s for porcupine's cache and visualisation: two states of one epoch (one base) are equal if and
// only if their keys are.
func (s runState) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "spent=%d gen=%d revoked=%v admitted=%d settled=%d", s.spent, s.gen, s.revoked, s.admitted, s.settled)
	for _, k := range slices.Sorted(maps.Keys(s.subs)) {
		d := s.subs[k]
		fmt.Fprintf(&b, " %s:%s:%d:%d:%v", k, d.task, d.reserved, d.charged, d.settled)
	}
	for _, k := range slices.Sorted(maps.Keys(s.usage)) {
		fmt.Fprintf(&b, " u%s=%d", k, s.usage[k])
	}
	return b.String()
}

// diskFull is the answer to a write refused because the disk is (nearly) full: nothing was recorded, so it changes
// nothing, wherever it linearizes. A read is never refused so.
const diskFull = "disk-full"

// closing is crewd's answer to a wait cut short because its connection is closing: it says
// nothing of the task's status.
const closing = "close"

// unknownOutcome is what a write is recorded with when its outcome is unknown and cannot be learnt (a close answer
// to a write with no commandId to retry it with; Jepsen's info). Its interval never ends.
const unknownOutcome = "info"

// isWrite says whether a client operation of kind asks for a change (and so may be refused disk-full).
func isWrite(kind opKind) bool {
	switch kind {
	case opAdmit, opSettle, opCancel, opUsage, opRevoke, opIssue:
		return true
	}
	return false
}

// stepRun is the run model's sequential specification.
func stepRun(s runState, in opInput, out opOutput) (bool, runState) {
	if out.Code == unknownOutcome {
		return true, unknownRun(s, in)
	}
	if out.Code == diskFull {
		return isWrite(in.Kind), s
	}
	d, known := s.sub(in.Sub)
	switch in.Kind {
	case opAdmit:
		if !out.ok() {
			return out.Code == "policy-denied", s // refusals are the slot model's to judge
		}
		if _, dup := s.sub(out.Sub); dup || out.Sub == "" {
			return false, s
		}
		n := s.clone()
		n.put(out.Sub, heldDelegation{task: in.Task, reserved: in.Tokens})
		return true, n
	case opSettle:
		if !out.ok() {
			return out.Code == "bad-params" && known && d.settled, s
		}
		if !known || d.settled || out.Charged != max(0, in.Tokens-d.reserved) {
			return false, s
		}
		n := s.clone()
		n.put(in.Sub, heldDelegation{task: d.task, reserved: d.reserved, charged: out.Charged, settled: true})
		return true, n
	case opCancel:
		if !out.ok() {
			return out.Code == "bad-params" && known && d.settled, s
		}
		return known && !d.settled, s
	case opWait:
		if out.Code == closing {
			return true, s // crewd closed the connection under the wait: an answer that says nothing
		}
		if !known {
			return false, s
		}
		if out.ok() {
			return out.Settled == d.settled && d.settled, s
		}
		return out.Code == "wait-timeout" && !d.settled, s
	case opUsage:
		if !out.ok() {
			return false, s
		}
		n := s.clone()
		n.usage[in.Task] = in.Tokens
		var sum int64
		for _, u := range n.usage {
			sum += u
		}
		return out.BudgetUsed == sum, n
	case opLedger:
		if !out.ok() {
			return false, s
		}
		// NB: the page is cut by bytes, so a busy run's accounts span pages; each account on it must be exact,
		// and the whole run's sum only when the page holds them all.
		for task, spent := range out.SpentBy {
			if spent != s.spentBy[task] {
				return false, s
			}
		}
		return out.HasMore || out.Spent == s.spent, s
	case opSince:
		if !out.ok() || !strictlySorted(out.Admitted) || !strictlySorted(out.Terminal) {
			return false, s
		}
		// A page shows each delegation once: a prefix of the run may miss the newest, never show what is not there;
		// a whole run shows every one.
		if !out.HasMore && (len(out.Admitted) != s.admitted || len(out.Terminal) != s.settled) {
			return false, s
		}
		for _, id := range out.Admitted {
			if _, ok := s.sub(id); !ok {
				return false, s
			}
		}
		for _, id := range out.Terminal {
			if d, ok := s.sub(id); !ok || !d.settled {
				return false, s
			}
		}
		return true, s
	case opRevoke:
		if !out.ok() {
			return out.Code == "bad-params" && s.revoked, s
		}
		if s.revoked {
			return false, s
		}
		n := s.clone()
		n.revoked = true
		return true, n
	case opIssue:
		if !out.ok() {
			return false, s
		}
		n := s.clone()
		n.gen, n.revoked = in.Gen, false
		return true, n
	case opPing:
		live := in.Gen == s.gen && !s.revoked
		return out.ok() == live, s
	}
	return false, s
}

// unknownRun is the state after a write whose outcome is unknown, linearized here: it took effect if it would have
// succeeded here, else it was refused and changed nothing. Linearized after every other operation (its interval never
// ends), it is the write that did not happen. An admission is never recorded so (jepsen.do): its subId is unknown.
func unknownRun(s runState, in opInput) runState {
	d, known := s.sub(in.Sub)
	var answered opOutput
	switch in.Kind {
	case opSettle:
		if !known || d.settled {
			return s
		}
		answered.Charged = max(0, in.Tokens-d.reserved)
	case opUsage:
		answered.BudgetUsed = in.Tokens
		for task, u := range s.usage {
			if task != in.Task {
				answered.BudgetUsed += u
			}
		}
	case opRevoke:
		if s.revoked {
			return s
		}
	case opIssue:
	default: // a cancel changes nothing the model holds
		return s
	}
	ok, n := stepRun(s, in, answered)
	if !ok {
		return s
	}
	return n
}

// strictlySorted says a is sorted with no element twice.
func strictlySorted(a []string) bool {
	for i := 1; i < len(a); i++ {
		if a[i-1] >= a[i] {
			return false
		}
	}
	return true
}

// slotState is the daemon-wide slot pool: the holders, sorted.
type slotState struct {
	capacity int
	held     string // the sorted holders joined by spaces: comparable, so porcupine's == works
}

func (s slotState) list() []string {
	if s.held == "" {
		return nil
	}
	return strings.Split(s.held, " ")
}

func withHolders(s slotState, held []string) slotState {
	slices.Sort(held)
	s.held = strings.Join(held, " ")
	return s
}

// stepSlots is the slot model's sequential specification: an admission takes a slot if one is free and is
// refused only when none is (refusals are left out of the partition: see checkRefusals); a settle frees its slot;
// a read lists exactly the holders.
func stepSlots(s slotState, in opInput, out opOutput) (bool, slotState) {
	if out.Code == diskFull {
		return isWrite(in.Kind), s
	}
	held := s.list()
	if out.Code == unknownOutcome { // unknownRun's rule: a settle frees its slot if it holds one
		if i := slices.Index(held, in.Sub); in.Kind == opSettle && i >= 0 {
			return true, withHolders(s, slices.Delete(held, i, i+1))
		}
		return true, s
	}
	switch in.Kind {
	case opAdmit:
		if !out.ok() {
			return out.SlotsFull && len(held) == s.capacity, s
		}
		if len(held) >= s.capacity || slices.Contains(held, out.Sub) {
			return false, s
		}
		return true, withHolders(s, append(held, out.Sub))
	case opSettle:
		i := slices.Index(held, in.Sub)
		if !out.ok() {
			return i < 0, s
		}
		if i < 0 {
			return false, s
		}
		return true, withHolders(s, slices.Delete(held, i, i+1))
	case opSlots:
		return out.ok() && slices.Equal(out.Held, held), s
	}
	return false, s
}

// runModel checks each run's operations on their own (no operation of one run observes another's state).
func runModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			byRun := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range h {
				in := op.Input.(opInput)
				if in.Kind == opSlots {
					continue
				}
				if _, ok := byRun[in.Run]; !ok {
					order = append(order, in.Run)
				}
				byRun[in.Run] = append(byRun[in.Run], op)
			}
			var parts [][]porcupine.Operation
			for _, r := range order {
				parts = append(parts, byRun[r])
			}
			return parts
		},
		Init: func() any { return newRunState() },
		Step: func(state, input, output any) (bool, any) {
			return stepRun(state.(runState), input.(opInput), output.(opOutput))
		},
		Equal: func(a, b any) bool {
			x, y := a.(runState), b.(runState)
			return x.base == y.base && x.key() == y.key()
		},
		Hash:              func(s any) uint64 { return hashString(s.(runState).key()) },
		DescribeOperation: describeOp,
		DescribeState:     func(s any) string { return s.(runState).key() },
	}
}

// freezeRun makes a run's state at the end of an epoch the initial state of the next (jepsen_epochs_test.go).
func freezeRun(s any) any { return s.(runState).frozen() }

// freezeSlots is freezeRun for the slot pool, whose state is small: itself.
func freezeSlots(s any) any { return s }

// slotModel checks the pool over every admission, settlement and slot read of the daemon.
func slotModel(capacity int) porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			var part []porcupine.Operation
			for _, op := range h {
				switch op.Input.(opInput).Kind {
				case opAdmit:
					// NB: refused admissions change nothing and may linearize anywhere the pool was full: hundreds
					// of them overlapping make porcupine's search exponential. checkRefusals checks them instead.
					if op.Output.(opOutput).ok() {
						part = append(part, op)
					}
				case opSettle, opSlots:
					if op.Output.(opOutput).Code != diskFull { // NB: changes nothing (stepSlots), and only widens the search
						part = append(part, op)
					}
				}
			}
			return [][]porcupine.Operation{part}
		},
		Init: func() any { return slotState{capacity: capacity} },
		Step: func(state, input, output any) (bool, any) {
			return stepSlots(state.(slotState), input.(opInput), output.(opOutput))
		},
		Hash:              func(s any) uint64 { return hashString(s.(slotState).held) },
		DescribeOperation: describeOp,
		DescribeState:     func(s any) string { return fmt.Sprintf("held [%s]", s.(slotState).held) },
	}
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func describeOp(input, output any) string {
	in, out := input.(opInput), output.(opOutput)
	arg := strings.TrimSpace(fmt.Sprintf("%s %s %s", in.Run, in.Task, in.Sub))
	if in.Tokens != 0 || in.Gen != 0 {
		arg += fmt.Sprintf(" tokens=%d gen=%d", in.Tokens, in.Gen)
	}
	if !out.ok() {
		return fmt.Sprintf("%s(%s) -> %s", in.Kind, arg, out.Code)
	}
	switch in.Kind {
	case opAdmit:
		return fmt.Sprintf("%s(%s) -> %s", in.Kind, arg, out.Sub)
	case opSettle:
		return fmt.Sprintf("%s(%s) -> charged %d", in.Kind, arg, out.Charged)
	case opUsage:
		return fmt.Sprintf("%s(%s) -> budgetUsed %d", in.Kind, arg, out.BudgetUsed)
	case opLedger:
		return fmt.Sprintf("%s(%s) -> spent %d %v more=%v", in.Kind, arg, out.Spent, out.SpentBy, out.HasMore)
	case opSlots:
		return fmt.Sprintf("%s -> %v", in.Kind, out.Held)
	case opWait:
		return fmt.Sprintf("%s(%s) -> settled %v", in.Kind, arg, out.Settled)
	case opSince:
		return fmt.Sprintf("%s(%s) -> admitted %d settled %d more %v", in.Kind, arg, len(out.Admitted), len(out.Terminal), out.HasMore)
	}
	return fmt.Sprintf("%s(%s) -> ok", in.Kind, arg)
}

// checkRefusals checks every admission refused because the pool was full: at some moment of its interval the pool
// could have been full. At most the admissions invoked before the refusal returned, less the settlements that
// completed before it was invoked, held a slot during it; fewer than the capacity is a refusal decided against a
// stale (or wrong) slot count. This necessary condition flags no linearizable history; it is what remains checkable
// of refusals once they are out of porcupine's partition.
func checkRefusals(ops []porcupine.Operation, capacity int) verdict {
	var admitCalls, settleReturns []int64
	for _, op := range ops {
		in, out := op.Input.(opInput), op.Output.(opOutput)
		switch {
		case in.Kind == opAdmit && out.ok():
			admitCalls = append(admitCalls, op.Call)
		case in.Kind == opSettle && out.ok():
			settleReturns = append(settleReturns, op.Return)
		}
	}
	slices.Sort(admitCalls)
	slices.Sort(settleReturns)
	v := verdict{model: "refusals", result: porcupine.Ok}
	for _, op := range ops {
		in, out := op.Input.(opInput), op.Output.(opOutput)
		if in.Kind != opAdmit || !out.SlotsFull {
			continue
		}
		admitted, _ := slices.BinarySearch(admitCalls, op.Return+1) // Call <= Return
		settled, _ := slices.BinarySearch(settleReturns, op.Call)   // Return < Call
		if admitted-settled < capacity {
			v.result = porcupine.Illegal
			v.minimal = append(v.minimal, op)
		}
	}
	return v
}

// runWith is a run state holding subs.
func runWith(subs map[string]heldDelegation) runState {
	s := newRunState()
	for _, id := range slices.Sorted(maps.Keys(subs)) {
		s.put(id, subs[id])
	}
	return s
}

// A wait answered close (crewd closing its connection) linearizes anywhere, like a read that says
// nothing: a 10-minute run's only violation of the runs model was such an answer.
func TestRunModelWaitAnsweredClose(t *testing.T) {
	s := runWith(map[string]heldDelegation{"gc-1": {reserved: 5}})
	ok, next := stepRun(s, opInput{Kind: opWait, Sub: "gc-1"}, opOutput{Code: closing})
	require.True(t, ok)
	require.Equal(t, s.key(), next.key())
	ok, _ = stepRun(s, opInput{Kind: opWait, Sub: "gc-1"}, opOutput{Code: "internal"})
	require.False(t, ok, "any other refusal of a wait is still a violation")
}

// TestRunModelLedgerPage: a busy run's accounts span pages (a page is cut by bytes), so a ledger read checks every
// account it shows, and the run's sum only when it shows them all.
func TestRunModelLedgerPage(t *testing.T) {
	s := runWith(map[string]heldDelegation{
		"gc-1": {task: "w0", reserved: 5},
		"gc-2": {task: "w1", reserved: 7, charged: 3, settled: true},
	})
	read := func(more bool, by map[string]int64) bool {
		var sum int64
		for _, n := range by {
			sum += n
		}
		ok, _ := stepRun(s, opInput{Kind: opLedger}, opOutput{Spent: sum, SpentBy: by, HasMore: more})
		return ok
	}
	require.True(t, read(false, map[string]int64{"w0": 5, "w1": 10}))
	require.True(t, read(true, map[string]int64{"w0": 5}), "the first page of two")
	require.False(t, read(true, map[string]int64{"w0": 6}), "an account on the page that never was")
	require.False(t, read(true, map[string]int64{"w1": 7}), "a charge missing from its account")
	require.False(t, read(false, map[string]int64{"w0": 5}), "a last page that leaves an account out")
}

// A write of unknown outcome may have happened or not: either is linearizable, and a later read decides.
func TestModelsUnknownWrite(t *testing.T) {
	s := runWith(map[string]heldDelegation{"gc-1": {reserved: 5}})
	settle := porcupine.Operation{ClientId: 0, Input: opInput{Kind: opSettle, Run: "r", Sub: "gc-1", Tokens: 9},
		Output: opOutput{Code: unknownOutcome}, Call: 10, Return: math.MaxInt64}
	wait := func(settled bool) porcupine.Operation {
		return porcupine.Operation{ClientId: 1, Input: opInput{Kind: opWait, Run: "r", Sub: "gc-1"},
			Output: opOutput{Settled: settled, Code: map[bool]string{false: "wait-timeout"}[settled]}, Call: 20, Return: 30}
	}
	model := runModel()
	model.Init = func() any { return s.clone() }
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(model, []porcupine.Operation{settle, wait(true)}, time.Minute))
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(model, []porcupine.Operation{settle, wait(false)}, time.Minute))
	ok, next := stepRun(s, settle.Input.(opInput), settle.Output.(opOutput))
	require.True(t, ok)
	require.Equal(t, int64(9), next.spent, "taken as happened, it charged the usage above the reservation")
	// Once settled, the unknown settle changes nothing: a second settle would have been refused.
	ok, again := stepRun(next, settle.Input.(opInput), settle.Output.(opOutput))
	require.True(t, ok)
	require.Equal(t, next.key(), again.key())

	slots := slotState{capacity: 2, held: "gc-1"}
	ok, freed := stepSlots(slots, settle.Input.(opInput), settle.Output.(opOutput))
	require.True(t, ok)
	require.Empty(t, freed.held)
}

// TestHistoryClipsLongAnswers: an operation keeps a long answer's first bytes only, as valid JSON, with no
// reference to the answer's buffer.
func TestHistoryClipsLongAnswers(t *testing.T) {
	h := newHistory()
	long := json.RawMessage(`{"accounts":[` + strings.Repeat(`{"taskId":"w1","tokensSpent":1},`, 100) + `{}]}`)
	h.record(0, opInput{Kind: opLedger}, 0, opOutput{}, opMeta{Raw: long})
	h.record(0, opInput{Kind: opLedger}, 0, opOutput{}, opMeta{Raw: json.RawMessage(`{"accounts":[]}`)})
	kept := h.ops[0].Metadata.(opMeta).Raw
	require.Less(t, len(kept), 2*maxRawKept+64, "at most every byte escaped")
	require.True(t, json.Valid(kept))
	require.Contains(t, string(kept), fmt.Sprintf("(%d bytes)", len(long)))
	require.JSONEq(t, `{"accounts":[]}`, string(h.ops[1].Metadata.(opMeta).Raw))
}
