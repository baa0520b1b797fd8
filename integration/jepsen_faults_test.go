package integration

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
)

// The faults of a jepsen run (jepsen_test.go) and the supervisor that restarts crewd after them. Disk faults go
// through the file system that crewd built with the crewlog_faults tag puts under its store
// (eventlog/diskfaults.go, cmd/crewd/daemon/disk_faults.go): the test writes the fault into a control file and
// sends SIGUSR1. A real, small tmpfs would need root (TestDiskFullRefusesWritesThenRecovers uses one); this works
// for every user and fails one fsync exactly once.

// faultKind is one kind of fault injected at a run's fault moments.
type faultKind string

const (
	faultKill  faultKind = "kill -9"
	faultClock faultKind = "clock jump"
	// faultLow: the disk falls below --min-free-mib: crewd's space guard sees it and refuses writes (disk-full),
	// nothing fails in Pebble.
	faultLow faultKind = "disk nearly full"
	// faultFull: the disk fills between two readings of the space guard: the next write fails with ENOSPC in
	// Pebble, the engine fails stop and crewd exits; it does not start again until space is back.
	faultFull faultKind = "disk full"
	// faultFsync: the next WAL fsync fails, once, and what was written since the last one is lost: the engine
	// fails stop, crewd exits and is restarted.
	faultFsync faultKind = "fsync fails once"
	// faultStall: every write and sync of the store waits for seconds.
	faultStall faultKind = "disk stall"
)

// allFaults is every kind, in the order the short run injects them.
var allFaults = []faultKind{faultKill, faultClock, faultLow, faultFsync, faultStall, faultFull}

// gate is open or closed; waiters wait for it to be open.
type gate struct {
	mu     sync.Mutex
	opened chan struct{} // closed while open
}

func newGate() *gate {
	g := &gate{opened: make(chan struct{})}
	close(g.opened)
	return g
}

func (g *gate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.opened:
		if !open {
			g.opened = make(chan struct{})
		}
	default:
		if open {
			close(g.opened)
		}
	}
}

