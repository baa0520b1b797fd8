package eventlog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog/disktest"
)

// tableWriteFaults is a toggle that, on, fails every creation of and write to a table file with ENOSPC, as a disk
// full past crewd's space guard does to a flush (the WAL's file, recycled, has its space already), and a count of
// the faults injected: one per attempt of the flush, which Pebble retries at once.
func tableWriteFaults() (*errorfs.Toggle, *atomic.Int64) {
	var injected atomic.Int64
	toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			injected.Add(1)
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	})}
	return toggle, &injected
}

// A flush that fails, its table refused by a full disk, fails the log stop at once: Failed tells of it, Err says
// why, the appends after it are refused (ErrFailed) rather than left waiting in Pebble for a flush that never comes
// once its memtables are full, and Close returns, ending Pebble's retries of the flush (made at once and without
// end, a core spinning meanwhile). The reopened store holds every acknowledged append.
func TestAFailedFlushFailsTheLogStop(t *testing.T) {
	mem := vfs.NewMem()
	toggle, injected := tableWriteFaults()
	l, err := Open("db", &Options{FS: errorfs.Wrap(mem, toggle), MemTableSize: 256 << 10})
	require.NoError(t, err)
	toggle.On()

	// NB: one memtable and a little more, so that one flush is asked for and no append meets Pebble holding writes
	// back (two memtables waiting for the flush): an append held there when the flush fails waits for good, which
	// TestAFlushThatFailsAfterTheAppendsStalledFailsTheLogStop holds; appending on until the failure raced it.
	var acked atomic.Uint64
	payload := make([]byte, 4<<10)
	for i := range 70 {
		pos, err := l.Append(Write{CommandID: fmt.Sprint(i), Events: []Event{{Stream: "run", Type: "test.big",
			Payload: payload}}})
		if err != nil {
			require.ErrorIs(t, err, ErrFailed)
			break
		}
		acked.Store(pos)
	}
	select {
	case <-l.Failed():
	case <-time.After(10 * time.Second):
		t.Fatalf("the log did not fail stop; %d appends acknowledged, the flush failed %d times", acked.Load(),
			injected.Load())
	}
	require.ErrorIs(t, l.Err(), syscall.ENOSPC)
	refused := make(chan error, 1)
	go func() {
		for i := range 300 { // more than the two memtables after which Pebble would hold an append for good
			if _, err := l.Append(Write{CommandID: fmt.Sprint("after-", i), Events: []Event{{Stream: "run",
				Type: "test.big", Payload: payload}}}); !errors.Is(err, ErrFailed) {
				refused <- fmt.Errorf("append %d after the failure: %v", i, err)
				return
			}
		}
		refused <- nil
	}()
	select {
	case err := <-refused:
		require.NoError(t, err, "the appends after the failure are refused")
	case <-time.After(10 * time.Second):
		t.Fatal("an append waits in Pebble for the flush")
	}

	before := injected.Load()
	time.Sleep(300 * time.Millisecond)
	require.LessOrEqual(t, injected.Load()-before, int64(2*300/flushRetryPause.Milliseconds()+2),
		"the flush's retries are paced")

	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
	attempts := injected.Load()
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, attempts, injected.Load(), "the flush is retried after Close")

	toggle.Off()
	requireHolds(t, mem, acked.Load())
}

// The pause between two tries of a failed flush is the 100 ms docs/reliability.md gives: the tests of the pacing
// above bound the tries by the pause, whatever it is, so it could change alone.
func TestAFailedFlushHoldsPebbleBackTheDocumentedPause(t *testing.T) {
	doc, err := os.ReadFile("../docs/reliability.md")
	require.NoError(t, err)
	says := "each failed try holds Pebble back 100 ms"
	require.Contains(t, strings.Join(strings.Fields(string(doc)), " "), says)
	require.Equal(t, 100*time.Millisecond, flushRetryPause, "docs/reliability.md says %q", says)
}

