package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/commands"
)

// MeasureOptions say how to measure crewd on a store WriteHistory wrote.
type MeasureOptions struct {
	Dir    string // the data directory
	Crewd  string // the crewd binary
	Runs   int    // as written: the runs' ids follow from them
	Active int
	// Starts is how many times crewd is started and stopped to time its
	// start-up (default 3).
	Starts int
	// Calls is how many times each query is timed (default 200).
	Calls int
	// Write is how many events to write over the socket after the queries,
	// so that crewd takes a snapshot while it is watched; < 0: enough to
	// reach crewd's next snapshot (commands.NextSnapshotAt); 0: none.
	Write    int
	Progress io.Writer
}

// HistoryMeasure is crewd measured on a history store.
type HistoryMeasure struct {
	Head       uint64 // events in the store when crewd first started
	SnapshotAt uint64 // its newest snapshot then (0: none)
	// HeadAfterStarts is the head once the timed starts are over: more
	// than Head when they recorded events.
	HeadAfterStarts uint64
	// Active is the active state the timed starts loaded: the newest
	// snapshot once they are over (the first start of a store just
	// written takes one), read before any query or write.
	Active     ActiveState
	StoreBytes int64
	Ready      []time.Duration // exec → first answered ping, per start
	// ReadyCPU is crewd's CPU time (user and system) once ready, per
	// start: what its start-up cost, which the load of a shared machine
	// moves far less than Ready (in /proc's ticks of 10 ms).
	ReadyCPU []time.Duration
	RSS      []int64 // VmRSS once ready, per start (bytes)
	// PeakServing is VmHWM after the last start and every query;
	// PeakWriting is VmHWM when crewd exits after the write phase, which
	// covers the snapshot it took (SnapshotAfter, when it took one).
	PeakServing, PeakWriting int64
	Wrote                    int // events written over the socket
	SnapshotAfter            uint64
	// Spread: each call of a query on the next of the sampled runs, so a
	// run was last read 200 calls before (more runs than crewd's cache of
	// read-back runs holds). Dashboard: the queries in a row on one run,
	// then the next run, as a dashboard opening a run asks them.
	Spread, Dashboard []QueryLatency
	Machine           Machine
}

// QueryLatency is one query's round trip over the socket, as the admin
// sees it, for finished runs.
type QueryLatency struct {
	Method        string
	Calls         int
	P50, P99, Max time.Duration
	// CPU is crewd's CPU time (user and system, as /proc says it) per call, over the query's calls in the spread
	// order, which come one after the other: a figure the load of a shared machine moves far less than the
	// latencies. 0 when it could not be read (and in the dashboard order, whose queries interleave).
	CPU time.Duration
}

