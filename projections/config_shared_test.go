package projections

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// SharedConfig is Config without the copy of its model catalog: the writer reads the config for every command it
// decides, and Config's copy of a configured catalog cost an allocation each time.
func TestSharedConfigCopiesNoCatalog(t *testing.T) {
	var h history
	cfg := DefaultConfig()
	cfg.ModelCatalog = []string{"anthropic/m1", "anthropic/m2"}
	h.add(events.EngineStream, events.TypeEngineConfigured, cfg.Event())
	s := fold(h.evs)

	require.Equal(t, s.Config(), s.SharedConfig())
	require.Equal(t, cfg.ModelCatalog, s.SharedConfig().ModelCatalog)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = s.SharedConfig() }))
}