// await waits until the gate is open; wasOpen says it already was.
func (g *gate) await(ctx context.Context) (wasOpen bool, err error) {
	g.mu.Lock()
	ch := g.opened
	g.mu.Unlock()
	select {
	case <-ch:
		return true, nil
	default:
	}
	select {
	case <-ch:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// faultRunner injects a run's faults and restarts crewd after each: it is the run's supervisor.
type faultRunner struct {
	t     *testing.T
	cfg   jepsenConfig
	d     *daemon
	gens  *generations
	rng   *rand.Rand
	space *gate // open while the disk has space: clients refused disk-full wait for it

	clockFile, diskFile string

	low, full, stall   bool
	diskEnds, stallEnd time.Time
	armed              bool      // a failing fsync was armed and has not yet made crewd exit
	armedAt            time.Time // when
	down               bool      // crewd is not running: it waits for space to start again

	injected map[faultKind]int
	next     int // the next kind, when they are taken in order
	logFrom  int // where the running crewd's lines begin in the log

	selfExits, refusedStarts int
}

func newFaultRunner(t *testing.T, cfg jepsenConfig, d *daemon, gens *generations, rng *rand.Rand) *faultRunner {
	dir := t.TempDir()
	f := &faultRunner{t: t, cfg: cfg, d: d, gens: gens, rng: rng, space: newGate(),
		clockFile: filepath.Join(dir, "clock-offset-ms"), diskFile: filepath.Join(dir, "disk-faults"),
		injected: map[faultKind]int{}}
	d.env = []string{"CREWD_TEST_CLOCK_OFFSET_FILE=" + f.clockFile, "CREWD_TEST_DISK_FAULTS_FILE=" + f.diskFile}
	return f
}

// run injects the faults, then lifts every one and returns with crewd running; errs ends it early. With
// cfg.aloneFirst it first injects each kind once, in order and alone: the next moment is drawn once the last fault
// is over (crewd running, the disk healthy, the failed fsync restarted). Then, for cfg.duration, kinds drawn at
// random at every moment, mixed: a moment does not wait for the faults under way to end.
func (f *faultRunner) run(ctx context.Context, errs <-chan error) {
	alone := f.cfg.aloneFirst && len(f.cfg.faults) > 0
	end := time.Now().Add(f.cfg.duration)
	nextFault := time.Now().Add(f.gap())
	for {
		now := time.Now()
		if alone && f.next == len(f.cfg.faults) && f.quiet() {
			alone, end = false, now.Add(f.cfg.duration) // each kind once alone: now the mixed part
		}
		faulting := alone || now.Before(end)
		if alone && !f.quiet() {
			nextFault = time.Time{} // drawn again once quiet
		} else if nextFault.IsZero() {
			nextFault = now.Add(f.gap())
		}
		if !faulting && !f.low && !f.full && !f.stall && !f.down {
			break
		}
		wake := nextFault
		if !faulting || nextFault.IsZero() {
			wake = now.Add(time.Hour)
		}
		if f.low || f.full {
			wake = minTime(wake, f.diskEnds)
		}
		if f.stall {
			wake = minTime(wake, f.stallEnd)
		}
		if f.armed {
			wake = minTime(wake, f.armedAt.Add(startTimeout))
		}
		var exited <-chan struct{}
		if !f.down {
			exited = f.d.exited
		}
		select {
		case err := <-errs:
			f.t.Fatalf("jepsen (seed %d): %v", f.cfg.seed, err)
		case <-exited:
			f.exitedByItself()
			continue
		case <-time.After(time.Until(wake)): // the next fault moment or the end of a fault, not a synchronisation
		}
		now = time.Now()
		faulting = alone || now.Before(end)
		if f.armed && !now.Before(f.armedAt.Add(startTimeout)) { // a guard against a hung test, not a timing assertion
			f.t.Fatalf("an fsync failure was armed %v ago, and crewd did not fail stop; log:\n%s", startTimeout, f.d.log())
		}
		if (f.low || f.full) && !now.Before(f.diskEnds) {
			f.low, f.full = false, false
			f.writeDisk()
		}
		if f.stall && !now.Before(f.stallEnd) {
			f.stall = false
			f.writeDisk()
		}
		if faulting && !nextFault.IsZero() && !now.Before(nextFault) {
			f.inject(alone)
			nextFault = time.Now().Add(f.gap())
		}
	}
	f.disarm()
	f.healthy(ctx)
}

// supervise waits for the clients: a single crewd that exits now is a failure the replays report.
func (f *faultRunner) supervise(done <-chan struct{}) { <-done }

// healthy writes until a write is answered: a crewd whose engine failed stop in the last fault, and which answers
// reads until it exits 2 s later, is seen to exit and started again, so the run ends on a crewd that writes.
func (f *faultRunner) healthy(ctx context.Context) {
	for i := 0; ; i++ {
		require.Less(f.t, i, 5, "crewd does not write once every fault is lifted; log:\n%s", f.logTail())
		c, err := client.Dial(ctx, f.d.socket, adminHello(f.d), &client.Options{DialTimeout: startTimeout})
		if err == nil {
			err = c.Call(ctx, "run.create", map[string]any{"team": "team", "goal": "probe", "cwd": "/repo"}, nil)
			c.Close()
		}
		if err == nil {
			return
		}
		select {
		case <-f.d.exited:
			f.exitedByItself()
		case <-time.After(startTimeout): // a guard against a hung test, not a timing assertion
			f.t.Fatalf("crewd answered a write %v and did not exit; log:\n%s", err, f.logTail())
		}
	}
}

// quiet says no fault is under way: crewd runs, the disk is healthy, no fsync failure waits.
func (f *faultRunner) quiet() bool { return !f.low && !f.full && !f.stall && !f.down && !f.armed }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// gap is the time to the next fault moment: uniform in [0, 2·faultEvery) (the whole run when there are none).
func (f *faultRunner) gap() time.Duration {
	if len(f.cfg.faults) == 0 {
		return f.cfg.duration
	}
	return time.Duration(f.rng.Int64N(int64(2 * f.cfg.faultEvery)))
}

// hold is how long a disk fault lasts: uniform in [lo, hi).
func (f *faultRunner) hold(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(f.rng.Int64N(int64(hi-lo)))
}

// inject injects the next fault: the next kind in order while alone, else one at random.
func (f *faultRunner) inject(alone bool) {
	kind := f.cfg.faults[f.rng.IntN(len(f.cfg.faults))]
	if alone {
		if f.next == len(f.cfg.faults) {
			return
		}
		kind = f.cfg.faults[f.next]
		f.next++
	}
	long := jepsenMinutes(f.t) > 0
	switch kind {
	case faultKill:
		if f.down {
			return // crewd waits for space: nothing to kill
		}
		f.kill()
	case faultClock:
		// Anywhere within 7 minutes of the real time, so one jump moves at most 14 minutes: less than a
		// delegation's timeout and grace (900 + 30 s), so nothing expires. Written whole, then renamed.
		offset := f.rng.Int64N(14*60_000+1) - 7*60_000
		writeWhole(f.t, f.clockFile, strconv.FormatInt(offset, 10))
	case faultLow, faultFull:
		if f.low || f.full {
			return // one disk fault at a time
		}
		if kind == faultLow {
			f.low, f.diskEnds = true, time.Now().Add(f.hold(300*time.Millisecond, 600*time.Millisecond))
		} else {
			// NB: longer than the 2 s an engine that failed stop answers reads for, so crewd's restart finds the
			// disk full and is refused.
			f.full, f.diskEnds = true, time.Now().Add(f.hold(2500*time.Millisecond, 3*time.Second))
		}
		if long {
			f.diskEnds = time.Now().Add(f.hold(time.Second, 8*time.Second))
		}
		f.writeDisk()
	case faultFsync:
		if f.armed {
			return
		}
		// NB: a planted-bug build goes on after the failed fsync: nothing to wait for.
		f.armed, f.armedAt = !f.cfg.planted, time.Now()
		writeWhole(f.t, f.diskFile+".fsync", "")
		f.signal()
	case faultStall:
		if f.stall {
			return
		}
		f.stall, f.stallEnd = true, time.Now().Add(f.hold(time.Second, 1500*time.Millisecond))
		if long {
			f.stallEnd = time.Now().Add(f.hold(time.Second, 5*time.Second))
		}
		f.writeDisk()
	}
	f.injected[kind]++
}

// writeDisk writes the disk's faults for crewd and tells it; a restart waiting for space starts now.
func (f *faultRunner) writeDisk() {
	f.writeControl()
	if f.down && !f.low && !f.full {
		f.start()
		return
	}
	f.signal()
}

// writeControl writes the disk's faults where crewd reads them.
func (f *faultRunner) writeControl() {
	var words []string
	if f.low {
		words = append(words, "low")
	}
	if f.full {
		words = append(words, "full")
	}
	if f.stall {
		words = append(words, "stall")
	}
	writeWhole(f.t, f.diskFile, strings.Join(words, " "))
	f.space.set(!f.low && !f.full)
}

// signal tells a running crewd to read the disk's faults again.
func (f *faultRunner) signal() {
	if f.down {
		return
	}
	if err := f.d.cmd.Process.Signal(syscall.SIGUSR1); err != nil && !errors.Is(err, os.ErrProcessDone) {
		require.NoError(f.t, err)
	} // NB: a crewd exiting by itself reads the file when it is started again
}

// kill sends SIGKILL (crewd may have just exited by itself: the same from here) and starts crewd again.
func (f *faultRunner) kill() {
	f.gens.down()
	if err := f.d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		require.NoError(f.t, err)
	}
	f.d.wait()
	f.afterExit()
	f.start()
}

// exitedByItself handles crewd exiting with no kill, which only a fault may cause, and starts it again.
func (f *faultRunner) exitedByItself() {
	f.gens.down()
	f.d.wait()
	f.selfExits++
	f.failedStop(f.d.state.ExitCode())
	f.afterExit()
	f.start()
}

// failedStop requires the exit of the crewd that just ended, with code, to be a fail stop after a failed write:
// either the engine stopped after a commit error (exit 1, for its supervisor to restart it), or Pebble itself
// panicked on a write it could not make durable (exit 2), which the supervisor restarts all the same: a failed
// fsync of the WAL it was closing (a memtable rotation, the flush at open), or a full disk under a write Pebble
// treats as fatal (its MANIFEST, as when a snapshot's ingestion edits it).
func (f *faultRunner) failedStop(code int) {
	log := f.d.log()
	this := log[min(f.logFrom, len(log)):]
	tail := f.logTail()
	switch code {
	case 1:
		require.Contains(f.t, this, "the engine stopped after a commit error", "crewd exited 1; log:\n%s", tail)
	case 2:
		require.Contains(f.t, this, "panic: ", "crewd exited 2; log:\n%s", tail)
		if !strings.Contains(this, "fault=fsync") {
			require.Contains(f.t, this, "fault=enospc", "crewd exited 2 with no failed write injected; log:\n%s", tail)
			require.Contains(f.t, this, "panic: eventlog: pebble fatal: ", "crewd exited 2 on a full disk, not by Pebble; log:\n%s", tail)
		}
	default:
		f.t.Fatalf("crewd exited by itself, status %d; log:\n%s", code, tail)
	}
}

// afterExit notes what an exit ended: an armed fsync failure that was consumed is spent.
func (f *faultRunner) afterExit() {
	if f.armed {
		if _, err := os.Stat(f.diskFile + ".fsync"); errors.Is(err, os.ErrNotExist) {
			f.armed = false
		}
	}
}

// start starts crewd; on a full disk it must refuse (exit 1, disk-full), and is started again when space is back.
// An fsync failing during the start (the flush at open) fails it stop; it is then started again.
func (f *faultRunner) start() {
	if f.stall {
		// NB: a restart ends a stall: crewd opening its store on a stalled disk would hold this supervisor, which
		// lifts the stall, until the start timed out.
		f.stall = false
		f.writeControl()
	}
	f.logFrom = len(f.d.log())
	err := f.d.tryStart()
	if err != nil && f.d.state != nil && f.d.state.ExitCode() == 2 {
		f.selfExits++
		f.failedStop(2)
		f.afterExit()
		f.logFrom = len(f.d.log())
		err = f.d.tryStart()
	}
	if f.low || f.full {
		require.Error(f.t, err, "crewd started on a full disk")
		require.Contains(f.t, f.logTail(), "daemon: disk-full: ")
		f.refusedStarts++
		f.down = true
		return
	}
	if err != nil {
		f.t.Fatalf("crewd did not start: %v; the end of its log:\n%s", firstLine(err.Error()), f.logTail())
	}
	f.down = false
	f.gens.up()
}

// disarm withdraws a failing fsync armed at the end of the run; if crewd already took it, it waits for crewd to
// exit and restarts it. Every fault is then lifted.
func (f *faultRunner) disarm() {
	err := os.Remove(f.diskFile + ".fsync")
	if f.armed && errors.Is(err, os.ErrNotExist) {
		select {
		case <-f.d.exited:
			f.exitedByItself()
		case <-time.After(startTimeout): // a guard against a hung test, not a timing assertion
			f.t.Fatalf("an fsync failed, and crewd did not fail stop within %v; log:\n%s", startTimeout, f.d.log())
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		require.NoError(f.t, err)
	}
	f.armed = false
	writeWhole(f.t, f.diskFile, "")
	f.signal()
}

// logTail is the lines the last crewd wrote, at most the last 100 (a failed engine logs every request refused).
func (f *faultRunner) logTail() string {
	log := f.d.log()
	lines := strings.Split(log[min(f.logFrom, len(log)):], "\n")
	return strings.Join(lines[max(0, len(lines)-100):], "\n")
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// writeWhole writes path atomically: written beside it, then renamed over it.
func writeWhole(t *testing.T, path, content string) {
	require.NoError(t, os.WriteFile(path+".new", []byte(content), 0o600))
	require.NoError(t, os.Rename(path+".new", path))
}

// diskFaultsInjected counts, in crewd's log, the disk faults it injected by kind (enospc, fsync, stall): once per
// process and fault period for enospc and stall, every time for fsync.
func diskFaultsInjected(log string) map[string]int {
	n := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "disk fault injected") {
			continue
		}
		for _, kind := range []string{"enospc", "fsync", "stall"} {
			if strings.Contains(line, "fault="+kind+" ") {
				n[kind]++
			}
		}
	}
	return n
}
