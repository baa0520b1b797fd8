package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/projections"
)

// A node whose disk is short of space becomes the writer when the engine config it puts in force is the one the log
// holds already: putting it in force writes nothing, where it was refused disk-full and the node failed, so no node
// short of space could ever take over. A config that changes the one in force must be recorded, which the full disk
// refuses: that promotion still fails, with ErrNoSpace.
func TestAPromotionShortOfSpaceNeedsNoWriteForTheConfigInForce(t *testing.T) {
	inForce := projections.DefaultConfig()
	inForce.MaxDepth = 3
	changed := inForce
	changed.MaxDepth = 4
	for _, tc := range []struct {
		name    string
		config  projections.Config
		elected bool
	}{
		{"the config in force", inForce, true},
		{"a changed config", changed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startNATS(t)
			cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
			w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second,
				Engine: commands.Options{Config: &inForce}})
			head := w.Engine().Head()
			require.Positive(t, head, "the first writer recorded its config")
			w.Close()

			config := tc.config
			f := startOn(t, srv, Options{Name: "f", Log: cfg, LeaseTTL: time.Second,
				Engine: commands.Options{Space: lowSpace{}, Config: &config}})
			select {
			case <-f.Elected():
				require.True(t, tc.elected, "elected, recording a changed config on a full disk")
				require.Equal(t, head, f.Engine().Head(), "nothing was written")
				var got projections.Config
				f.Engine().Read(func(s *projections.State) { got = s.Config() })
				require.True(t, commands.SameConfig(inForce, got))
			case <-f.Failed():
				require.False(t, tc.elected, "failed: %v", f.Err())
				require.ErrorIs(t, f.Err(), commands.ErrNoSpace)
			case <-time.After(20 * time.Second):
				t.Fatal("neither elected nor failed")
			}
		})
	}
}
