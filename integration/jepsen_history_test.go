package integration

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// history records every client operation of a jepsen run: its invocation and completion times (nanoseconds of the
// monotonic clock since the run began, so wall-clock steps cannot reorder them), what was sent and what was
// answered. An operation whose answer was lost (a kill, a cut connection) is retried with the same commandId, so
// its completion is the answer of the last attempt and its interval spans every attempt; attempts counts them.
type history struct {
	began   time.Time
	mu      sync.Mutex
	ops     []porcupine.Operation
	infos   int // answers lost and recovered by a retry
	unknown int // writes whose outcome stayed unknown (recordUnknown)
	// wrote is closed and replaced whenever a write is answered ok: readers that only poll wait for it, so that
	// while writes are held up (a fault) they do not fill the history with reads of one state.
	wrote chan struct{}
}

// opMeta is an operation's record beyond what the model reads.
type opMeta struct {
	Client   int
	Attempts int // 1 unless an answer was lost
	Params   map[string]any
	Raw      json.RawMessage
}

// maxRawKept bounds the answer an operation keeps for the report. The models read opOutput, not the answer; a
// ledger page or an events page is up to a frame of bytes, and a 64-client run of an hour kept every one of them
// until the history held the machine's 24 GiB.
const maxRawKept = 512

// clipRaw returns raw when it is short, else its first maxRawKept bytes as a JSON string (a cut JSON value is not
// one), copied so that the answer's buffer is not kept.
func clipRaw(raw json.RawMessage) json.RawMessage {
	if len(raw) <= maxRawKept {
		return raw
	}
	b, _ := json.Marshal(fmt.Sprintf("%s… (%d bytes)", raw[:maxRawKept], len(raw)))
	return b
}

func newHistory() *history { return &history{began: time.Now(), wrote: make(chan struct{})} }

func (h *history) now() int64 { return int64(time.Since(h.began)) }

// record adds a completed operation (ok or fail: a definite answer).
func (h *history) record(client int, in opInput, call int64, out opOutput, meta opMeta) {
	ret := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	meta.Client = client
	meta.Raw = clipRaw(meta.Raw)
	op := porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret, Metadata: meta}
	h.ops = append(h.ops, op)
	if meta.Attempts > 1 {
		h.infos++
	}
	if mutates(op) {
		close(h.wrote)
		h.wrote = make(chan struct{})
	}
}

// recordUnknown adds a write whose outcome is unknown and cannot be learnt (Jepsen's info): its interval never ends,
// so it may linearize anywhere after its invocation, after every other operation included (it did not happen).
func (h *history) recordUnknown(client int, in opInput, call int64, meta opMeta) {
	h.mu.Lock()
	defer h.mu.Unlock()
	meta.Client = client
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: opOutput{Code: unknownOutcome},
		Return: math.MaxInt64, Metadata: meta})
	h.unknown++
}

// written returns a channel closed at the next write answered ok.
func (h *history) written() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wrote
}

func (h *history) snapshot() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// verdict is the outcome of checking a history against one model.
type verdict struct {
	model  string
	result porcupine.CheckResult
	// minimal is, on a violation, a smallest sub-history found that is still not linearizable (or, when cutShort,
	// the smallest one found before a check timed out: not linearizable or unknown, never one known linearizable).
	minimal []porcupine.Operation
	// cutShort says a check timed out while shrinking: minimal may be larger than it needs to be.
	cutShort bool
	// html is the path of porcupine's visualisation of the violation.
	html string
	// largest is the most operations one check had to order (a partition's epoch): what bounds its memory.
	largest int
}

// checkHistory checks ops against model, each partition epoch by epoch (split at cuts: jepsen_epochs_test.go),
// freeze making an epoch's end state the next one's initial state. On a violation it shrinks the offending epoch
// and writes the visualisation of the shrunk sub-history to dir.
func checkHistory(name string, model porcupine.Model, freeze func(any) any, ops []porcupine.Operation, cuts []int64,
	timeout time.Duration, dir string) verdict {
	v := verdict{model: name, result: porcupine.Ok}
	parts := [][]porcupine.Operation{ops}
	if model.Partition != nil {
		parts = model.Partition(ops)
	}
	for _, part := range parts {
		state := model.Init()
		epochs := splitAt(part, cuts)
		for i, epoch := range epochs {
			v.largest = max(v.largest, len(epoch))
			m := model
			m.Partition, m.PartitionEvent = nil, nil
			init := state
			m.Init = func() any { return init }
			check := func(h []porcupine.Operation) porcupine.CheckResult {
				return porcupine.CheckOperationsTimeout(m, h, timeout)
			}
			switch check(epoch) {
			case porcupine.Illegal:
				v.result = porcupine.Illegal
				v.minimal, v.cutShort = shrink(check, epoch)
				_, info := porcupine.CheckOperationsVerbose(m, v.minimal, timeout)
				v.html = filepath.Join(dir, "crewlog-jepsen-"+name+".html")
				if err := porcupine.VisualizePath(m, info, v.html); err != nil {
					v.html = "(visualisation failed: " + err.Error() + ")"
				}
				return v
			case porcupine.Unknown:
				v.result = porcupine.Unknown
			}
			if i == len(epochs)-1 {
				break
			}
			next, ok := endState(m, init, epoch, timeout)
			if !ok {
				// NB: timed out: the epochs after it cannot be checked from a known state.
				v.result = porcupine.Unknown
				break
			}
			state = freeze(next)
		}
	}
	return v
}

