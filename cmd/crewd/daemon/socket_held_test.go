package daemon

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
)

// TestRunOnASocketAnotherCrewdServesSaysSo: a second crewd, on a data directory of its own but the first one's
// socket, refuses to start and leaves that socket alone, and its error names the flag that chooses another, where
// "broker: PATH: already serving" said neither who serves nor what to do.
func TestRunOnASocketAnotherCrewdServesSaysSo(t *testing.T) {
	first := testConfig(t)
	running := startRun(t, first)
	t.Cleanup(func() { require.NoError(t, running.stop()) })

	second := testConfig(t)
	second.SocketPath = first.SocketPath
	second.DataDir = filepath.Join(t.TempDir(), "other")
	served, err := runUntilServed(second)
	require.False(t, served)
	require.ErrorIs(t, err, broker.ErrAlreadyServing)
	require.Contains(t, err.Error(), "another crewd")
	require.Contains(t, err.Error(), "--socket")
}
