package integration

import (
	"cmp"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// The models of a cluster run (jepsen_cluster_test.go) beyond jepsen_model_test.go's: a crewd answers reads from its
// own copy of the stream, which may lag the writer.

// clusterSlotModel is the slot model for a cluster over admissions and settlements only: the one writer decides them
// and a crewd acknowledges them once committed, so they are linearizable across crewds. Slot reads are answered from
// the copy of the crewd they were sent to, which may lag the writer: checkSlotReads checks them.
func clusterSlotModel(capacity int) porcupine.Model {
	m := slotModel(capacity)
	partition := m.Partition
	m.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
		parts := partition(h)
		for i, part := range parts {
			parts[i] = slices.DeleteFunc(part, func(op porcupine.Operation) bool { return op.Input.(opInput).Kind == opSlots })
		}
		return parts
	}
	return m
}

// checkSlotReads checks the slot reads of a cluster, which its slot model leaves out (clusterSlotModel). A crewd
// answers them from its own copy, which may lag the writer (docs/cluster.md: a client reads its own writes on the
// crewd it talks to, and everything committed before them), so a read may miss what other crewds acknowledged. It
// must not show more than the capacity, nor a delegation not yet admitted, nor one whose settlement its own crewd
// acknowledged before the read; and it must show every delegation its own crewd admitted before the read and
// nobody began to settle until after it. Necessary conditions of a read from a copy of a prefix of the stream, not
// linearizability: porcupine's search over reads whose intervals are widened to allow for the lag blew up.
func checkSlotReads(ops []porcupine.Operation, clientNode []int, capacity int) verdict {
	type delegation struct {
		admit, settle *porcupine.Operation
	}
	subs := map[string]*delegation{}
	get := func(sub string) *delegation {
		if subs[sub] == nil {
			subs[sub] = &delegation{}
		}
		return subs[sub]
	}
	var reads []porcupine.Operation
	for i := range ops {
		op := &ops[i]
		in, out := op.Input.(opInput), op.Output.(opOutput)
		switch {
		case in.Kind == opAdmit && out.ok():
			get(out.Sub).admit = op
		case in.Kind == opSettle && out.ok():
			get(in.Sub).settle = op
		case in.Kind == opSlots && out.ok():
			reads = append(reads, *op)
		}
	}
	// Sweep the reads by invocation: open holds, by crewd, the delegations it admitted before then.
	var admitted []*delegation
	for _, d := range subs {
		if d.admit != nil {
			admitted = append(admitted, d)
		}
	}
	slices.SortFunc(admitted, func(a, b *delegation) int { return cmp.Compare(a.admit.Return, b.admit.Return) })
	slices.SortStableFunc(reads, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	open := map[int]map[string]*delegation{}
	next := 0
	v := verdict{model: "slot reads", result: porcupine.Ok}
	flag := func(op porcupine.Operation) {
		v.result = porcupine.Illegal
		v.minimal = append(v.minimal, op)
	}
	for _, r := range reads {
		for ; next < len(admitted) && admitted[next].admit.Return < r.Call; next++ {
			d := admitted[next]
			n := clientNode[d.admit.ClientId]
			if open[n] == nil {
				open[n] = map[string]*delegation{}
			}
			open[n][d.admit.Output.(opOutput).Sub] = d
		}
		node := clientNode[r.ClientId]
		held := r.Output.(opOutput).Held
		bad := len(held) > capacity
		for _, sub := range held {
			d := subs[sub]
			switch {
			case d == nil || d.admit == nil || d.admit.Call > r.Return:
				bad = true // never admitted, or not yet
			case d.settle != nil && clientNode[d.settle.ClientId] == node && d.settle.Return < r.Call:
				bad = true // its crewd acknowledged the settlement before the read
			}
		}
		for sub, d := range open[node] {
			if d.settle != nil && d.settle.Call < r.Call {
				delete(open[node], sub) // being settled before the read: it may show either way, now and later
				continue
			}
			if (d.settle == nil || d.settle.Call > r.Return) && !slices.Contains(held, sub) {
				bad = true // admitted by its crewd before the read, not settled during it, and missing
			}
		}
		if bad {
			flag(r)
		}
	}
	return v
}

// A slot read on a crewd may miss what other crewds acknowledged, never what its own acknowledged before it; it
// never shows a delegation not admitted, nor one its crewd acknowledged settled.
func TestCheckSlotReads(t *testing.T) {
	clientNode := []int{0, 1, 0} // client 0 and 2 on crewd 0, client 1 on crewd 1
	op := func(client int, call, ret int64, in opInput, out opOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	admitOn := func(client int, sub string, call, ret int64) porcupine.Operation {
		return op(client, call, ret, opInput{Kind: opAdmit}, opOutput{Sub: sub})
	}
	settleOn := func(client int, sub string, call, ret int64) porcupine.Operation {
		return op(client, call, ret, opInput{Kind: opSettle, Sub: sub}, opOutput{})
	}
	read := func(call, ret int64, held ...string) porcupine.Operation {
		return op(2, call, ret, opInput{Kind: opSlots}, opOutput{Held: held})
	}
	for name, c := range map[string]struct {
		ops   []porcupine.Operation
		legal bool
	}{
		"stale: misses an admission another crewd acknowledged": {[]porcupine.Operation{admitOn(1, "a", 0, 10), read(20, 30)}, true},
		"misses an admission its own crewd acknowledged":        {[]porcupine.Operation{admitOn(0, "a", 0, 10), read(20, 30)}, false},
		"shows it":                               {[]porcupine.Operation{admitOn(0, "a", 0, 10), read(20, 30, "a")}, true},
		"may miss it once its settlement began":  {[]porcupine.Operation{admitOn(0, "a", 0, 10), settleOn(1, "a", 15, 40), read(20, 30)}, true},
		"shows one never admitted":               {[]porcupine.Operation{read(20, 30, "a")}, false},
		"shows one admitted after it":            {[]porcupine.Operation{read(20, 30, "a"), admitOn(1, "a", 35, 40)}, false},
		"stale: shows one another crewd settled": {[]porcupine.Operation{admitOn(1, "a", 0, 10), settleOn(1, "a", 11, 15), read(20, 30, "a")}, true},
		"shows one its own crewd settled":        {[]porcupine.Operation{admitOn(1, "a", 0, 10), settleOn(0, "a", 11, 15), read(20, 30, "a")}, false},
		"shows more than the capacity": {[]porcupine.Operation{admitOn(1, "a", 0, 10), admitOn(1, "b", 0, 10), admitOn(1, "c", 0, 10),
			read(20, 30, "a", "b", "c")}, false},
	} {
		v := checkSlotReads(c.ops, clientNode, 2)
		if c.legal {
			require.Equal(t, porcupine.Ok, v.result, name)
		} else {
			require.Equal(t, porcupine.Illegal, v.result, name)
			require.Len(t, v.minimal, 1, name)
		}
	}
}
