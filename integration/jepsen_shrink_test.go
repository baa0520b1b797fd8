package integration

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// shrinkHistory is n reads then one settle and one contradicting read, each operation after the last.
func shrinkHistory(n int) []porcupine.Operation {
	var ops []porcupine.Operation
	at := int64(0)
	add := func(in opInput, out opOutput) {
		ops = append(ops, porcupine.Operation{Input: in, Output: out, Call: at, Return: at + 1})
		at += 2
	}
	for range n {
		add(opInput{Kind: opLedger, Run: "r"}, opOutput{})
	}
	add(opInput{Kind: opSettle, Run: "r", Sub: "gc-1"}, opOutput{})
	add(opInput{Kind: opLedger, Run: "r"}, opOutput{Spent: 7})
	return ops
}

// A check that times out proves nothing: shrink keeps the larger sub-history and says minimisation was cut short.
// A first version took a timeout for "linearizable", which it reported as a minimal witness all the same.
func TestShrinkTimeoutIsUnknown(t *testing.T) {
	ops := shrinkHistory(6)
	last := ops[len(ops)-1]
	// Illegal exactly when the contradicting read is in, but a check of anything smaller than the whole history
	// times out.
	check := func(h []porcupine.Operation) porcupine.CheckResult {
		if len(h) < len(ops) {
			return porcupine.Unknown
		}
		for _, op := range h {
			if op.Call == last.Call {
				return porcupine.Illegal
			}
		}
		return porcupine.Ok
	}
	minimal, cutShort := shrink(check, ops)
	require.True(t, cutShort, "a timeout cut the minimisation short")
	require.Len(t, minimal, len(ops), "the larger sub-history is kept")

	// Without timeouts the same history shrinks to the settle and the read, and says it is minimal.
	check = func(h []porcupine.Operation) porcupine.CheckResult {
		for _, op := range h {
			if op.Call == last.Call {
				return porcupine.Illegal
			}
		}
		return porcupine.Ok
	}
	minimal, cutShort = shrink(check, ops)
	require.False(t, cutShort)
	require.Len(t, minimal, 2)
	require.Equal(t, last.Call, minimal[1].Call)
}

// The search for a contradicting read stops at the first timeout: each costs the whole timeout, and 200 of them
// would hold the report for hours.
func TestShrinkStopsReadSearchAtTimeout(t *testing.T) {
	ops := shrinkHistory(50)
	last := ops[len(ops)-1]
	checks := 0
	check := func(h []porcupine.Operation) porcupine.CheckResult {
		checks++
		if len(h) == len(ops) {
			return porcupine.Illegal
		}
		if len(h) <= 2 { // the writes alone, or the writes and one read
			if len(h) == 2 && h[1].Call == last.Call {
				return porcupine.Unknown
			}
			return porcupine.Ok
		}
		return porcupine.Ok // every shorter prefix is fine
	}
	minimal, cutShort := shrink(check, ops)
	require.True(t, cutShort)
	require.Len(t, minimal, len(ops))
	require.Less(t, checks, 20, "the read search stopped at the timeout")
}
