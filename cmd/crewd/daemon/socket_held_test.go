package daemon

import (
	"context"
	"io"
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
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	r, w := io.Pipe()
	go func() { ended <- Run(ctx, first, w, discard()); w.Close() }()
	t.Cleanup(func() { cancel(); go func() { _, _ = io.Copy(io.Discard, r) }(); require.NoError(t, <-ended) })
	_, err := r.Read(make([]byte, 1)) // its first line comes once it serves
	require.NoError(t, err)

	second := testConfig(t)
	second.SocketPath = first.SocketPath
	second.DataDir = filepath.Join(t.TempDir(), "other")
	served, err := runUntilServed(second)
	require.False(t, served)
	require.ErrorIs(t, err, broker.ErrAlreadyServing)
	require.Contains(t, err.Error(), "another crewd")
	require.Contains(t, err.Error(), "--socket")
}
