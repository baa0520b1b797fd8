package audittest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestScenarioIsDeterministic writes the scenario twice and compares the
// records, hash chain included: goldens depend on it.
func TestScenarioIsDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	ha, hb := Scenario(t, a), Scenario(t, b)
	require.Equal(t, ha, hb)
	la, err := eventlog.Open(a, &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	defer la.Close()
	lb, err := eventlog.Open(b, &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	defer lb.Close()
	pa, hashA := la.Head()
	pb, hashB := lb.Head()
	require.Equal(t, pa, pb)
	require.Equal(t, hashA, hashB)
	s, _, err := projections.Load(la)
	require.NoError(t, err)
	require.Equal(t, ha, s.Position)
}
