package commands_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestTierMeasure measures crewd's engine on a store of finished runs. It
// runs only with CREWLOG_TIER_MEASURE set, one step per process so that
// each step's RSS is its own:
//
//	CREWLOG_TIER_MEASURE=gen  CREWLOG_TIER_DIR=d [CREWLOG_TIER_EVENTS=1000000 CREWLOG_TIER_RUNS=1000 CREWLOG_TIER_ACTIVE=10]
//	CREWLOG_TIER_MEASURE=snap CREWLOG_TIER_DIR=d   # writes a snapshot of the state at the head
//	CREWLOG_TIER_MEASURE=open CREWLOG_TIER_DIR=d   # start-up time, RSS, queries of finished runs
//
// gen writes the events through the commands' own decisions (as audittest
// does): each run has 4 tasks with credentials, then delegations (admitted,
// spawned, settled with a result message and a charge), messages, usage
// reports and a question now and then, until it holds its share of the
// events; every run but the last ACTIVE ones then completes.
func TestTierMeasure(t *testing.T) {
	mode := os.Getenv("CREWLOG_TIER_MEASURE")
	if mode == "" {
		t.Skip("set CREWLOG_TIER_MEASURE=gen|snap|open and CREWLOG_TIER_DIR")
	}
	dir := os.Getenv("CREWLOG_TIER_DIR")
	require.NotEmpty(t, dir)
	env := func(k string, def int) int {
		if v := os.Getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
		return def
	}
	store := filepath.Join(dir, "store")
	switch mode {
	case "gen":
		l, err := eventlog.Open(store, nil)
		require.NoError(t, err)
		start := time.Now()
		head := generateHistory(t, l, env("CREWLOG_TIER_EVENTS", 1_000_000), env("CREWLOG_TIER_RUNS", 1000), env("CREWLOG_TIER_ACTIVE", 10))
		require.NoError(t, l.Close())
		t.Logf("generated %d events in %s", head, time.Since(start).Round(time.Millisecond))
	case "snap":
		l, err := eventlog.Open(store, nil)
		require.NoError(t, err)
		// What the engine's snapshot holds: the state after its retention.
		s, _, err := projections.LoadTiered(l, projections.Tiering{Retention: commands.DefaultRetention, Now: time.Now().UnixMilli()})
		require.NoError(t, err)
		b, err := projections.EncodeSnapshot(s)
		require.NoError(t, err)
		require.NoError(t, l.SaveSnapshot(s.Position, b))
		require.NoError(t, l.Close())
		t.Logf("snapshot at %d: %d bytes", s.Position, len(b))
	case "open":
		start := time.Now()
		l, err := eventlog.Open(store, nil)
		require.NoError(t, err)
		e, err := commands.Open(l, commands.Options{})
		require.NoError(t, err)
		ready := time.Since(start)
		info := e.LoadInfo()
		t.Logf("ready in %s (snapshot %d, replayed %d, snapshot error %v)", ready.Round(time.Millisecond), info.SnapshotPosition, info.Replayed, info.SnapshotError)
		t.Logf("after open: %s", memory())
		time.Sleep(3 * time.Second) // the writer's idle pass makes ended runs cold
		runtime.GC()
		t.Logf("settled: %s", memory())
		var finished []string
		e.Read(func(s *projections.State) {
			p, err := s.Runs(projections.RunFilter{Statuses: []projections.RunStatus{projections.RunCompleted}, Limit: 5})
			require.NoError(t, err)
			for _, r := range p.Runs {
				finished = append(finished, r.RunID)
			}
		})
		require.NotEmpty(t, finished)
		for _, run := range finished {
			for _, round := range []string{"first", "again"} {
				q := time.Now()
				var n int
				e.Read(func(s *projections.State) {
					r, _ := s.Run(run)
					tp, _ := s.TasksPage(run, projections.PageFilter{Limit: 100})
					dp, _ := s.DelegationsPage(run, projections.PageFilter{Limit: 100})
					mp, _ := s.Mailbox(run, "01_work", projections.MailboxFilter{Limit: 100})
					lp, _ := s.LedgerPage(run, projections.PageFilter{Limit: 100})
					n = int(r.Usage.Events) + tp.Total + dp.Total + mp.Total + lp.Total
				})
				t.Logf("query %s %s (run.usage.events+totals %d): %s", run, round, n, time.Since(q).Round(10*time.Microsecond))
			}
		}
		require.NoError(t, e.Close())
		require.NoError(t, l.Close())
	}
}

