package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// TestRunHandsServingItsEngineAndLog: MainServing's hook gets the engine and the log crewd serves with, once its
// socket accepts connections: a command sent over the socket shows in that engine's counters and at that log's
// head, and the hook is called once.
func TestRunHandsServingItsEngineAndLog(t *testing.T) {
	mainUmask(t)
	c := testConfig(t)
	type handed struct {
		eng *commands.Engine
		log *eventlog.Log
	}
	calls := make(chan handed, 2)
	c.serving = func(e *commands.Engine, l *eventlog.Log) { calls <- handed{e, l} }
	d := startRun(t, c)
	var h handed
	select {
	case h = <-calls:
	default:
		require.FailNow(t, "crewd served without calling serving")
	}
	groups := h.eng.Stats().Groups
	head, _ := h.log.Head()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := dialAdmin(ctx, t, c.DataDir, c.SocketPath, nil)
	defer admin.Close()
	require.NoError(t, admin.Call(ctx, "run.create", map[string]any{"team": "t", "goal": "g", "cwd": "/repo"}, nil))

	require.Greater(t, h.eng.Stats().Groups, groups, "the command committed through another engine")
	after, _ := h.log.Head()
	require.Greater(t, after, head, "the command was appended to another log")
	require.NoError(t, d.stop())
	require.Empty(t, calls, "serving was called more than once")
}
