package daemon

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoadPrecedence: a setting comes from a flag, else the --config file, else the --picrew-config file, else its
// default, as --help says ("--config and flags override it"). Each source sets a value none of the others does.
func TestLoadPrecedence(t *testing.T) {
	picrew := writeFile(t, "pi-crew.json", `{"nesting": {"maxDepth": 3, "maxSlots": 4}, "broker": {"outboundQueueCap": 64, "maxFrameBytes": 4096}}`)
	config := writeFile(t, "crewd.json", `{"max-depth": 5, "max-slots": 6, "outbound-queue-cap": 128}`)
	c, err := Load([]string{"--picrew-config", picrew, "--config", config, "--max-slots", "7"}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, 7, c.Engine.MaxSlots, "a flag overrides both files")
	require.Equal(t, 5, c.Engine.MaxDepth, "the config file overrides the pi-crew file")
	require.Equal(t, 128, c.OutboundQueueCap, "the config file overrides the pi-crew file")
	require.Equal(t, 4096, c.MaxFrame, "the pi-crew file overrides the default")
	require.Empty(t, c.Warnings)
}
