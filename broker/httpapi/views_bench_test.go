package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// bigRun is the run of writeBigRun: 10 workflow tasks that delegate 5,000 times in all.
const bigRun = "team_20261001090000_b16b16b16b160001"

// bigRunDelegations is how many delegations writeBigRun admits (the dashboard's goal: every view of such a run in
// ≤ 100 ms of server time).
const bigRunDelegations = 5000

// writeBigRun writes into dir, deciding every command with today's code, a run whose 10 tasks admit
// bigRunDelegations delegations (each spawned and settled with a result message, every other one charged), with
// a rejected request after every tenth; the last two stay in flight. It returns the position of a rejection
// near the end.
func writeBigRun(t testing.TB, dir string) (rejectedAt uint64) {
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	defer l.Close()
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	w.Step = 1e6
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = 64
	do := func(actor events.Actor, cmd commands.Command) commands.Decision {
		d, err := w.Buffer(actor, cmd)
		if _, rejected := err.(*commands.RejectedError); err != nil && !rejected {
			require.NoError(t, err)
		}
		if w.Buffered() >= 5000 {
			require.NoError(t, w.Flush())
		}
		return d
	}
	do(audittest.Admin, &commands.Configure{Config: cfg})
	do(audittest.Admin, &commands.RunCreate{RunID: bigRun, Team: "big", Goal: "many delegations", Cwd: "/srv/big", BudgetTotal: new(int64(1 << 40))})
	do(audittest.Orchestrator, &commands.RunTransition{RunID: bigRun, To: "running"})
	var tasks []string
	for k := 0; k < 10; k++ {
		id := fmt.Sprintf("%02d_work", k)
		tasks = append(tasks, id)
		do(audittest.Orchestrator, &commands.TaskCreate{RunID: bigRun, TaskID: id, Role: "explorer", Agent: "explorer", Title: "work", Cwd: "/srv/big", StepID: id})
		do(audittest.Orchestrator, &commands.TaskTransition{RunID: bigRun, TaskID: id, To: "running"})
		do(audittest.Orchestrator, &commands.CredentialIssue{RunID: bigRun, TaskID: id, Digest: digestOf(id)})
	}
	for i := 0; i < bigRunDelegations; i++ {
		task := tasks[i%len(tasks)]
		d := do(audittest.Worker(task), &commands.DelegateRequest{RunID: bigRun, TaskID: task, Prompt: "look around the package",
			Description: audittest.Ptr("explore"), Role: audittest.Ptr("analyst"), BudgetTokens: audittest.Ptr[int64](100)})
		require.NotEmpty(t, d.Events)
		sub := d.Events[0].Payload.(*events.DelegateRequested).SubID
		if i >= bigRunDelegations-2 {
			continue // in flight
		}
		do(audittest.Orchestrator, &commands.DelegateSpawned{RunID: bigRun, SubID: sub, PID: 1000 + i})
		do(audittest.Orchestrator, &commands.DelegateSettle{RunID: bigRun, SubID: sub, Outcome: commands.OutcomeOK,
			Text: "found it", UsageTokens: audittest.Ptr(int64(50 + 100*(i%2)))})
		if i%10 == 9 {
			do(audittest.Worker(task), &commands.DelegateRequest{RunID: bigRun, TaskID: task, Prompt: "look", Role: audittest.Ptr("reviewer")})
			rejectedAt = w.State.Position
		}
	}
	require.NoError(t, w.Flush())
	return rejectedAt
}

// bigFixture serves a new store of the big run.
func bigFixture(b testing.TB) (*fixture, uint64) {
	dir := filepath.Join(b.TempDir(), "big")
	rejectedAt := writeBigRun(b, dir)
	l, err := eventlog.Open(dir, nil)
	require.NoError(b, err)
	eng, err := commands.Open(l, commands.Options{SnapshotEvery: -1, ExpiryInterval: -1})
	require.NoError(b, err)
	srv, err := New(Options{Engine: eng, Log: l, AdminDigest: digestOf(adminToken)})
	require.NoError(b, err)
	b.Cleanup(func() { srv.Close(); eng.Close(); l.Close() })
	return &fixture{t: b, log: l, eng: eng, srv: srv}, rejectedAt
}

