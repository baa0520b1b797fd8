package eventlog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// Two appends staged one after the other get their positions, versions and
// chain in Stage order, and neither is visible to any reader (Head, Read,
// ReadStream, Event, Outcome, the stream catalog) before its own Wait: a
// caller that prepares the next append while one syncs never lets a reader
// see what is not durable.
func TestStagedAppendsAreInvisibleUntilWaited(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	_, err := l.Append(Write{CommandID: "before", Events: evs("run", 2)})
	require.NoError(t, err)

	first := Write{Principal: "p", CommandID: "a", Events: evs("run", 3)}
	second := Write{Principal: "p", CommandID: "b", Events: evs("new", 2)}
	sa, err := l.Stage(first)
	require.NoError(t, err)
	sb, err := l.Stage(second)
	require.NoError(t, err)
	require.EqualValues(t, 3, sa.First())
	require.EqualValues(t, 6, sb.First(), "a later Stage is ordered after the earlier one")
	require.EqualValues(t, 4, first.Events[1].Position)
	require.EqualValues(t, 5, first.Events[2].StreamVersion)
	require.EqualValues(t, 1, second.Events[0].StreamVersion)

	invisibleAfter := func(pos uint64, ids ...string) {
		t.Helper()
		head, _ := l.Head()
		require.Equal(t, pos, head)
		require.Len(t, readAll(t, l), int(pos))
		_, err := l.Event(pos + 1)
		require.ErrorIs(t, err, ErrNotFound)
		it := l.ReadStream("new", 1)
		require.False(t, it.Next(), "a staged stream's events are not read")
		require.NoError(t, it.Close())
		for _, id := range ids {
			_, err := l.Outcome("p", id)
			require.ErrorIs(t, err, ErrNotFound, "outcome %s before its sync", id)
		}
	}
	invisibleAfter(2, "a", "b")
	_, err = l.Append(Write{Principal: "p", CommandID: "b", Events: evs("run", 1)})
	require.ErrorIs(t, err, ErrDuplicateCommand, "a staged command id is taken")

	got, err := sa.Wait()
	require.NoError(t, err)
	require.EqualValues(t, 3, got)
	invisibleAfter(5, "b")
	o, err := l.Outcome("p", "a")
	require.NoError(t, err)
	require.EqualValues(t, 3, o.First)

	got, err = sb.Wait()
	require.NoError(t, err)
	require.EqualValues(t, 6, got)
	head, _ := l.Head()
	require.EqualValues(t, 7, head)
	_, err = l.Outcome("p", "b")
	require.NoError(t, err)
	_, err = l.Verify(nil)
	require.NoError(t, err, "the chain runs through both in Stage order")
}

// A failed WAL sync under a staged append fails its Wait and the Wait of
// every append staged after it; nothing of either is ever served as
// durable, and the store reopens to a consistent prefix that holds every
// append acknowledged before.
func TestStagedSyncFailureFailsTheLaterStages(t *testing.T) {
	mem := vfs.NewCrashableMem()
	toggle := walFaults(walSyncOps...)
	l := openTenAcked(t, mem, toggle)

	toggle.On()
	sa, err := l.Stage(Write{CommandID: "doomed-a", Events: evs("run", 3)})
	require.NoError(t, err)
	sb, errB := l.Stage(Write{CommandID: "doomed-b", Events: evs("run", 1)})
	_, err = sa.Wait()
	require.ErrorIs(t, err, ErrFailed)
	if errB == nil {
		_, errB = sb.Wait()
	}
	require.ErrorIs(t, errB, ErrFailed, "an append staged after a failed one never succeeds")
	toggle.Off()
	pos, _ := l.Head()
	require.EqualValues(t, 20, pos, "neither failed append is served as durable")
	_, err = l.Outcome("", "doomed-a")
	require.ErrorIs(t, err, ErrNotFound)
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	_ = l.Close()

	r, err := Open("db", &Options{FS: crashed})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Verify(nil)
	require.NoError(t, err)
	head, _ := r.Head()
	require.EqualValues(t, 20, head, "a crash keeps exactly the synced prefix")
	for i := 0; i < 10; i++ {
		_, err := r.Outcome("", fmt.Sprintf("ok-%d", i))
		require.NoError(t, err)
	}
}

// A lookup that checked a command id's pending appends before the id was staged, and reads Pebble after the hand-off,
// reports it not found until its Wait, as a lookup made after the Stage does, where it answered the outcome Pebble
// shows from the hand-off on, before the sync: one whose sync then failed was answered as recorded, and a retry
// told of a command the store never held.
func TestAnOutcomeReadAcrossAStageIsNotFoundUntilItsWait(t *testing.T) {
	reading, read := make(chan struct{}), make(chan struct{})
	var opts Options
	opts.FS = vfs.NewMem()
	opts.beforeOutcomeRead = func() {
		close(reading)
		<-read
	}
	l, err := Open("db", &opts)
	require.NoError(t, err)
	defer l.Close()

	looked := make(chan error, 1)
	go func() {
		// NB: before the first append, so that the outcome filter (not yet built) proves nothing and Pebble is read.
		_, err := l.Outcome("p", "a")
		looked <- err
	}()
	<-reading
	s, err := l.Stage(Write{Principal: "p", CommandID: "a", Events: evs("run", 1)})
	require.NoError(t, err)
	close(read)
	lookup := <-looked
	l.opts.beforeOutcomeRead = nil
	_, err = s.Wait() // NB: before the test may stop: Close waits for it
	require.NoError(t, err)
	require.ErrorIs(t, lookup, ErrNotFound, "the outcome before its Wait")

	o, err := l.Outcome("p", "a")
	require.NoError(t, err)
	require.EqualValues(t, 1, o.First)
}

// An append's command id is being recorded from before its hand-off to Pebble, which shows the batch to readers
// before its sync: a lookup made once Pebble holds the batch, and before the append is done staging, answers it
// not found (being recorded) from the outcome table it reads, until its Wait. Marked pending only after the
// hand-off, it was answered as recorded in that gap: one whose sync then failed as well, a command the store never
// held.
func TestAnOutcomeHandedToPebbleIsBeingRecordedFromItsHandOff(t *testing.T) {
	var opts Options
	opts.FS = vfs.NewMem()
	var l *Log
	lookup := errors.New("not looked up")
	opts.afterHandOff = func() {
		// NB: the first append, so that the outcome filter (not yet built) proves nothing and Pebble is read.
		_, lookup = l.Outcome("p", "a")
	}
	l, err := Open("db", &opts)
	require.NoError(t, err)
	defer l.Close()

	s, err := l.Stage(Write{Principal: "p", CommandID: "a", Events: evs("run", 1)})
	require.NoError(t, err)
	l.opts.afterHandOff = nil
	_, err = s.Wait() // NB: before the test may stop: Close waits for it
	require.NoError(t, err)
	require.ErrorIs(t, lookup, ErrNotFound, "the outcome Pebble shows before its sync")
	require.ErrorContains(t, lookup, "being recorded")

	o, err := l.Outcome("p", "a")
	require.NoError(t, err)
	require.EqualValues(t, 1, o.First)
}