// shrink finds a small sub-history of ops (which check found illegal) that is still not linearizable and is so
// for the same reason as ops: only cuts that keep a linearizable history linearizable are made, so the witness is
// never an artefact of the cut.
//   - A prefix closed under "invoked before an included operation returned": every operation left out began after
//     all the included ones ended, so it is ordered after them in any linearization. The shortest illegal one.
//   - Then operations that change nothing (reads, refusals) are left out: what remains is every write of the
//     prefix and one read that contradicts them (or the writes alone when they contradict one another).
//
// A check that times out (porcupine's Unknown) proves nothing either way: the larger sub-history is kept, the
// search for a read stops there (each timeout costs the whole timeout), and cutShort reports it.
func shrink(check func([]porcupine.Operation) porcupine.CheckResult, ops []porcupine.Operation) (minimal []porcupine.Operation, cutShort bool) {
	illegal := func(h []porcupine.Operation) bool {
		switch check(h) {
		case porcupine.Illegal:
			return true
		case porcupine.Unknown:
			cutShort = true
		}
		return false
	}
	byCall := append([]porcupine.Operation(nil), ops...)
	slices.SortStableFunc(byCall, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	// closed(n) is the shortest closed prefix holding the first n operations by invocation.
	closed := func(n int) []porcupine.Operation {
		end := int64(0)
		for i := range n {
			end = max(end, byCall[i].Return)
		}
		for n < len(byCall) && byCall[n].Call <= end {
			end = max(end, byCall[n].Return)
			n++
		}
		return byCall[:n]
	}
	// NB: a prefix whose check timed out counts as not illegal, so the search moves to larger prefixes: hi is
	// always one found illegal (or the whole).
	lo, hi := 1, len(byCall)
	for lo < hi {
		mid := (lo + hi) / 2
		if illegal(closed(mid)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	cur := closed(hi)
	var writes, reads []porcupine.Operation
	for _, op := range cur {
		if mutates(op) {
			writes = append(writes, op)
		} else {
			reads = append(reads, op)
		}
	}
	if illegal(writes) {
		return writes, cutShort
	}
	// The prefix's last operations are the likeliest contradiction: try each read alone with every write.
	const maxTries = 200 // bounds the search on a huge prefix; the prefix itself is still a witness
	for i, tries := len(reads)-1, 0; i >= 0 && tries < maxTries; i, tries = i-1, tries+1 {
		witness := append(append([]porcupine.Operation(nil), writes...), reads[i])
		switch check(witness) {
		case porcupine.Illegal:
			return witness, cutShort
		case porcupine.Unknown:
			return cur, true
		}
	}
	return cur, cutShort
}

// mutates says whether op changes the model's state: an answered write, or one whose outcome is unknown. Reads and
// refusals do not.
func mutates(op porcupine.Operation) bool {
	if op.Output.(opOutput).Code == unknownOutcome {
		return true // it may have
	}
	if !op.Output.(opOutput).ok() {
		return false
	}
	switch op.Input.(opInput).Kind {
	case opAdmit, opSettle, opUsage, opRevoke, opIssue:
		return true
	}
	return false
}

func sortByReturn(ops []porcupine.Operation) {
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
}

// describe prints a sub-history one operation a line, by invocation time: client, interval, operation.
func describe(model porcupine.Model, ops []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	slices.SortStableFunc(sorted, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var b strings.Builder
	for _, op := range sorted {
		fmt.Fprintf(&b, "  client %3d [%12s, %12s] %s\n", op.ClientId, time.Duration(op.Call), time.Duration(op.Return),
			model.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}

// writeHistory writes every operation as one JSON line (input, output, interval, metadata) for later study, then
// the cuts (jepsen_epochs_test.go) as a line of their own.
func writeHistory(path string, ops []porcupine.Operation, cuts []int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, op := range ops {
		if err := enc.Encode(map[string]any{"call": op.Call, "return": op.Return, "client": op.ClientId,
			"input": op.Input, "output": op.Output, "meta": op.Metadata}); err != nil {
			f.Close()
			return err
		}
	}
	if err := enc.Encode(map[string]any{"cuts": cuts}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readHistory reads a history writeHistory wrote, and its cuts.
func readHistory(path string) ([]porcupine.Operation, []int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var (
		ops  []porcupine.Operation
		cuts []int64
	)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, `{"cuts":`) {
			if err := json.Unmarshal([]byte(line), &struct{ Cuts *[]int64 }{&cuts}); err != nil {
				return nil, nil, err
			}
			continue
		}
		var rec struct {
			Call, Return int64
			Client       int
			Input        opInput
			Output       opOutput
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, nil, err
		}
		ops = append(ops, porcupine.Operation{ClientId: rec.Client, Input: rec.Input, Call: rec.Call, Output: rec.Output, Return: rec.Return})
	}
	return ops, cuts, nil
}
