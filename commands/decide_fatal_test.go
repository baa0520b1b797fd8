package commands

import (
	"syscall"
	"testing"

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