// serverTime serves one request in-process (no network) and returns its duration and status.
func serverTime(s *Server, path string) (time.Duration, int, int) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+adminToken)
	rec := httptest.NewRecorder()
	start := time.Now()
	s.Handler().ServeHTTP(rec, req)
	return time.Since(start), rec.Code, rec.Body.Len()
}

// bigViews are the requests the dashboard makes for the big run's views.
func bigViews(rejectedAt, head uint64) []string {
	run := "/api/v1/runs/" + bigRun
	return []string{
		"/api/v1/runs?limit=100",
		run,
		run + "/tasks?limit=1000",
		run + "/tasks?limit=1000&cursor=" + strconv.FormatUint(4010, 36), // the last page
		run + "/delegations?limit=1000",
		run + "/delegations?limit=1000&cursor=" + strconv.FormatUint(4000, 36),
		run + "/ledger",
		run + "/ledger?taskId=00_work&limit=1000",
		run + "/mailbox?taskId=00_work&limit=1000",
		run + "/asks",
		run + "/credentials",
		run + "/events",
		run + "/events?limit=1000",
		run + "/events?order=desc",
		run + fmt.Sprintf("/events?limit=1000&cursor=%d", head-1000),
		run + "/events?type=delegate.rejected&limit=1000",
		"/api/v1/slots",
		run + fmt.Sprintf("/state?at=%d", head),
		run + fmt.Sprintf("/state?at=%d", head/2),
		fmt.Sprintf("/api/v1/events/%d/explain", rejectedAt),
	}
}

// BenchmarkViewsOf5000Delegations measures the server time of every view of a run with 5,000 delegations (the
// dashboard's goal: ≤ 100 ms each). Each sub-benchmark is one view; the first state?at and explain fold the run from
// its first event, later ones continue from the kept run states. Run:
//
//	go test ./broker/httpapi -run '^$' -bench ViewsOf5000 -benchtime 10x
func BenchmarkViewsOf5000Delegations(b *testing.B) {
	f, rejectedAt := bigFixture(b)
	for _, path := range bigViews(rejectedAt, head(f)) {
		b.Run(path, func(b *testing.B) {
			var worst time.Duration
			for i := 0; i < b.N; i++ {
				d, code, n := serverTime(f.srv, path)
				require.Equal(b, http.StatusOK, code, path)
				b.SetBytes(int64(n))
				worst = max(worst, d)
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
		})
	}
}

// TestViewsOf5000DelegationsReport logs the server time of every view of the big run, cold (first request, no
// rebuilt state kept) and warm (median of 5), when CREWLOG_BENCH_VIEWS=1; it asserts nothing about time.
func TestViewsOf5000DelegationsReport(t *testing.T) {
	if os.Getenv("CREWLOG_BENCH_VIEWS") != "1" {
		t.Skip("set CREWLOG_BENCH_VIEWS=1 to measure the views of a run with 5,000 delegations")
	}
	f, rejectedAt := bigFixture(t)
	for _, path := range bigViews(rejectedAt, head(f)) {
		f.srv.states.mu.Lock()
		f.srv.states.states = nil
		f.srv.states.mu.Unlock()
		cold, code, n := serverTime(f.srv, path)
		require.Equal(t, http.StatusOK, code, path)
		var warm []time.Duration
		for i := 0; i < 5; i++ {
			d, _, _ := serverTime(f.srv, path)
			warm = append(warm, d)
		}
		sort.Slice(warm, func(i, j int) bool { return warm[i] < warm[j] })
		t.Logf("%-90s cold %8.2f ms  warm p50 %8.2f ms  %7d bytes", path, ms(cold), ms(warm[2]), n)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
