package commands

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// panicking is a command whose decision panics with v.
type panicking struct{ v any }

func (panicking) Kind() string { return "test.panic" }

func (p panicking) decide(*projections.State, *Env) (Decision, error) { panic(p.v) }

// A decision that meets a Pebble fatal error (a cold run read back from the log that fails its checksum) is not
// answered as a command that panicked while the writer goes on: the store answers nothing more, and the panic is
// raised again, so that crewd exits for its supervisor to restart it. Any other panic is the command's error.
func TestADecisionsPebbleFatalIsRaisedAgain(t *testing.T) {
	fatal := &eventlog.FatalError{Msg: "pebble: corruption", Err: syscall.EIO}
	require.PanicsWithValue(t, fatal, func() { _, _ = decideSafely(projections.New(), panicking{fatal}, &Env{}) })

	_, err := decideSafely(projections.New(), panicking{"a bad command"}, &Env{})
	require.EqualError(t, err, "commands: test.panic panicked: a bad command")
}

// A Pebble fatal error that a goroutine of the process recovered (crewd's recover none: this is what they would
// leave) stops the engine at once, as a failed commit does, and the next command is answered ErrFailed, where the
// engine went on, its next commit waited inside Pebble for good and so did every command after it.
func TestAnEngineStopsAtItsLogsPebbleFatal(t *testing.T) {
	manifestWrites := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.Contains(op.Path, "MANIFEST") && op.Kind == errorfs.OpFileWrite {
			return syscall.ENOSPC
		}
		return nil
	})}
	f := openEngineWith(t, errorfs.Wrap(vfs.NewMem(), manifestWrites), newTestClock(), Options{})
	f.do(&RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"})

	manifestWrites.On()
	fatal := func() (p any) {
		defer func() { p = recover() }()
		_ = f.log.SaveSnapshot(f.eng.Head(), make([]byte, 1<<20)) // its ingestion edits the MANIFEST
		return nil
	}()
	manifestWrites.Off()
	require.IsType(t, &eventlog.FatalError{}, fatal)

	answered := make(chan error, 1)
	go func() {
		_, err := f.eng.Submit(context.Background(), Request{Actor: orchestrator,
			Command: &RunTransition{RunID: "R", To: "running"}})
		answered <- err
	}()
	select {
	case err := <-answered:
		require.ErrorIs(t, err, ErrFailed)
	case <-time.After(10 * time.Second):
		f.eng = nil // NB: not closed: its Close would wait for good for the writer held in Pebble
		t.Fatal("the command waits inside Pebble")
	}
	select {
	case <-f.eng.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not stop with its log")
	}
	require.ErrorContains(t, f.eng.Err(), "eventlog: pebble fatal: MANIFEST")
}
