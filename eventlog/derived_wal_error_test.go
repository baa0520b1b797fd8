package eventlog

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// A write that does not wait for its sync, of derived data (a view, summaries) or an unsynced copy's append
// (AppendFromUnsynced), whose bytes fail to reach the WAL — a full disk met by the WAL's background write, EIO —
// fails the log stop, as an append's failure does: the next write learns it, and it and every later one are refused
// (ErrFailed) rather than handed to Pebble, whose WAL keeps the error and panics on the next record that meets it;
// the reopened store holds every acknowledged append, and no source sequence of a lost copied group. The error is
// gone before the next write: a disk with space again does not mend a WAL that lost a write.
func TestUnsyncedWriteOnAFailingWALFailsStop(t *testing.T) {
	big := make([]byte, 40<<10) // more than a WAL block (32 KiB): each write of it moves the WAL to a new block
	ops := bigUnsyncedWrites(big)
	ops["summaries"] = func(l *Log) error {
		return l.SaveSummaries([]Summary{{Stream: "run", Ord: 1, Position: 20, Data: big}})
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			toggle, injected := walWriteFaults()
			l := openTenAcked(t, mem, toggle)

			toggle.On()
			if err := op(l); err != nil { // NB: its sync is not awaited; one before it (the index's count) may be
				require.ErrorIs(t, err, ErrFailed)
			}
			// NB: an unsynced copy's group is served until the failure is learnt: its source holds it.
			served, _ := l.Head()
			<-injected // the WAL's write of it failed, in Pebble's background
			toggle.Off()
			// NB: each write moves the WAL to a new block, where Pebble takes up the error of its background write;
			// the write after that meets it.
			later := make([]error, 8)
			for i := range later {
				require.NotPanics(t, func() { later[i] = op(l) }, "write %d after the failure", i)
			}
			var appendErr error
			require.NotPanics(t, func() { _, appendErr = l.Append(Write{CommandID: "after", Events: evs("run", 1)}) })
			for i, err := range later {
				require.ErrorIs(t, err, ErrFailed, "write %d after the failure", i)
			}
			require.ErrorIs(t, appendErr, ErrFailed, "the log failed stop")
			pos, _ := l.Head()
			require.Equal(t, served, pos, "nothing written after the failure is served")
			_ = l.Close()

			r := reopenTenAcked(t, mem)
			defer r.Close()
			src, err := r.Source()
			require.NoError(t, err)
			require.Zero(t, src, "the copy resumes before the group it lost")
			pos, _ = r.Head()
			require.EqualValues(t, 20, pos)
			require.NoError(t, op(r), "reopen recovers")
		})
	}
}

// Creating a store on a disk whose sync fails is an error of Open, not a panic: the format marker is the first
// write of a new store, and Pebble's synced write treats a failed sync as fatal.
func TestOpenOfANewStoreWhoseSyncFailsIsAnError(t *testing.T) {
	toggle := walFaults(walSyncOps...)
	toggle.On()
	require.NotPanics(t, func() {
		_, err := Open("db", &Options{FS: errorfs.Wrap(vfs.NewMem(), toggle)})
		require.ErrorIs(t, err, ErrFailed)
	})
}

// A write that does not wait for its sync, whose bytes fail to reach the WAL, fails the log stop once its sync has
// failed, with no later write to learn it: Failed tells of it, and Err says why. A writer that stops with its log
// (the commands engine) learns the failure of the last view or summary of a pass, not at its next write, however
// long that is in coming.
func TestAWriteLeftUnsyncedFailsTheLogWithoutALaterWrite(t *testing.T) {
	writes := map[string]func(l *Log) error{
		"view": func(l *Log) error { return l.SaveView("run", 20, []byte("v")) },
		"unsynced copy": func(l *Log) error {
			_, err := l.AppendFromUnsynced(1, Write{Events: evs("run", 1)})
			return err
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			toggle, _ := walWriteFaults()
			l := openTenAcked(t, vfs.NewMem(), toggle)
			defer l.Close()
			require.NoError(t, l.Err())
			toggle.On()
			requireLeftUnsynced(t, write(l))
			select {
			case <-l.Failed():
			case <-time.After(10 * time.Second):
				t.Fatal("the log did not fail stop")
			}
			toggle.Off()
			require.ErrorIs(t, l.Err(), errorfs.ErrInjected)
			_, err := l.Append(Write{Events: evs("run", 1)})
			require.ErrorIs(t, err, ErrFailed)
		})
	}
}