// Open of a store whose recovered appends Pebble must flush (a crash left them in the WAL alone), on a disk that
// refuses the flush's table, waits for the disk, where it retried the flush at once and without end, a core
// spinning: Pebble's Open waits for that flush, and the log paces its retries (a few a second). Once the disk has
// space Open completes, and the store holds every acknowledged append.
func TestOpenWhoseFlushOfTheRecoveredStateFailsWaitsForTheDisk(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l, err := Open("db", &Options{FS: mem})
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		_, err := l.Append(Write{CommandID: fmt.Sprintf("ok-%d", i), Events: evs("run", 2)})
		require.NoError(t, err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	require.NoError(t, l.Close())

	toggle, injected := tableWriteFaults()
	toggle.On()
	type opened struct {
		l   *Log
		err error
	}
	done := make(chan opened, 1)
	go func() {
		r, err := Open("db", &Options{FS: errorfs.Wrap(crashed, toggle)})
		done <- opened{r, err}
	}()
	time.Sleep(500 * time.Millisecond)
	require.LessOrEqual(t, injected.Load(), int64(2*500/flushRetryPause.Milliseconds()+2),
		"the flush's retries are paced")
	toggle.Off()
	select {
	case o := <-done:
		require.NoError(t, o.err)
		pos, _ := o.l.Head()
		require.EqualValues(t, 20, pos)
		require.NoError(t, o.l.Close())
	case <-time.After(10 * time.Second):
		t.Fatal("Open waits on once the disk has space")
	}
	reopenTenAcked(t, crashed).Close()
}

// A flush that a concurrent operation cancelled (pebble.ErrCancelledCompaction, which Pebble meets in normal
// operation and tries again at once) does not fail the log, where the log failed stop at it
// under crewbench's 64 clients on their own runs.
func TestACancelledFlushIsNoFailure(t *testing.T) {
	l, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()

	f := &flushFailure{logger: pebble.DefaultLogger}
	el := &pebble.EventListener{}
	f.listen(el)
	f.log.Store(l)
	cancelled := fmt.Errorf("flush: %w", pebble.ErrCancelledCompaction)
	el.FlushEnd(pebble.FlushInfo{Done: true, Err: cancelled})
	el.BackgroundError(cancelled)
	require.NoError(t, l.Err())
	select {
	case <-l.Failed():
		t.Fatalf("a cancelled flush failed the log: %v", l.Err())
	case <-time.After(50 * time.Millisecond):
	}
	_, err = l.Append(Write{Events: []Event{{Stream: "run", Type: "test.after"}}})
	require.NoError(t, err)

	// The same listener still fails the log at a flush that failed for the disk.
	full := &os.PathError{Op: "write", Path: "000001.sst", Err: syscall.ENOSPC}
	el.FlushEnd(pebble.FlushInfo{Done: true, Err: full})
	el.BackgroundError(full)
	require.ErrorIs(t, l.Err(), syscall.ENOSPC)
	select {
	case <-l.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("a failed flush did not fail the log")
	}
}

// A flush that fails only after Pebble held the appends back (its second memtable full, queued for the flush) fails
// the log stop all the same: Failed closes and Err says why while an append waits inside Pebble with the log's lock
// held, where the failure waited for that lock, for good, and neither the writer that keeps state of the log (the
// commands engine) nor crewd learnt of it; StorageStats answers meanwhile, and every other write is refused. What
// was acknowledged before is in the WAL.
func TestAFlushThatFailsAfterTheAppendsStalledFailsTheLogStop(t *testing.T) {
	waiting := make(chan struct{}, 16)
	h := holdAppendsInPebble(t, Options{derivedLockWaits: func() { waiting <- struct{}{} }}, nil)
	l := h.l
	writes := map[string]func() error{
		"SaveView":      func() error { return l.SaveView("run", 1, []byte("v")) },
		"SaveSummaries": func() error { return l.SaveSummaries([]Summary{{Stream: "run", Ord: 1, Position: 1}}) },
		"SaveSnapshot":  func() error { return l.SaveSnapshot(1, []byte("s")) },
		"Checkpoint":    func() error { return l.Checkpoint("checkpoint") },
	}
	// The writes other than appends made while the append is held wait for it (the lock of the writes made without a
	// sync, which the held append holds from its check of the pending sync to its hand-off) until the log fails.
	held := map[string]chan error{}
	for name, write := range writes {
		answer := make(chan error, 1)
		held[name] = answer
		go func() { answer <- write() }()
	}
	// NB: they wait before the flush fails, so that each checked the failure before it and waits for that lock, where
	// one taking its check after the failure is refused at once whatever the lock does.
	for range writes {
		select {
		case <-waiting:
		case <-time.After(5 * time.Second):
			t.Fatal("the writes made while the append is held do not wait for the lock it holds")
		}
	}
	for name, answer := range held {
		select {
		case err := <-answer:
			t.Fatalf("%s made while the append is held does not wait for it: %v", name, err)
		default:
		}
	}
	h.fillDisk()

	select {
	case <-l.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("the log did not fail stop while an append waits in Pebble")
	}
	require.ErrorIs(t, l.Err(), syscall.ENOSPC)
	// An operator's metrics are read all the same, where StorageStats waited for the lock the held append holds.
	stats := make(chan StorageStats, 1)
	go func() { stats <- l.StorageStats() }()
	select {
	case st := <-stats:
		require.Positive(t, st.WriteStalls)
	case <-time.After(5 * time.Second):
		t.Fatal("StorageStats waits for the append held in Pebble")
	}
	// The writes other than appends (a view, a summary, a snapshot, a checkpoint) are refused at once, where their
	// check of the failure waited for the lock the held append holds; and so are those made while it was held, where
	// they waited for good for the lock of the writes made without a sync (an operator's checkpoint held crewd's
	// socket server, and its exit, with it).
	for name, write := range writes {
		refused := make(chan error, 1)
		go func() { refused <- write() }()
		for when, answer := range map[string]chan error{"after the failure": refused, "while held": held[name]} {
			select {
			case err := <-answer:
				require.ErrorIs(t, err, ErrFailed, "%s %s", name, when)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s made %s waits for the append held in Pebble", name, when)
			}
		}
	}

	// Nothing acknowledged is lost: it is in the WAL, which a store reopened on a disk with space flushes.
	requireHolds(t, h.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), h.acked.Load())
}

