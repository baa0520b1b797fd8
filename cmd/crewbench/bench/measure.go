package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crewlog/crewlog/commands"
)

// Cell is one configuration of the timed workload.
type Cell struct {
	Clients int
	OwnRuns bool // each client on its own run, else all on one
}

func (c Cell) String() string {
	if c.OwnRuns {
		return fmt.Sprintf("%d clients, own runs", c.Clients)
	}
	return fmt.Sprintf("%d clients, one run", c.Clients)
}

// Result is one implementation timed in one cell in one round.
type Result struct {
	Impl     string
	Cell     Cell
	Ops      int // operations whose admission started (closed loop) or was scheduled (open loop) in the window
	PerSec   float64
	P50, P99 time.Duration
	Retries  float64 // conflicts or busy locks per operation finished (over the same span as Finished)
	// Finished counts every operation finished, the warm-up's and those
	// in flight at the window's end included: what the store's state was
	// rechecked against. In the closed loop, at least one per client (each
	// starts one however late it first runs), however slow the machine,
	// where Ops may be 0 when a window is shorter than one operation.
	Finished int64
	// CPUPerOp is the store's CPU time (user + system, every thread: the
	// store's, the embedded servers') from the first operation to the last
	// finished, per operation finished. For a store whose server runs in a
	// process of its own (the socket) it is that process's time, and
	// ClientCPUPerOp is this process's: the clients'.
	CPUPerOp       time.Duration
	ClientCPUPerOp time.Duration
	// Groups is what the store's writer committed in its groups over the
	// same span as CPUPerOp, for a store that groups (nil otherwise).
	Groups *GroupSizes
	// Storage is what the store's Pebble wrote and read per operation over
	// the same span, for a store on Pebble (nil otherwise).
	Storage *CellStorage
	// Host is how the whole machine's CPU was spent over the same span (nil
	// where the kernel's counters cannot be read).
	Host *HostCPU
	Err  error
}

// The timed workload's policy never refuses: every op is an admission.
const (
	timedBudget = 1 << 50
	timedTokens = 1000
	timedSlots  = 64 // crewlog's largest slot pool; each client holds at most one delegation
)

// drainLimit bounds how long the operations in flight at the end of the
// window may take to finish: one that takes longer fails the cell.
const drainLimit = 60 * time.Second

// retrier is a store that counts retries (optimistic conflicts, busy locks).
type retrier interface{ Retries() int64 }

// remoteServer is a store whose server runs in a process of its own; its CPU
// time is the server's, this process's the clients'.
type remoteServer interface {
	serverCPU() (time.Duration, error)
	// profileServer and stopServerProfile profile the server's side of a
	// timed run (the files startCellProfile writes, named by prefix).
	profileServer(prefix string) error
	stopServerProfile(ops int64) (report string, err error)
}

// Load is how operations arrive.
type Load struct {
	// Rate, when positive, is the open loop: operations are scheduled at
	// fixed times Rate per second for the whole cell, whichever client
	// takes them, and an admission's latency is measured from its
	// scheduled time, so a stall delays every operation scheduled during
	// it (no coordinated omission). Zero is the closed loop: each client
	// starts its next operation when its last one ended.
	Rate float64
	// now is the clock the operations are scheduled and timed by
	// (time.Now): tests set one that moves only when told, so what falls in
	// the warm-up and in the window does not depend on the machine's speed.
	now func() time.Time
}

