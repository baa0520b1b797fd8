package natslog

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/logtest"
)

// The JetStream log passes the same conformance suite as the Pebble log; a
// copy is a new local log that copied the stream.
func TestJetStreamConformance(t *testing.T) {
	logtest.Run(t, func(t *testing.T) logtest.Backend {
		js := connect(t, startServer(t))
		l := openLog(t, js)
		return logtest.Backend{
			Commit: l.Commit,
			Local:  l.Local(),
			Copy: func(t *testing.T) *eventlog.Log {
				local, err := eventlog.Open(filepath.Join(t.TempDir(), "copy"), nil)
				require.NoError(t, err)
				c, err := Open(context.Background(), js, local, testConfig)
				require.NoError(t, err)
				_, err = c.CatchUp(context.Background())
				require.NoError(t, err)
				return local
			},
		}
	})
}