// MeasureHistory times crewd's start-up on the store in o.Dir, reads its
// memory, reads the active state those starts loaded, times the dashboard's
// queries for finished runs, then writes into the active runs over the
// socket until crewd snapshots and reads its peak memory again. Nothing is
// written before the start-up, memory and active-state figures are taken.
func MeasureHistory(ctx context.Context, o MeasureOptions) (HistoryMeasure, error) {
	if o.Starts <= 0 {
		o.Starts = 3
	}
	if o.Calls <= 0 {
		o.Calls = 200
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	var m HistoryMeasure
	storeDir := filepath.Join(o.Dir, daemon.StoreDir)
	active := activeRuns(o.Runs, o.Active)
	head, before, err := storeHead(storeDir, active)
	if err != nil {
		return m, err
	}
	m.Head, m.SnapshotAt = head, before.SnapshotAt
	m.StoreBytes = dirBytes(storeDir)
	m.Machine = describeMachine(o.Dir)
	sockDir, err := os.MkdirTemp("", "crewbench-")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(sockDir)
	logFile := filepath.Join(o.Dir, "crewd-history.log")
	for i := range o.Starts {
		p, err := startCrewd(ctx, o.Crewd, o.Dir, sockDir, logFile)
		if err != nil {
			return m, err
		}
		mem, err := readMemory(p.cmd.Process.Pid)
		cpu := crewdCPU(p.cmd.Process.Pid)
		m.Ready, m.ReadyCPU, m.RSS = append(m.Ready, p.ready), append(m.ReadyCPU, cpu), append(m.RSS, mem.rss)
		fmt.Fprintf(progress, "history: start %d: ready in %s (CPU %s), RSS %s\n", i+1, fmtDur(p.ready), fmtDur(cpu),
			fmtBytes(mem.rss))
		if err := errors.Join(err, p.stop()); err != nil {
			return m, err
		}
	}
	// NB: read before the queries and the write phase, which adds events to
	// the active runs: this is the state the starts above were timed on.
	if m.HeadAfterStarts, m.Active, err = storeHead(storeDir, active); err != nil {
		return m, err
	}
	fmt.Fprintf(progress, "history: active state: %s\n", m.Active)
	p, err := startCrewd(ctx, o.Crewd, o.Dir, sockDir, logFile)
	if err != nil {
		return m, err
	}
	defer p.stop()
	stopWatch := p.watchMemory()
	sample := finishedRunSample(o.Runs, o.Active)
	cpu := func() time.Duration { return crewdCPU(p.cmd.Process.Pid) }
	if m.Spread, err = timeQueries(ctx, p.admin, sample, o.Calls, false, cpu); err != nil {
		return m, err
	}
	if m.Dashboard, err = timeQueries(ctx, p.admin, sample, o.Calls, true, nil); err != nil {
		return m, err
	}
	mem, err := readMemory(p.cmd.Process.Pid)
	if err != nil {
		return m, err
	}
	m.PeakServing = mem.hwm
	n := o.Write
	if n < 0 {
		// NB: crewd runs commands.Options' default SnapshotEvery.
		n = max(1, int(int64(commands.NextSnapshotAt(m.Active.SnapshotAt, m.Active.Records,
			0))-int64(m.HeadAfterStarts)))
	}
	if n > 0 && o.Active > 0 {
		fmt.Fprintf(progress, "history: writing %d events over the socket\n", n)
		if m.Wrote, err = writeOverSocket(ctx, p, active, n); err != nil {
			return m, err
		}
	}
	if err := p.stop(); err != nil {
		return m, err
	}
	m.PeakWriting = stopWatch().hwm
	_, after, err := storeHead(storeDir, nil)
	m.SnapshotAfter = after.SnapshotAt
	return m, err
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// querySample is how many finished runs the queries go round: more than
// crewd keeps read back from the log (projections.DefaultColdCache), so
// that a run is not still cached from its last turn.
const querySample = 200

// sampledRuns is how many finished runs finishedRunSample picks: querySample, or every finished run of a history that
// has fewer.
func sampledRuns(runs, active int) int { return max(min(runs-active, querySample), 0) }

// finishedRunSample is up to querySample finished runs spread over the
// history, the oldest and the newest included.
func finishedRunSample(runs, active int) []string {
	finished := runs - active
	n := sampledRuns(runs, active)
	out := make([]string, 0, n)
	for i := range n {
		k := 0
		if n > 1 {
			k = i * (finished - 1) / (n - 1)
		}
		out = append(out, historyRunID(k))
	}
	return out
}

func activeRuns(runs, active int) []string {
	out := make([]string, 0, active)
	for k := runs - active; k < runs; k++ {
		out = append(out, historyRunID(k))
	}
	return out
}

// dashboardQueries are what a dashboard asks about one run, as the admin.
var dashboardQueries = []struct {
	method string
	params func(run string) map[string]any
}{
	{"query.run", func(run string) map[string]any { return map[string]any{"runId": run} }},
	{"query.tasks", func(run string) map[string]any { return map[string]any{"runId": run, "limit": 100} }},
	{"query.delegations", func(run string) map[string]any { return map[string]any{"runId": run, "limit": 100} }},
	{"query.ledger", func(run string) map[string]any { return map[string]any{"runId": run, "limit": 100} }},
	{"query.mailbox", func(run string) map[string]any {
		return map[string]any{"runId": run, "taskId": "00_work", "limit": 100}
	}},
	{"msg.inbox", func(run string) map[string]any { return map[string]any{"runId": run} }},
	{"query.slots", func(run string) map[string]any { return map[string]any{"runId": run} }},
	{"events.since", func(run string) map[string]any { return map[string]any{"runId": run, "limit": 100} }},
	// The runs list, newest first, a page of finished runs from the run's
	// place in the history on (its index as the cursor: a creation ordinal
	// about where the run was created).
	{"query.runs", func(run string) map[string]any {
		var k uint64
		_, _ = fmt.Sscanf(run, "team_20261001090000_%x", &k)
		return map[string]any{"status": "completed", "newest": true, "limit": 100,
			"cursor": strconv.FormatUint(k, 36)}
	}},
}

// timeQueries calls every dashboard query calls times, one call at a time,
// each query's calls going round the sample's runs (spread) or, byRun, all
// the queries on one run before the next run. cpu, when not nil and not
// byRun, reads crewd's CPU time, taken around each query's calls.
func timeQueries(ctx context.Context, admin *client.Client, sample []string, calls int, byRun bool,
	cpu func() time.Duration) ([]QueryLatency, error) {
	if len(sample) == 0 {
		return nil, nil
	}
	lat := make([][]time.Duration, len(dashboardQueries))
	call := func(q, i int) error {
		dq, run := dashboardQueries[q], sample[i%len(sample)]
		var res json.RawMessage
		t := time.Now()
		if err := admin.Call(ctx, dq.method, dq.params(run), &res); err != nil {
			return fmt.Errorf("bench: %s of %s: %w", dq.method, run, err)
		}
		lat[q] = append(lat[q], time.Since(t))
		return nil
	}
	type turn struct{ q, i int }
	turns := make([]turn, 0, calls*len(dashboardQueries))
	for q := range dashboardQueries {
		for i := range calls {
			turns = append(turns, turn{q, i})
		}
	}
	if byRun {
		slices.SortStableFunc(turns, func(a, b turn) int { return a.i - b.i })
		cpu = nil
	}
	used := make([]time.Duration, len(dashboardQueries))
	for k, t := range turns {
		if cpu != nil && (k == 0 || turns[k-1].q != t.q) {
			used[t.q] -= cpu()
		}
		if err := call(t.q, t.i); err != nil {
			return nil, err
		}
		if cpu != nil && (k == len(turns)-1 || turns[k+1].q != t.q) {
			used[t.q] += cpu()
		}
	}
	out := make([]QueryLatency, len(dashboardQueries))
	for q, l := range lat {
		slices.Sort(l)
		out[q] = QueryLatency{Method: dashboardQueries[q].method, Calls: len(l), P50: percentile(l, 50),
			P99: percentile(l, 99), Max: percentile(l, 100)}
		if cpu != nil && len(l) > 0 && used[q] > 0 {
			out[q].CPU = used[q] / time.Duration(len(l))
		}
	}
	return out, nil
}

// socketCycleEvents are the events of one delegation written over the
// socket: requested, admitted, reserved, spawned, the result's
// mailbox.appended and completed (no usage is reported, so no charge).
const socketCycleEvents = 6

// writeOverSocket has a worker of every task of the active runs delegate
// (and the admin spawn and settle each grandchild) until about n events are
// written, and returns how many were.
func writeOverSocket(ctx context.Context, p *crewdProcess, runs []string, n int) (int, error) {
	var cycles atomic.Int64
	want := int64((n + socketCycleEvents - 1) / socketCycleEvents)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	issued := 0
	for _, run := range runs {
		for t := range historyTasks {
			task := fmt.Sprintf("%02d_work", t)
			var cred struct{ Token string }
			if err := p.admin.Call(ctx, "credential.issue", map[string]any{"runId": run, "taskId": task},
				&cred); err != nil {
				return 0, fmt.Errorf("bench: credential for %s/%s: %w", run, task, err)
			}
			issued++
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := delegateUntil(ctx, p, run, task, cred.Token, &cycles, want)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return issued + int(cycles.Load())*socketCycleEvents, errors.Join(errs...)
}

// delegateUntil is one worker's loop of writeOverSocket, with an admin
// connection of its own for the runtime's side.
func delegateUntil(ctx context.Context, p *crewdProcess, run, task, token string, cycles *atomic.Int64,
	want int64) error {
	w, err := client.Dial(ctx, p.socket, client.Hello{RunID: run, TaskID: task, Token: token}, nil)
	if err != nil {
		return err
	}
	defer w.Close()
	rt, err := client.Dial(ctx, p.socket, client.Hello{Role: "admin", Token: p.token}, nil)
	if err != nil {
		return err
	}
	defer rt.Close()
	for cycles.Add(1) <= want {
		var res struct{ GrandchildTaskRef string }
		if err := w.Call(ctx, "delegate.request", map[string]any{"prompt": "look again", "description": "explore",
			"role": "analyst", "budgetTokens": 100}, &res); err != nil {
			return err
		}
		sub := res.GrandchildTaskRef
		if err := rt.Call(ctx, "delegate.spawned", map[string]any{"runId": run, "subId": sub, "pid": 4242},
			nil); err != nil {
			return err
		}
		if err := rt.Call(ctx, "delegate.settle", map[string]any{"runId": run, "subId": sub, "outcome": "ok",
			"text": "nothing new"}, nil); err != nil {
			return err
		}
	}
	cycles.Add(-1) // the increment that ended the loop wrote nothing
	return nil
}

func fmtBytes(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
