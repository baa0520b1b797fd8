package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
)

// The demo's store is one the other tools read: it verifies, invariants
// included, and every payload decodes.
func TestDemoWritesAReadableStore(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, run(dir))
	requireVerified(t, dir, 5, 1)
}

// "-data DIR, a store of your choosing" is a store it may be run on again, at once: each run is a run of its own.
func TestDemoRunsAgainOnItsStore(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, run(dir))
	require.NoError(t, run(dir))
	requireVerified(t, dir, 10, 2)
}

// requireVerified opens the store in dir as crewctl verify does and requires it to verify with its head and streams.
func requireVerified(t *testing.T, dir string, head, streams int) {
	t.Helper()
	l, err := audit.Open(dir)
	require.NoError(t, err)
	defer l.Close()
	rep, err := audit.Verify(l, nil)
	require.NoError(t, err)
	require.Empty(t, rep.Check.Problems)
	require.EqualValues(t, head, rep.Store.Head)
	require.EqualValues(t, streams, rep.Store.Streams)
}