// Synced appends (Append, Stage, AppendFrom) made at once after a write left unsynced whose bytes failed to reach the
// WAL, before the failed sync after that write is recorded, are refused (ErrFailed) and the log fails stop: each
// awaits that sync before it hands its batch to Pebble. The WAL keeps the error and takes it up at the next record
// that starts a new block; Pebble panics on the record after that, here a second append staged while the first syncs
// (the engine stages its next group so). The background waiter of the sync is held back, so the appends come before
// the failure is recorded. (Summaries are written as a view is; their count's write, made first, awaits that sync in
// the same call.)
func TestSyncedAppendsAfterAFailedUnsyncedWriteAwaitItsSync(t *testing.T) {
	big := make([]byte, 40<<10) // more than a WAL block (32 KiB): each write of it moves the WAL to a new block
	unsynced := bigUnsyncedWrites(big)
	bigWrite := func(id string) Write {
		return Write{CommandID: id, Events: []Event{{Stream: "run", Type: "test.big", Payload: big}}}
	}
	next := map[string]func(l *Log) error{
		"append": func(l *Log) error { _, err := l.Append(bigWrite("second")); return err },
		"stage": func(l *Log) error {
			s, err := l.Stage(bigWrite("second"))
			if err != nil {
				return err
			}
			_, err = s.Wait()
			return err
		},
		"append from": func(l *Log) error { _, err := l.AppendFrom(2, bigWrite("second")); return err },
	}
	for uname, write := range unsynced {
		for nname, appendNext := range next {
			t.Run(uname+" then stage and "+nname, func(t *testing.T) {
				mem := vfs.NewMem()
				toggle, injected := walWriteFaults()
				reached, release := make(chan struct{}), make(chan struct{})
				var once sync.Once
				l, err := Open("db", &Options{FS: errorfs.Wrap(mem, toggle), beforeDerivedSyncOutcome: func() {
					once.Do(func() { close(reached); <-release })
				}})
				require.NoError(t, err)
				for i := 0; i < 10; i++ {
					_, err := l.Append(Write{CommandID: fmt.Sprintf("ok-%d", i), Events: evs("run", 2)})
					require.NoError(t, err)
				}

				toggle.On()
				pending := requireLeftUnsynced(t, write(l))
				<-injected
				toggle.Off()
				if pending {
					<-reached // its sync is over, its failure not yet recorded
				}

				type result struct {
					first, next error
					panicked    any
				}
				done := make(chan result, 1)
				go func() {
					var r result
					defer func() { r.panicked = recover(); done <- r }()
					s, err := l.Stage(bigWrite("first"))
					r.next = appendNext(l)
					if r.first = err; err == nil {
						_, r.first = s.Wait()
					}
				}()
				var r result
				returned := false
				select {
				case r = <-done: // NB: the appends did not wait for the pending sync
					returned = true
				case <-time.After(200 * time.Millisecond):
				}
				close(release)
				if !returned {
					r = <-done
				}
				require.Nil(t, r.panicked, "an append reached Pebble's WAL after its write error")
				require.ErrorIs(t, r.first, ErrFailed)
				require.ErrorIs(t, r.next, ErrFailed)
				requireFailedStopWithoutTrace(t, l, mem, "first", "second")
			})
		}
	}
}

