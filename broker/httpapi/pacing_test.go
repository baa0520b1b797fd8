package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/projections"
)

// fakePacer records what each credential was charged and makes every credential wait delay.
type fakePacer struct {
	delay atomic.Int64 // nanoseconds
	// debt, when not zero, is the delay every charge leaves (nanoseconds): a stream's opening puts its token in debt
	// before its first read.
	debt    atomic.Int64
	mu      sync.Mutex
	charged map[string][]int
}

func newFakePacer() *fakePacer { return &fakePacer{charged: map[string][]int{}} }

// watchPacing sets the server's pacing hook, before any request (its handlers read it): the channel it returns
// holds a signal once a paced read has waited for its credential's bucket since the last one was taken.
func watchPacing(f *fixture) <-chan struct{} {
	waited := make(chan struct{}, 1)
	f.srv.pacing = func(principal) {
		select {
		case waited <- struct{}{}:
		default:
		}
	}
	return waited
}

func (p *fakePacer) HTTPDelay(string) time.Duration { return time.Duration(p.delay.Load()) }

func (p *fakePacer) HTTPCharge(key string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.charged[key] = append(p.charged[key], n)
	if d := p.debt.Load(); d != 0 {
		p.delay.Store(d)
	}
}

func (p *fakePacer) charges() map[string][]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]int{}
	for k, v := range p.charged {
		out[k] = append([]int(nil), v...)
	}
	return out
}

// A read-only token's read is charged one unit and the events of the cold run it read back, and waits while its
// credential's bucket is empty (its client gone, it is answered nothing); the admin's reads are not paced.
func TestReadOnlyReadsArePaced(t *testing.T) {
	pacer := newFakePacer()
	f := newFixtureEngine(t, Options{Pacer: pacer},
		commands.Options{SnapshotEvery: -1, ExpiryInterval: -1, Retention: -1, ColdCache: 1})
	waiting := watchPacing(f)
	cold := f.firstColdRun()
	var events int64
	f.eng.Read(func(st *projections.State) {
		r, ok, err := st.LookupRun(cold)
		require.NoError(t, err)
		require.True(t, ok)
		events = r.Usage.Events
	})
	require.Positive(t, events)
	ro := "ro:" + digestOf(roToken)

	status, _ := f.getAs("/api/v1/runs/"+cold+"/tasks", "Bearer "+roToken)
	require.Equal(t, http.StatusOK, status)
	status, _ = f.getAs("/api/v1/runs/"+cold+"/delegations", "Bearer "+roToken)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string][]int{ro: {1 + int(events), 1}}, pacer.charges(),
		"the run read back, then found in the cold runs' cache")
	f.ok("/api/v1/runs/" + cold + "/tasks")
	f.ok("/api/v1/runs")
	require.Equal(t, map[string][]int{ro: {1 + int(events), 1}}, pacer.charges(), "the admin is not paced")

	pacer.delay.Store(int64(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.web.URL+"/api/v1/runs", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+roToken)
	answered := make(chan error, 1)
	go func() {
		resp, err := f.web.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	select {
	case <-waiting:
	case err := <-answered:
		t.Fatalf("a read of an empty bucket was answered: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the read never waited for its bucket")
	}
	cancel()
	require.True(t, errors.Is(recv(t, answered, "end of the cancelled read"), context.Canceled))
	// NB: the client is told of its cancel before the server's handler sees it: the charges are read once the
	// handler has given its turn back, or a charge made as it gives up would come too late to be seen.
	awaitTurns(t, f.srv.reads, ro, 0, 0)
	require.Equal(t, map[string][]int{ro: {1 + int(events), 1}}, pacer.charges(), "a read never served costs nothing")
	f.ok("/api/v1/runs") // the admin's reads do not wait for anyone's bucket
}

// TestEventPagesArePacedByTheEventsTheyLookAt: a read-only token's page of events was charged one unit, though it
// looks at up to 20,000 events of the log (a type filter that keeps none of them answers none), where the socket
// charges each event a page returns or a subscription reads. Now a page is charged the events it looked at.
func TestEventPagesArePacedByTheEventsTheyLookAt(t *testing.T) {
	for _, order := range []string{"asc", "desc"} {
		t.Run(order, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer})
			page := requireRO(t, f, budgetRun+"/events?type=no.such&order="+order)
			require.Empty(t, page["events"])
			ro := keyReadOnlyPrefix + digestOf(roToken)
			awaitTurns(t, f.srv.reads, ro, 0, 0)
			require.Equal(t, map[string][]int{ro: {1 + runEventsUpTo(t, f, audittest.RunBudget, f.eng.Head())}},
				pacer.charges())
		})
	}
}

// TestEventPagesArePacedByTheEventsTheyRead: a read-only token's page of events was charged the events it looked at
// for its page, where it reads more of the log: a page newest first reads the chunk of at least 256 of the run's
// events that ends at its cursor before it looks at them, newest first, until the page is full, so a page of one
// event read 256 and cost 2 units, and a page oldest first reads the event after its last to learn that there is
// more, as the socket's events.since does, which charges it. A page is now charged every event it read of the log.
func TestEventPagesArePacedByTheEventsTheyRead(t *testing.T) {
	for _, tc := range []struct {
		query string
		read  func(events int) int // of the run's events at the head
	}{
		{"order=desc&limit=1", func(events int) int { return min(events, 256) }},
		{"order=asc&limit=1", func(int) int { return 2 }},
	} {
		t.Run(tc.query, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer})
			events := runEventsUpTo(t, f, audittest.RunBudget, f.eng.Head())
			require.Greater(t, events, 2, "a run of more events than the page and the one after it")
			page := requireRO(t, f, budgetRun+"/events?"+tc.query)
			require.Len(t, page["events"], 1)
			require.Equal(t, true, page["hasMore"])
			ro := keyReadOnlyPrefix + digestOf(roToken)
			awaitTurns(t, f.srv.reads, ro, 0, 0)
			require.Equal(t, map[string][]int{ro: {1 + tc.read(events)}}, pacer.charges())
		})
	}
}

