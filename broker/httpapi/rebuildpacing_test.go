package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
)

// runEventsUpTo counts the events of run's stream at positions ≤ pos: what a fold of the run from its first event
// to pos reads of it.
func runEventsUpTo(t *testing.T, f *fixture, run string, pos uint64) int {
	t.Helper()
	it := f.log.ReadStream(run, 1)
	defer it.Close()
	n := 0
	for it.Next() && it.Event().Position <= pos {
		n++
	}
	require.NoError(t, it.Close())
	return n
}

// explainPath is the explain of the first delegation decision of the budget run.
func explainPath(t *testing.T, f *fixture) string {
	t.Helper()
	evs := f.ok(budgetRun + "/events?type=delegate.admitted&type=delegate.rejected")["events"].([]any)
	require.NotEmpty(t, evs)
	return fmt.Sprintf("/api/v1/events/%.0f/explain", evs[0].(map[string]any)["metadata"].(map[string]any)["position"])
}

// TestRebuildsArePacedByTheEventsTheyRead: a read-only token's state?at and explain were charged one unit each,
// however many events their rebuild read (only the one rebuild slot bounded them), so one token could keep the slot
// and a core busy with rebuilds back to back. Now a rebuild is charged, as a read of a cold run is, the events it
// read: the run's from the state it started from to its position, and, for a time, the log's up to it. One its
// client left was charged what it could have read (its run's at the head, the log up to the head: minutes of the
// token's pace on a large log, for a request abandoned at once); it is charged what it read before it stopped,
// which the fold and the time's read count (projections.FoldStoppedError, audit.PositionAt), so that leaving
// early saves the token only what the server did not read.
func TestRebuildsArePacedByTheEventsTheyRead(t *testing.T) {
	run := audittest.RunBudget
	for _, tc := range []struct {
		name string
		// ask makes the token's request (before it, what the admin's may keep) and returns what it should cost.
		ask func(t *testing.T, f *fixture) int
	}{
		{"state?at, from the run's first event", func(t *testing.T, f *fixture) int {
			requireRO(t, f, budgetRun+"/state?at=10")
			return 1 + runEventsUpTo(t, f, run, 10)
		}},
		{"state?at, on from a kept state", func(t *testing.T, f *fixture) int {
			f.ok(budgetRun + "/state?at=8") // the admin's, not paced: kept
			requireRO(t, f, budgetRun+"/state?at=14")
			return 1 + runEventsUpTo(t, f, run, 14) - runEventsUpTo(t, f, run, 8)
		}},
		{"state?at, a kept state", func(t *testing.T, f *fixture) int {
			f.ok(budgetRun + "/state?at=8")
			requireRO(t, f, budgetRun+"/state?at=8")
			return 1
		}},
		{"state?at a time", func(t *testing.T, f *fixture) int {
			at := audittest.Epoch.Add(8 * time.Second)
			st := requireRO(t, f, budgetRun+"/state?at="+url.QueryEscape(at.Format(time.RFC3339)))
			pos := uint64(st["position"].(float64))
			require.Less(t, pos, f.eng.Head(), "the lookup stops at a later event")
			return 1 + timeLookupReads(t, f, at) + runEventsUpTo(t, f, run, pos)
		}},
		{"state?at a time after every event", func(t *testing.T, f *fixture) int {
			at := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
			st := requireRO(t, f, budgetRun+"/state?at="+url.QueryEscape(at.Format(time.RFC3339)))
			require.Equal(t, f.eng.Head(), uint64(st["position"].(float64)))
			return 1 + timeLookupReads(t, f, at) // the published state's: no fold
		}},
		{"explain", func(t *testing.T, f *fixture) int {
			path := explainPath(t, f)
			ex := requireRO(t, f, path)
			// The decision is re-run on its run's state just before it.
			folded := uint64(ex["decision"].(map[string]any)["position"].(float64)) - 1
			return 1 + explainSearch(t, f, path, ex) + runEventsUpTo(t, f, run, folded)
		}},
		{"explain, its state kept", func(t *testing.T, f *fixture) int {
			path := explainPath(t, f)
			f.ok(path) // the admin's, not paced: kept
			return 1 + explainSearch(t, f, path, requireRO(t, f, path))
		}},
		{"state?at, its client gone", func(t *testing.T, f *fixture) int {
			leaveAsItFolds(t, f, budgetRun+"/state?at=10")
			return 1 // the fold looked at its context before it read an event of the run
		}},
		{"state?at a time, its client gone", func(t *testing.T, f *fixture) int {
			at := audittest.Epoch.Add(8 * time.Second).Format(time.RFC3339)
			leaveAsItFolds(t, f, budgetRun+"/state?at="+url.QueryEscape(at))
			return 1 + 1 // the log's first event: the read looks at its context once it holds one
		}},
		{"explain, its client gone", func(t *testing.T, f *fixture) int {
			path := explainPath(t, f)
			leaveAsItFolds(t, f, path)
			return 1 + explainSearch(t, f, path, f.ok(path)) // the search, not the fold (as state?at's)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer})
			want := tc.ask(t, f)
			ro := keyReadOnlyPrefix + digestOf(roToken)
			awaitTurns(t, f.srv.reads, ro, 0, 0) // NB: the charge is made before the turn is given back
			require.Equal(t, map[string][]int{ro: {want}}, pacer.charges())
		})
	}
}

// timeLookupReads is the events a state?at of time at reads of the log to find its position: every event up to the
// first later than at, that one included, or up to the head.
func timeLookupReads(t *testing.T, f *fixture, at time.Time) int {
	t.Helper()
	it := f.log.Read(1)
	defer it.Close()
	n := 0
	for n < int(f.eng.Head()) && it.Next() {
		n++
		if it.Event().Time > at.UnixNano() {
			break
		}
	}
	require.NoError(t, it.Close())
	return n
}

// explainSearch is the events the explain at path, answered ex, read of the log to find its decision: the event at
// its position, then its stream from audit.ExplainReach events before it (its first event, for the decisions
// explainPath names) up to the first event after the decision.
func explainSearch(t *testing.T, f *fixture, path string, ex map[string]any) int {
	t.Helper()
	pos, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(path, "/api/v1/events/"), "/explain"), 10, 64)
	require.NoError(t, err)
	rec, err := f.log.Event(pos)
	require.NoError(t, err)
	require.LessOrEqual(t, rec.StreamVersion, uint64(audit.ExplainReach), "the search starts at the run's first event")
	last := uint64(ex["decision"].(map[string]any)["last"].(float64))
	it := f.log.ReadStream(rec.Stream, 1)
	defer it.Close()
	n := 1
	for it.Next() {
		n++
		if it.Event().Position > last {
			break
		}
	}
	require.NoError(t, it.Close())
	return n
}

// requireRO requires a 200 to a GET of path with the read-only token, and returns its answer.
func requireRO(t *testing.T, f *fixture, path string) map[string]any {
	t.Helper()
	code, m := f.getAs(path, "Bearer "+roToken)
	require.Equal(t, http.StatusOK, code, "GET %s: %v", path, m)
	return m
}

// leaveAsItFolds sends a GET of path with the read-only token whose client goes once its rebuild has the slot,
// before it folds.
func leaveAsItFolds(t *testing.T, f *fixture, path string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	f.srv.states.holding = func(context.Context) { cancel() }
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	req.Host = "127.0.0.1:7717"
	req.Header.Set("Authorization", "Bearer "+roToken)
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	require.Empty(t, rec.Body.String(), "nothing answered to a client that went")
}
