package commands

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/disktest"
)

// A log that fails stop under the engine by a write the engine did not make — a view or a summary, whose write to
// the WAL failed in Pebble's background — stops the engine at once, as a failed append does: Err and Failed say so
// (crewd's readiness, its exit for a restart), where an idle engine went on reporting itself ready, and holding a
// cluster's writer lease, until a command met the failed log.
func TestAnEngineStopsWhenItsLogFailsStop(t *testing.T) {
	walWrites := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") &&
			(op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt) {
			return errorfs.ErrInjected
		}
		return nil
	})}
	f := openEngineWith(t, errorfs.Wrap(vfs.NewMem(), walWrites), newTestClock(), Options{})
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	require.NoError(t, f.eng.Err())

	walWrites.On()
	if err := f.log.SaveView("R", 1, []byte("v")); err != nil { // NB: its WAL write is Pebble's background's
		require.ErrorIs(t, err, eventlog.ErrFailed, "its WAL write failed before it requested its sync")
	}
	require.ErrorIs(t, f.log.SaveView("R", 1, []byte("v")), eventlog.ErrFailed, "the next write learns it")
	walWrites.Off()

	select {
	case <-f.eng.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not stop with its log")
	}
	require.ErrorIs(t, f.eng.Err(), ErrFailed)
	require.ErrorContains(t, f.eng.Err(), errorfs.ErrInjected.Error())
}

// A flush that fails under the engine — a disk full past crewd's space guard refuses the flush's table, while the
// WAL, its file recycled, still takes the commits — stops the engine at once, as a failed commit does: Err and
// Failed say so (crewd's readiness, its exit for a restart), and the engine and its log close. Where the log went on,
// the engine went on committing until Pebble held its writer back for good, waiting for a flush that never came, and
// neither the engine's Close nor the log's returned.
func TestAnEngineStopsWhenItsLogsFlushFails(t *testing.T) {
	tableWrites := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	})}
	fs := errorfs.Wrap(vfs.NewMem(), tableWrites)
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs, MemTableSize: 256 << 10})
	require.NoError(t, err)
	e, err := Open(l, Options{Clock: newTestClock().Now, NewID: counterIDs(), ExpiryInterval: -1})
	require.NoError(t, err)

	tableWrites.On()
	submitted := submitMemTablesOfRuns(e)
	select {
	case <-e.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not stop with its log")
	}
	require.ErrorIs(t, e.Err(), ErrFailed)
	require.ErrorContains(t, e.Err(), syscall.ENOSPC.Error())
	select {
	case err := <-submitted:
		require.ErrorIs(t, err, ErrFailed, "the commands after the failure are refused")
	case <-time.After(10 * time.Second):
		t.Fatal("a command waits in Pebble for the flush")
	}
	// NB: a writer held inside Pebble, once two memtables queued before the flush failed, returns only once the
	// disk has room again and the flush's retry lands (crewd bounds its wait for it: closeStore).
	tableWrites.Off()
	closed := make(chan error, 1)
	go func() {
		e.Close()
		closed <- l.Close()
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine or its log does not close")
	}
}

// A flush that fails only after Pebble held the engine's commit back (its second memtable full, queued for the
// flush), the writer waiting inside Pebble for good, stops the engine all the same: Failed closes and Err says why,
// so that crewd exits, where neither the log nor the engine told of the failure, whose writer cannot; and the callers
// waiting for that writer, or for room in its queue, are answered with the failure (stuck), and so is a cluster
// follower's catch-up (CatchUp), where it waited for that writer for as long as its context lasted.
func TestAnEngineStopsWhenItsLogsFlushFailsWithItsWriterHeldInPebble(t *testing.T) {
	disk := disktest.NewSlowThenFull()
	tableWrites := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		return disk.Fault(op.Path, op.Kind.ReadOrWrite() == errorfs.OpIsWrite)
	})}
	held := disktest.NewStallWatch(nil)
	l, err := eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(vfs.NewMem(), tableWrites),
		MemTableSize: 256 << 10, Logger: slog.New(slog.NewTextHandler(held, nil))})
	require.NoError(t, err)
	graces := make(chan time.Duration, 1)
	e, err := Open(l, Options{Clock: newTestClock().Now, NewID: counterIDs(), ExpiryInterval: -1,
		hooks: &testHooks{stuckWriterGraceEnd: func(grace time.Duration) <-chan time.Time {
			graces <- grace
			over := make(chan time.Time)
			close(over) // NB: the writer is held for good here: the test need not wait the grace out
			return over
		}}})
	require.NoError(t, err)
	tableWrites.On()
	t.Cleanup(func() {
		disk.Free() // NB: so that the flush and the held commit end and the engine and log close
		e.Close()
		_ = l.Close()
	})

	submitted := submitMemTablesOfRuns(e)
	held.Wait(t, submitted)
	// More commands than the queue holds, the writer held: the last waits for room in the queue.
	queued := make(chan error, 1)
	go func() {
		rs := make([]Request, e.QueueCap()+2)
		for i := range rs {
			rs[i] = Request{Actor: admin, Command: &RunCreate{RunID: fmt.Sprintf("Q%d", i), Team: "t", Goal: "g",
				Cwd: "/w"}}
		}
		_, err := e.SubmitAll(context.Background(), rs)
		queued <- err
	}()
	caught := make(chan error, 1)
	go func() { caught <- e.CatchUp(context.Background()) }()
	disk.Fill()

	select {
	case <-e.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not stop with its log while its writer waits in Pebble")
	}
	require.ErrorIs(t, e.Err(), ErrFailed)
	require.ErrorContains(t, e.Err(), syscall.ENOSPC.Error())
	require.Equal(t, 2*time.Second, <-graces, "the writer held inside Pebble was left two seconds to stop")
	_, err = e.Submit(context.Background(), Request{Actor: admin, Command: &RunCreate{RunID: "after", Team: "t",
		Goal: "g", Cwd: "/w"}})
	require.ErrorIs(t, err, ErrFailed, "the commands after the failure are refused")
	select {
	case err := <-submitted:
		require.ErrorIs(t, err, ErrFailed, "the command held with the writer is answered with the failure")
	case <-time.After(5 * time.Second):
		t.Fatal("the command held with the writer inside Pebble is not answered")
	}
	select {
	case err := <-queued:
		require.ErrorIs(t, err, ErrFailed, "the commands waiting for room in the queue are answered with the failure")
	case <-time.After(5 * time.Second):
		t.Fatal("a command waiting for room in the queue of the writer held inside Pebble is not answered")
	}
	select {
	case err := <-caught:
		require.ErrorIs(t, err, ErrFailed, "the catch-up waiting for the writer is answered with the failure")
	case <-time.After(5 * time.Second):
		t.Fatal("a catch-up waiting for the writer held inside Pebble is not answered")
	}
}

// submitMemTablesOfRuns submits four memtables' worth of runs of a 4,000-byte goal to e (Pebble holds writes back
// once two are queued for the flush) on a goroutine of its own, and sends the first error, or nil, once it is done.
func submitMemTablesOfRuns(e *Engine) <-chan error {
	goal := strings.Repeat("g", 4000)
	submitted := make(chan error, 1)
	go func() {
		for i := 0; i < 256; i++ {
			_, err := e.Submit(context.Background(), Request{Actor: admin,
				Command: &RunCreate{RunID: fmt.Sprintf("R%d", i), Team: "t", Goal: goal, Cwd: "/w"}})
			if err != nil {
				submitted <- err
				return
			}
		}
		submitted <- nil
	}()
	return submitted
}