// TestARunsSearchIsChargedTheBytesItSearched: a read-only token's search of the runs (q) was charged one unit however
// many runs it looked at (up to 5,000 a page, in reads of 500) and however long their fields (a goal may be 256K
// characters), each field lowercased for each run, so a search that matches nothing had crewd go through every run's
// goal for one unit. A search is now charged one more unit per 4 KiB of the runs' ids, teams, workflows and goals it
// searched, as a socket request is one more per 4 KiB of it; a page that searches nothing still costs one unit.
func TestARunsSearchIsChargedTheBytesItSearched(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		searched    bool
	}{
		{"a search that matches nothing", "?q=no-such-run", true},
		{"a search that matches nothing, a page of one run", "?q=NO-SUCH-RUN&limit=1", true},
		{"no search", "", false},
		{"a status filter", "?status=running&status=completed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer})
			for i := range 3 {
				r := f.do(audittest.Admin, &commands.RunCreate{RunID: fmt.Sprintf("long-%d", i), Team: "Long",
					Workflow: "Wide", Goal: strings.Repeat("A Goal ", 5<<10), Cwd: "/srv/long"})
				require.Nil(t, r.Rejected, "%v", r.Rejected)
			}
			fields := 0
			f.eng.Read(func(st *projections.State) {
				page, err := st.Runs(projections.RunFilter{Limit: maxSearchScan, MaxScan: maxSearchScan})
				require.NoError(t, err)
				require.Empty(t, page.NextCursor, "every run on one page")
				for _, r := range page.Runs {
					fields += len(r.RunID) + len(r.Team) + len(r.Workflow) + len(r.Goal)
				}
			})
			require.Greater(t, fields/(4<<10), 20, "the runs' fields are more than a few units")
			page := requireRO(t, f, "/api/v1/runs"+tc.query)
			if tc.searched {
				require.Empty(t, page["runs"])
				require.Equal(t, false, page["hasMore"], "every run searched")
			}
			want := 1
			if tc.searched {
				want += fields / (4 << 10)
			}
			ro := keyReadOnlyPrefix + digestOf(roToken)
			awaitTurns(t, f.srv.reads, ro, 0, 0)
			require.Equal(t, map[string][]int{ro: {want}}, pacer.charges())
		})
	}
}

// TestASearchGoesNoFurtherThanTheFirstMatchItsPageLeavesOut: a search reads up to searchChunk runs at a time
// whatever its page's limit, and went through the fields of every run it read, so a search of limit=1 whose runs
// all matched, at the end of their goals, went through 500 runs' goals (a goal may be 256K characters) for a page of
// one, and its token was charged them, where it needs them only up to the first match its page leaves out, the one
// it reads the page again up to so that its cursor names it. It now stops matching there. And that read again, up
// to the first match left out by the page's limit or by its bytes, searched (and charged) again every run before
// it, where the read before had searched them: a run's id, team, workflow and goal do not change, so each run a
// page reads again is searched, and charged, once.
func TestASearchGoesNoFurtherThanTheFirstMatchItsPageLeavesOut(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		runs, goal  int
		// searched is the runs whose fields the page went through.
		searched func(page map[string]any) int
	}{
		// The first run and the second, the first match the page leaves out.
		{"its limit", "?q=NEEDLE&limit=1&newest=true", 40, 5 << 10, func(map[string]any) int { return 2 }},
		// Every run: each matches, and the page ends before the first that would take it past maxPageBytes.
		{"its bytes", "?q=NEEDLE", 24, 30 << 10, func(page map[string]any) int {
			require.Less(t, len(page["runs"].([]any)), 24, "the page's bytes cut it short")
			return 24
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer})
			for i := range tc.runs {
				r := f.do(audittest.Admin, &commands.RunCreate{RunID: fmt.Sprintf("long-%02d", i), Team: "Long",
					Workflow: "Wide", Goal: strings.Repeat("A Goal ", tc.goal) + "Needle", Cwd: "/srv/long"})
				require.Nil(t, r.Rejected, "%v", r.Rejected)
			}
			fields := 0 // of one of those runs: every one's are as long
			f.eng.Read(func(st *projections.State) {
				page, err := st.Runs(projections.RunFilter{Limit: 1, Newest: true})
				require.NoError(t, err)
				r := page.Runs[0]
				require.Equal(t, fmt.Sprintf("long-%02d", tc.runs-1), r.RunID)
				fields = len(r.RunID) + len(r.Team) + len(r.Workflow) + len(r.Goal)
			})
			page := requireRO(t, f, "/api/v1/runs"+tc.query)
			require.Equal(t, true, page["hasMore"])
			want := 1 + tc.searched(page)*fields/(4<<10)
			ro := keyReadOnlyPrefix + digestOf(roToken)
			awaitTurns(t, f.srv.reads, ro, 0, 0)
			require.Equal(t, map[string][]int{ro: {want}}, pacer.charges(), "%d runs' fields are %d units", tc.runs,
				tc.runs*fields/(4<<10))
		})
	}
}