// memory is the process's RSS, peak RSS and Go heap in use.
func memory() string {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, _ := os.ReadFile("/proc/self/status")
	var rss, hwm string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("RSS %s, peak RSS %s, heap in use %d MiB", rss, hwm, ms.HeapInuse>>20)
}

// generateHistory writes about n events in runs runs, of which the last
// active stay running; it returns the head.
func generateHistory(t *testing.T, l *eventlog.Log, n, runs, active int) uint64 {
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	w.Step = 100e6 // 100 ms of engine time per command: 1M events span hours
	w.State.SetColdStore(projections.NewColdStore(l, 0))
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = 64
	buffer := func(a events.Actor, cmd commands.Command) {
		if _, err := w.Buffer(a, cmd); err != nil {
			var rej *commands.RejectedError
			require.ErrorAs(t, err, &rej)
		}
	}
	buffer(audittest.Admin, &commands.Configure{Config: cfg})
	per := n / runs
	head := uint64(0)
	for r := 0; r < runs; r++ {
		run := fmt.Sprintf("team_20261001090000_%016x", r)
		start := w.State.Position
		buffer(audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "history", Cwd: "/srv/h", BudgetTotal: new(int64(1 << 40))})
		buffer(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"})
		for k := 0; k < 4; k++ {
			id := fmt.Sprintf("%02d_work", k)
			buffer(audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: id, Role: "explorer", Agent: "explorer", Title: "work", Cwd: "/srv/h", StepID: id})
			buffer(audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: id, To: "running"})
			buffer(audittest.Admin, &commands.CredentialIssue{RunID: run, TaskID: id, Digest: fmt.Sprintf("%064x", r*4+k)})
		}
		for i := 0; ; i++ {
			if int(w.State.Position-start) >= per-2 {
				break
			}
			task := fmt.Sprintf("%02d_work", i%4)
			worker := audittest.Worker(task)
			buffer(worker, &commands.DelegateRequest{RunID: run, TaskID: task, Prompt: "look around the package",
				Description: audittest.Ptr("explore"), Role: audittest.Ptr("analyst"), BudgetTokens: audittest.Ptr[int64](100)})
			var sub string
			if ds := w.State.InFlight(); len(ds) > 0 {
				sub = ds[0].SubID
			}
			if sub != "" {
				buffer(audittest.Orchestrator, &commands.DelegateSpawned{RunID: run, SubID: sub, PID: 1000 + i})
				buffer(audittest.Orchestrator, &commands.DelegateSettle{RunID: run, SubID: sub, Outcome: commands.OutcomeOK,
					Text: "found it in the package", UsageTokens: audittest.Ptr(int64(50 + 100*(i%2)))})
			}
			buffer(worker, &commands.MessageSend{RunID: run, FromTask: task, To: []string{"01_work"}, Body: "progress report " + strconv.Itoa(i)})
			buffer(worker, &commands.TaskUsage{RunID: run, TaskID: task, Input: 1000, Output: 200, Turns: 1})
			if i%25 == 24 {
				d, err := w.Buffer(worker, &commands.WaitRequest{RunID: run, TaskID: task, Question: "continue?", TimeoutSec: audittest.Ptr(60.0)})
				require.NoError(t, err)
				if res, ok := d.Result.(commands.WaitResult); ok {
					buffer(audittest.Orchestrator, &commands.WaitResolve{RunID: run, TaskID: task, QuestionID: res.QuestionID})
				}
			}
			if w.Buffered() >= 5000 {
				require.NoError(t, w.Flush())
			}
		}
		if r < runs-active {
			buffer(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "completed"})
		}
		require.NoError(t, w.Flush())
		// The generator's own state keeps only the runs still going.
		w.State.EvictAll(w.Now/1e6, 0)
		head = w.State.Position
	}
	return head
}
