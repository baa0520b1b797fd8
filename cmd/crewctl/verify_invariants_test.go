package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// endedAgain writes the scenario store with two hand-made events appended that break an invariant each, at two
// positions: another terminal event for each of two delegations the scenario already ended (one terminal event per
// ended delegation). The records are whole: only the fold finds them. It returns the data directory and the two
// positions.
func endedAgain(t *testing.T) (data string, first, second uint64) {
	t.Helper()
	data = t.TempDir()
	store := filepath.Join(data, storeDir)
	audittest.Scenario(t, store)
	l, err := eventlog.Open(store, nil)
	require.NoError(t, err)
	head, _ := l.Head()
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	for _, ended := range []events.DelegateFailed{{TaskID: "01_build", SubID: "gc-00000001"},
		{TaskID: "02_explore", SubID: "gc-00000002"}} {
		require.NoError(t, w.Raw(events.Event{Stream: audittest.RunBudget, Type: events.TypeDelegateFailed, Payload: &ended}))
	}
	require.NoError(t, w.Flush())
	require.NoError(t, l.Close())
	return data, head + 1, head + 2
}

// TestVerifyNamesTheFirstBrokenInvariant: a store whose records are whole but whose fold breaks invariants is a
// problem found (exit 1, never "ok"), and of several problems verify names the first position — in its summary on
// stderr, its text and its --json — and lists every problem in log order.
func TestVerifyNamesTheFirstBrokenInvariant(t *testing.T) {
	data, first, second := endedAgain(t)

	r := crewctl(t, nil, "verify", "--data", data, "--json")
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	var out verifyOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.False(t, out.OK)
	require.True(t, out.Invariants)
	require.Nil(t, out.Corrupt)
	require.GreaterOrEqual(t, len(out.Problems), 2)
	require.Equal(t, first, out.Problems[0].Position)
	require.Equal(t, second, out.Problems[len(out.Problems)-1].Position, "the fold's end names the last position")
	require.Equal(t, first, out.FirstBad)
	summary := fmt.Sprintf("crewctl: store %s has problems (first bad position %d)\n", filepath.Join(data, storeDir), first)
	require.Equal(t, summary, r.err)

	r = crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Equal(t, summary, r.err)
	require.NotContains(t, r.out, "invariants ok")
	listing := fmt.Sprintf("INVARIANTS BROKEN: %d problem(s), first at position %d\n", len(out.Problems), first)
	for _, p := range out.Problems {
		listing += "  " + p.String() + "\n"
	}
	require.True(t, strings.HasSuffix(r.out, listing), "every problem, in log order:\n%s", r.out)
	require.Contains(t, listing, fmt.Sprintf("  position %d: %s: %s gc-00000001: ", first, audit.InvariantTerminal,
		audittest.RunBudget))
	require.Contains(t, listing, fmt.Sprintf("  position %d: %s: %s gc-00000002: ", second, audit.InvariantTerminal,
		audittest.RunBudget))
}