// The outcome of a command is answered while an append waits inside Pebble, before and after the flush it waits for
// fails: a command acknowledged (read from Pebble), the command of the held append (being recorded) and one never
// sent (unrecorded), where the lookup waited for the log's lock, which the held append holds, and once the flush
// failed waited for good: a cluster follower's answer to a retry that its broker refused (commands'
// recordedOrRefused), whose copier's append Pebble held, with it.
func TestAnOutcomeIsAnsweredWhileAnAppendIsHeldInPebble(t *testing.T) {
	h := holdAppendsInPebble(t, Options{RecentOutcomes: 1}, nil) // NB: the acknowledged outcomes are read from Pebble
	acked := h.acked.Load()
	require.Positive(t, acked)
	lookups := []struct {
		id       string
		recorded bool
	}{
		{id: "0", recorded: true},
		{id: fmt.Sprint(acked - 1), recorded: true}, // appendMemTablesOf4KiB's command i has position i+1
		{id: fmt.Sprint(acked)},                     // the held append's
		{id: "never sent"},
	}
	requireAnswered := func(when string) {
		for _, lookup := range lookups {
			type answer struct {
				o   Outcome
				err error
			}
			answered := make(chan answer, 1)
			go func() {
				o, err := h.l.Outcome("", lookup.id)
				answered <- answer{o, err}
			}()
			select {
			case a := <-answered:
				if lookup.recorded {
					require.NoError(t, a.err, "%s: %s", when, lookup.id)
					require.Equal(t, lookup.id, a.o.CommandID)
				} else {
					require.ErrorIs(t, a.err, ErrNotFound, "%s: %s", when, lookup.id)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the outcome of %q is not answered %s", lookup.id, when)
			}
		}
	}
	requireAnswered("while an append is held in Pebble")
	h.fillDisk()
	select {
	case <-h.l.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("the log did not fail stop while an append waits in Pebble")
	}
	requireAnswered("once the flush the held append waits for failed")
}

// A staged append whose sync is over is answered, and shown to readers, while a later append waits inside Pebble,
// where its Wait waited for the log's lock, which the held append holds, and for good once the flush failed: a
// commit the engine had made durable was answered as in doubt, its callers told of the failure.
func TestAStagedAppendIsAnsweredWhileALaterOneIsHeldInPebble(t *testing.T) {
	var staged *Staged
	h := holdAppendsInPebble(t, Options{}, func(l *Log) {
		var err error
		staged, err = l.Stage(Write{Principal: "p", CommandID: "staged", Events: evs("run", 1)})
		require.NoError(t, err)
	})
	waited := make(chan error, 1)
	go func() {
		_, err := staged.Wait()
		waited <- err
	}()
	select {
	case err := <-waited:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the staged append's Wait waits for the append held in Pebble")
	}
	o, err := h.l.Outcome("p", "staged")
	require.NoError(t, err)
	require.EqualValues(t, 1, o.First)
	ev, err := h.l.Event(1)
	require.NoError(t, err)
	require.Equal(t, "staged", ev.CommandID)
}

// heldAppends is a log on a slow disk that then fills up (holdAppendsInPebble), its appends held inside Pebble.
type heldAppends struct {
	l     *Log
	mem   *vfs.MemFS
	acked atomic.Uint64 // the last position acknowledged
	disk  *disktest.SlowThenFull
}

// holdAppendsInPebble opens a log with opts (its FS, MemTableSize and Logger set here) whose flush waits for a slow
// disk (the table's writes wait for fillDisk) while appends fill the next memtable, and returns once Pebble holds an
// append back inside it, the log's lock held: a slow disk that then fills up, when the flush fails. before, when set,
// is called with the log before the appends start. The disk gets its space back at the test's end, so that the flush
// and the held append end and the store closes.
func holdAppendsInPebble(t *testing.T, opts Options, before func(*Log)) *heldAppends {
	h := &heldAppends{mem: vfs.NewCrashableMem(), disk: disktest.NewSlowThenFull()}
	toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		return h.disk.Fault(op.Path, op.Kind.ReadOrWrite() == errorfs.OpIsWrite)
	})}
	stalls := disktest.NewStallWatch(nil)
	opts.FS, opts.MemTableSize = errorfs.Wrap(h.mem, toggle), 256<<10
	opts.Logger = slog.New(slog.NewTextHandler(stalls, nil))
	l, err := Open("db", &opts)
	require.NoError(t, err)
	h.l = l
	toggle.On()
	t.Cleanup(func() {
		h.disk.Free()
		_ = l.Close()
	})

	if before != nil {
		before(l)
	}
	appended := appendMemTablesOf4KiB(l, &h.acked)
	// NB: the one appender logs the stall on its way into Pebble's wait for the flush, which waits for the disk: from
	// then on it is held, the log's lock with it, until fillDisk.
	stalls.Wait(t, appended)
	n, _ := l.stalls.read(time.Now())
	require.Positive(t, n, "the stall is counted")
	select {
	case err := <-appended:
		t.Fatalf("the appends were not held back: %v", err)
	default:
	}
	return h
}

