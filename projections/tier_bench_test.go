package projections_test

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// BenchmarkColdRun reads a finished run of about 1,000 events back from the
// log with an empty cache, from its view and by a re-fold: what the first
// query of a cold run costs. CREWLOG_BENCH_COLD_EVENTS sets the run's size.
//
//	go test ./projections -run '^$' -bench ColdRun
//	CREWLOG_BENCH_COLD_EVENTS=46000 go test ./projections -run '^$' -bench ColdRun -benchtime 10x
func BenchmarkColdRun(b *testing.B) {
	l, err := eventlog.Open(filepath.Join(b.TempDir(), "log"), nil)
	require.NoError(b, err)
	defer l.Close()
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	do := func(actor events.Actor, c commands.Command) {
		if _, err := w.Buffer(actor, c); err != nil {
			var rej *commands.RejectedError
			require.ErrorAs(b, err, &rej)
		}
	}
	const run = "R"
	do(audittest.Admin, &commands.RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w",
		BudgetTotal: audittest.Ptr[int64](1 << 40)})
	do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"})
	do(audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "01_work", Role: "explorer", Agent: "a",
		Title: "w", Cwd: "/w", StepID: "s"})
	do(audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "01_work", To: "running"})
	worker := audittest.Worker("01_work")
	size := uint64(1000)
	if v, err := strconv.ParseUint(os.Getenv("CREWLOG_BENCH_COLD_EVENTS"), 10, 64); err == nil && v > 0 {
		size = v
	}
	for i := 0; w.State.Position < size; i++ {
		do(worker, &commands.DelegateRequest{RunID: run, TaskID: "01_work", Prompt: "look",
			Role: audittest.Ptr("analyst"), BudgetTokens: audittest.Ptr[int64](100)})
		for _, d := range w.State.InFlight() {
			do(audittest.Orchestrator, &commands.DelegateSpawned{RunID: run, SubID: d.SubID, PID: 7})
			do(audittest.Orchestrator, &commands.DelegateSettle{RunID: run, SubID: d.SubID,
				Outcome: commands.OutcomeOK, Text: "found it", UsageTokens: audittest.Ptr[int64](150)})
		}
		do(worker, &commands.MessageSend{RunID: run, FromTask: "01_work", To: []string{commands.ToParent},
			Body: "progress"})
		do(worker, &commands.TaskUsage{RunID: run, TaskID: "01_work", Input: int64(100 * i), Turns: 1})
	}
	do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "completed"})
	require.NoError(b, w.Flush())
	s, _, err := projections.LoadTiered(l, projections.Tiering{Now: time.Now().UnixMilli(), SaveViews: true,
		Index: true})
	require.NoError(b, err)
	require.True(b, s.IsCold(run))
	_, err = s.ColdStore().SaveViews()
	require.NoError(b, err)
	for _, how := range []string{"view", "refold"} {
		b.Run(how, func(b *testing.B) {
			cpu := processCPU()
			for i := 0; i < b.N; i++ {
				store := projections.NewColdStore(l, 0)
				if how == "refold" {
					store.RefoldOnly()
				}
				s.SetColdStore(store)
				if len(s.Tasks(run)) == 0 {
					b.Fatal("the cold run was not read back")
				}
			}
			// CPU time, the garbage collector's included: what the read
			// costs on a machine other processes keep busy.
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
	b.ReportMetric(float64(w.State.Position), "events")
}

// processCPU is the CPU time this process has used so far (user and
// system, every thread).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