// runCell times im in cell for warm + window on a fresh store in dir.
//
// One op is a delegate admission (its latency is the one reported) followed
// by the settlement that frees its slot. An op counts when its admission
// started (closed loop) or was scheduled (open loop) inside the window; the
// ops in flight when the window ends are finished and counted, and no op
// starts after it (but a client's first in the closed loop, not counted), so
// an implementation is never credited or charged for where the window's edge
// fell inside a slow op.
//
// profile, when its prefix is not "", names the files of a CPU and an
// allocation profile of the timed run, and of its execution trace if asked
// (startCellProfile), reported on progress.
func runCell(ctx context.Context, im Impl, dir string, cell Cell, warm, window time.Duration, load Load,
	profile cellProfiling, progress io.Writer) Result {
	res := Result{Impl: im.Name, Cell: cell}
	res.Err = func() error {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		runs, spec := cellRuns(cell)
		s, err := im.open(dir, spec)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Setup(ctx, runs, spec); err != nil {
			return err
		}
		// NB: every cell runs in this process's one heap. Without a collection here, a cell began with the garbage
		// of the one before it and the collector's goal set by that one's live heap (after the file store's read-back
		// of its 256 MiB file, 514 MiB: a second of crewlog ran without one collection, where it otherwise ran
		// twelve), so its collections, part of its CPU, depended on which implementation ran before it.
		runtime.GC()
		var before int64
		if r, ok := s.(retrier); ok {
			before = r.Retries()
		}
		dctx, cancel := context.WithTimeout(ctx, warm+window+drainLimit)
		defer cancel()
		cpu0 := processCPU()
		host0, host0ok := readCPUTimes()
		remote, isRemote := s.(remoteServer)
		var srv0 time.Duration
		if isRemote {
			if srv0, err = remote.serverCPU(); err != nil {
				return err
			}
		}
		g, groups := s.(grouper)
		var g0 commands.Stats
		if groups {
			g0 = g.groupStats()
		}
		sw, onPebble := s.(storageWorker)
		var w0 StorageWork
		if onPebble {
			w0, onPebble = sw.storageWork()
		}
		prof, err := startCellProfile(profile, progress)
		if err != nil {
			return err
		}
		// abandon stops the profiles still running when the cell fails:
		// the server's, if it runs (after n operations), then this
		// process's.
		abandon := func(err error, serverRuns bool, n int64) error {
			var stopped error
			if serverRuns {
				_, stopped = remote.stopServerProfile(n)
			}
			return errors.Join(err, stopped, prof.stop(0))
		}
		serverProfiled := profile.prefix != "" && isRemote
		if serverProfiled {
			if err := remote.profileServer(profile.prefix + ".server"); err != nil {
				return abandon(err, false, 0)
			}
		}
		now := load.now
		if now == nil {
			now = time.Now
		}
		start := now()
		from, to := start.Add(warm), start.Add(warm+window)
		lats := make([][]time.Duration, cell.Clients)
		errs := make([]error, cell.Clients)
		var next atomic.Int64 // open loop: the next scheduled op
		var done atomic.Int64 // ops finished, warm-up included
		var wg sync.WaitGroup
		for c := 0; c < cell.Clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				run := runs[c%len(runs)]
				for first := true; ; first = false {
					// due is when the op was meant to start: now in the
					// closed loop, its slot in the schedule in the open one.
					due := now()
					if load.Rate > 0 {
						i := next.Add(1) - 1
						due = start.Add(time.Duration(float64(i) * float64(time.Second) / load.Rate))
						if !due.Before(to) {
							return
						}
						if err := sleepUntil(dctx, due, now); err != nil {
							errs[c] = err
							return
						}
					} else if !due.Before(to) && !first {
						// NB: a client's first op starts whenever the client
						// first runs, past the window on a stalled machine,
						// so that every client finishes one (Finished).
						return
					}
					a, err := s.Admit(dctx, run, timedTokens)
					lat := now().Sub(due)
					if err == nil && !a.Admitted() {
						err = fmt.Errorf("bench: %s refused a timed admission: %s", im.Name, a.Reason)
					}
					if err == nil {
						err = s.Settle(dctx, run, a.SubID, "ok")
					}
					if err != nil {
						errs[c] = err
						return
					}
					done.Add(1)
					if !due.Before(from) && due.Before(to) {
						lats[c] = append(lats[c], lat)
					}
				}
			}(c)
		}
		wg.Wait()
		host1, host1ok := readCPUTimes()
		res.Host = hostCPUBetween(host0, host0ok, host1, host1ok)
		if groups {
			res.Groups = groupSizesBetween(g0, g.groupStats())
		}
		if onPebble {
			if w1, ok := sw.storageWork(); ok {
				res.Storage = storageBetween(w0, w1, done.Load())
			}
		}
		// NB: the CPU is read before the profile stops: writing it and the
		// allocation profiles is not the cell's work.
		if n := done.Load(); n > 0 {
			res.CPUPerOp = (processCPU() - cpu0) / time.Duration(n)
			if isRemote {
				srv1, err := remote.serverCPU()
				if err != nil {
					return abandon(err, serverProfiled, n)
				}
				res.CPUPerOp, res.ClientCPUPerOp = (srv1-srv0)/time.Duration(n), res.CPUPerOp
			}
		}
		if serverProfiled {
			report, err := remote.stopServerProfile(done.Load())
			if err != nil {
				return abandon(err, false, 0)
			}
			fmt.Fprintln(progress, report)
		}
		if err := prof.stop(done.Load()); err != nil {
			return err
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		f, err := s.Final(ctx)
		if err != nil {
			return err
		}
		if why := checkTimed(f, runs, done.Load()); why != "" {
			return fmt.Errorf("bench: %s: the state after the timed run: %s", im.Name, why)
		}
		res.Finished = done.Load()
		all := slices.Concat(lats...)
		slices.Sort(all)
		res.Ops = len(all)
		res.PerSec = float64(len(all)) / window.Seconds()
		res.P50, res.P99 = percentile(all, 50), percentile(all, 99)
		// NB: the retries are counted from before the warm-up to the last
		// operation finished, so they are divided by the operations
		// finished over that span (as the CPU is), not by the window's.
		if r, ok := s.(retrier); ok && res.Finished > 0 {
			res.Retries = float64(r.Retries()-before) / float64(res.Finished)
		}
		return nil
	}()
	return res
}

