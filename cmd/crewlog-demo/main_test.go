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
	l, err := audit.Open(dir)
	require.NoError(t, err)
	defer l.Close()
	rep, err := audit.Verify(l, nil)
	require.NoError(t, err)
	require.Empty(t, rep.Check.Problems)
	require.EqualValues(t, 5, rep.Store.Head)
}