// fillDisk lets the flush's table write go on, and the disk refuse it: the flush fails, the append held for good.
func (h *heldAppends) fillDisk() { h.disk.Fill() }

// appendMemTablesOf4KiB appends four memtables' worth of 4 KiB events to l (Pebble holds writes back once two are
// queued for the flush) on a goroutine of its own, keeping the last acknowledged position in acked, and sends the
// first error, or nil, once it is done.
func appendMemTablesOf4KiB(l *Log, acked *atomic.Uint64) <-chan error {
	payload := make([]byte, 4<<10)
	appended := make(chan error, 1)
	go func() {
		for i := 0; i < 256; i++ {
			pos, err := l.Append(Write{CommandID: fmt.Sprint(i), Events: []Event{{Stream: "run", Type: "test.big",
				Payload: payload}}})
			if err != nil {
				appended <- err
				return
			}
			acked.Store(pos)
		}
		appended <- nil
	}()
	return appended
}

// requireHolds opens the store on fs and requires that it verify and hold every position up to acked.
func requireHolds(t *testing.T, fs vfs.FS, acked uint64) {
	t.Helper()
	r, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Verify(nil)
	require.NoError(t, err)
	pos, _ := r.Head()
	require.GreaterOrEqual(t, pos, acked, "every acknowledged append is held")
}