// cellRuns are the runs of cell and the spec of each.
func cellRuns(cell Cell) ([]string, Spec) {
	runs := []string{"run-0"}
	perRun := cell.Clients
	if cell.OwnRuns {
		runs, perRun = make([]string, cell.Clients), 1
		for i := range runs {
			runs[i] = fmt.Sprintf("run-%d", i)
		}
	}
	return runs, Spec{Budget: timedBudget, Slots: timedSlots, Clients: perRun}
}

// sleepUntil sleeps until t on the clock now.
func sleepUntil(ctx context.Context, t time.Time, now func() time.Time) error {
	d := t.Sub(now())
	if d <= 0 {
		return ctx.Err()
	}
	return sleep(ctx, d)
}

// percentile of sorted durations (nearest rank below).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

// checkTimed is the re-check of a timed run's state, read back from the
// store: every op the clients finished is an admission and a settlement
// persisted whole, payloads as written.
func checkTimed(f map[string]Final, runs []string, ops int64) string {
	var bad []string
	total := 0
	for _, run := range runs {
		x := f[run]
		total += x.Admitted
		n := x.Admitted
		for _, typ := range []string{"delegate.requested", "budget.reserved", "mailbox.appended",
			"delegate.completed"} {
			if x.Events[typ] != n {
				bad = append(bad, fmt.Sprintf("run %s: %d %s for %d admissions", run, x.Events[typ], typ, n))
			}
		}
		if x.Spent != int64(n)*timedTokens || len(x.Rejected) > 0 || x.Unmatched > 0 || len(x.Bad) > 0 {
			bad = append(bad, fmt.Sprintf("run %s: spent %d, rejected %v, %d unmatched, bad payloads %v", run,
				x.Spent, x.Rejected, x.Unmatched, x.Bad))
		}
	}
	if int64(total) != ops {
		bad = append(bad, fmt.Sprintf("%d admissions persisted for %d operations finished", total, ops))
	}
	if len(bad) > 3 {
		bad = append(bad[:3], fmt.Sprintf("and %d more", len(bad)-3))
	}
	return strings.Join(bad, "; ")
}

// processCPU is the CPU time this process has used (user + system).
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