// Synced writes on their way to Pebble, with no sync pending, when a write made without one (a view, an unsynced
// copy's append) overtakes them and its bytes fail to reach the WAL, are refused (ErrFailed) and the log fails stop:
// none meets the WAL's error, which Pebble takes up at the next record that starts a new block (the first write's)
// and panics on at the record after that (the second's); nor does a third, once the failure is recorded. The writes
// are held just before their hand-off while the write is made, and the failure of its sync is held back from being
// recorded until they have had their chance to reach Pebble: each must await that sync, and check for it in one step
// with its hand-off. So must a synced write that is not an append (a snapshot's sync of the WAL, a count of
// summaries, a format step's last batch).
func TestSyncedWritesRacingAFailedUnsyncedWriteDoNotMeetItsError(t *testing.T) {
	big := make([]byte, 40<<10) // more than a WAL block (32 KiB): each write of it moves the WAL to a new block
	// Each synced write returns what awaits its sync, if it is left to await.
	synced := map[string]func(l *Log, id string) (wait func() error, err error){
		"stage": func(l *Log, id string) (func() error, error) {
			s, err := l.Stage(Write{CommandID: id, Events: []Event{{Stream: "run", Type: "test.big", Payload: big}}})
			if err != nil {
				return nil, err
			}
			return func() error { _, err := s.Wait(); return err }, nil
		},
		"commit synced": func(l *Log, _ string) (func() error, error) { // as a snapshot's, a summaries count's
			b := l.db.NewBatch()
			_ = b.LogData(big, nil)
			return nil, l.commitSynced(b)
		},
	}
	for uname, write := range bigUnsyncedWrites(big) {
		for sname, syncedWrite := range synced {
			t.Run(uname+" overtaking "+sname, func(t *testing.T) {
				mem := vfs.NewMem()
				toggle, injected := walWriteFaults()
				reached, release := make(chan struct{}), make(chan struct{})
				var once sync.Once
				var hold atomic.Bool
				atHandOff := make(chan chan struct{})
				l, err := Open("db", &Options{FS: errorfs.Wrap(mem, toggle),
					beforeDerivedSyncOutcome: func() { once.Do(func() { close(reached); <-release }) },
					beforeSyncedHandOff: func() {
						if hold.Load() {
							gate := make(chan struct{})
							atHandOff <- gate
							<-gate
						}
					},
				})
				require.NoError(t, err)
				for i := 0; i < 10; i++ {
					_, err := l.Append(Write{CommandID: fmt.Sprintf("ok-%d", i), Events: evs("run", 2)})
					require.NoError(t, err)
				}

				type handedOff struct {
					wait     func() error
					err      error
					panicked any
				}
				hold.Store(true)
				ids := []string{"first", "second", "third"}
				handOffs := make(chan handedOff, len(ids))
				for _, id := range ids {
					go func() {
						var r handedOff
						defer func() { r.panicked = recover(); handOffs <- r }()
						r.wait, r.err = syncedWrite(l, id)
					}()
				}
				gates := make([]chan struct{}, len(ids))
				for i := range gates {
					gates[i] = <-atHandOff // on its way, nothing pending
				}
				hold.Store(false)

				toggle.On()
				pending := requireLeftUnsynced(t, write(l))
				<-injected
				toggle.Off()
				if pending {
					<-reached // its sync is over, its failure not yet recorded
				}

				var got []handedOff
				for _, gate := range gates { // one at a time, each handed off behind the one before
					close(gate)
					select {
					case r := <-handOffs:
						got = append(got, r)
					case <-time.After(200 * time.Millisecond): // NB: it awaits the pending sync
					}
				}
				close(release)
				for len(got) < len(gates) {
					got = append(got, <-handOffs)
				}
				for i, r := range got {
					require.Nil(t, r.panicked, "write %d reached Pebble's WAL after its write error", i)
					if r.err == nil && r.wait != nil {
						r.err = r.wait()
					}
					require.ErrorIs(t, r.err, ErrFailed, "write %d", i)
				}
				requireFailedStopWithoutTrace(t, l, mem, ids...)
			})
		}
	}
}

