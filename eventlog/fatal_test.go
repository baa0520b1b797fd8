package eventlog

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// A Pebble fatal error (here the version edit of a snapshot's ingestion meeting ENOSPC in the MANIFEST) that a
// goroutine recovered leaves a store that answers nothing more: an append on it waited inside Pebble for good. The
// log fails stop at the fatal, before the panic, and the panic is a *FatalError that wraps Pebble's error: every
// later write and read is refused (ErrFailed) at once, never reaching Pebble.
func TestAPebbleFatalFailsTheLogStopBeforeItPanics(t *testing.T) {
	full := manifestFull(errorfs.OpFileWrite)
	l, err := Open("db", &Options{FS: errorfs.Wrap(vfs.NewMem(), full)})
	require.NoError(t, err)
	_, err = l.Append(Write{CommandID: "a", Events: evs("run", 6)})
	require.NoError(t, err)

	full.On()
	fatal := func() (p any) {
		defer func() { p = recover() }()
		err = l.SaveSnapshot(6, incompressible(3*snapshotChunk, 1))
		return nil
	}()
	full.Off()
	require.NotNil(t, fatal, "the save was answered %v", err)
	fe, ok := fatal.(*FatalError)
	require.True(t, ok, "the panic value is %T: %v", fatal, fatal)
	require.ErrorIs(t, fe, syscall.ENOSPC)
	require.Contains(t, fe.Error(), "eventlog: pebble fatal: MANIFEST")
	select {
	case <-l.Failed():
	default:
		t.Fatal("the log did not fail stop at Pebble's fatal error")
	}
	require.ErrorAs(t, l.Err(), &fe)

	for _, c := range []struct {
		name string
		op   func() error
	}{
		{"append", func() error {
			_, err := l.Append(Write{CommandID: "b", Events: evs("run", 1)})
			return err
		}},
		{"view", func() error { return l.SaveView("run", 1, []byte("v")) }},
		{"summary", func() error {
			return l.SaveSummaries([]Summary{{Stream: "run", Position: 1, Data: []byte("s")}})
		}},
		{"snapshot", func() error { return l.SaveSnapshot(6, []byte("s")) }},
		{"event", func() error { _, err := l.Event(1); return err }},
		{"read", func() error {
			it := l.Read(1)
			defer it.Close()
			for it.Next() {
			}
			return it.Err()
		}},
		{"stream", func() error {
			it := l.ReadStream("run", 1)
			defer it.Close()
			for it.Next() {
			}
			return it.Err()
		}},
		{"outcome", func() error { _, err := l.Outcome("", "a"); return err }},
		{"latest snapshot", func() error { _, err := l.LatestSnapshot(); return err }},
		{"view read", func() error { _, _, err := l.View("run"); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { done <- c.op() }()
			select {
			case err := <-done:
				require.ErrorIs(t, err, ErrFailed)
				require.ErrorAs(t, err, new(*FatalError))
			case <-time.After(10 * time.Second):
				t.Fatal("it waits inside Pebble, which the fatal error left in doubt")
			}
		})
	}
}

// RepanicFatal panics again with a *FatalError, the one value a recover may not keep, and lets any other go.
func TestRepanicFatalPanicsAgainWithAFatalErrorOnly(t *testing.T) {
	fe := &FatalError{Msg: "MANIFEST write failed", Err: syscall.ENOSPC}
	require.PanicsWithValue(t, fe, func() { RepanicFatal(fe) })
	for _, v := range []any{nil, "eventlog: pebble fatal: a string", errors.New("x"), fmt.Errorf("w: %w", fe)} {
		require.NotPanics(t, func() { RepanicFatal(v) }, "%v", v)
	}
}