// requireFailedStopWithoutTrace requires that l failed stop on an injected error, closes it, and requires that the
// store reopened from mem holds the ten acknowledged appends and none of the refused commands.
func requireFailedStopWithoutTrace(t *testing.T, l *Log, mem vfs.FS, refused ...string) {
	t.Helper()
	select {
	case <-l.Failed():
	default:
		t.Fatal("the log did not fail stop")
	}
	require.ErrorIs(t, l.Err(), errorfs.ErrInjected)
	_ = l.Close()

	reopened := reopenTenAcked(t, mem)
	defer reopened.Close()
	for _, id := range refused {
		_, err := reopened.Outcome("", id)
		require.ErrorIs(t, err, ErrNotFound, "a refused append left no trace")
	}
}

// bigUnsyncedWrites are the writes made without a sync, a view and an unsynced copy's append (of the source sequence
// after the one the log recorded), each of big. NB: the sequence is the log's, not counted across calls: the writes
// serve the subtests of a test, each on a store of its own, whose synced AppendFrom after them names sequence 2.
func bigUnsyncedWrites(big []byte) map[string]func(l *Log) error {
	return map[string]func(l *Log) error{
		"view": func(l *Log) error { return l.SaveView("run", 20, big) },
		"unsynced copy": func(l *Log) error {
			last, err := l.Source()
			if err != nil {
				return err
			}
			_, err = l.AppendFromUnsynced(last+1, Write{Events: []Event{{Stream: "run", Type: "test.big", Payload: big}}})
			return err
		},
	}
}

// Writes handed to Pebble after a synced append whose bytes failed to reach the WAL, before that append's failed sync
// is awaited (Staged.Wait), are refused (ErrFailed) or fail with it, and none meets the WAL's error: Pebble takes it
// up at the next record that starts a new block and panics on the record after that, here the sync a view or an
// unsynced copy's append requests after its own record, or a second append staged behind a first (the engine stages
// its next group, and writes a cold run's view, while a group syncs). The log fails stop; every acknowledged append
// survives, and the appends that were not acknowledged left no trace.
func TestWritesAfterAFailedAppendWhoseFailureIsNotYetAwaitedDoNotMeetItsError(t *testing.T) {
	big := make([]byte, 40<<10) // more than a WAL block (32 KiB): each write of it moves the WAL to a new block
	writes := bigUnsyncedWrites(big)
	var staged []*Staged // NB: waited for once the first append's failure is: Close waits for them
	writes["stage"] = func(l *Log) error {
		s, err := l.Stage(Write{CommandID: fmt.Sprintf("next-%d", len(staged)+1), Events: []Event{{Stream: "run",
			Type: "test.big", Payload: big}}})
		if err == nil {
			staged = append(staged, s)
		}
		return err
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			toggle, injected := walWriteFaults()
			l := openTenAcked(t, mem, toggle)

			toggle.On()
			s, err := l.Stage(Write{CommandID: "first", Events: []Event{{Stream: "run", Type: "test.big", Payload: big}}})
			require.NoError(t, err)
			<-injected // its WAL write failed, in Pebble's background
			toggle.Off()
			for i := 0; i < 2; i++ {
				require.NotPanics(t, func() { _ = write(l) }, "write %d after the failure", i)
			}
			_, err = s.Wait()
			require.ErrorIs(t, err, ErrFailed)
			for _, next := range staged {
				_, err = next.Wait()
				require.ErrorIs(t, err, ErrFailed, "an append staged behind it")
			}
			staged = nil
			require.NotPanics(t, func() { require.ErrorIs(t, write(l), ErrFailed) }, "a write once the failure is known")
			requireFailedStopWithoutTrace(t, l, mem, "first", "next-1", "next-2", "next-3")
		})
	}
}

// requireLeftUnsynced requires that err, of a write made without a sync while the WAL's writes fail, be nil, or
// ErrFailed when its WAL write failed in Pebble's background before it requested its sync; it reports whether it
// requested its sync.
func requireLeftUnsynced(t *testing.T, err error) (syncRequested bool) {
	t.Helper()
	if err != nil {
		require.ErrorIs(t, err, ErrFailed, "its WAL write is Pebble's background's")
		return false
	}
	return true
}
