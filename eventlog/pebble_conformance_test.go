package eventlog_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/logtest"
)

// The Pebble log passes the log contract's conformance suite; a copy is a
// checkpoint of the store.
func TestPebbleConformance(t *testing.T) {
	logtest.Run(t, func(t *testing.T) logtest.Backend {
		dir := t.TempDir()
		l, err := eventlog.Open(filepath.Join(dir, "db"), nil)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		n := 0
		return logtest.Backend{
			Commit: func(ws []eventlog.Write) (uint64, error) { return l.Append(ws...) },
			Local:  l,
			Copy: func(t *testing.T) *eventlog.Log {
				n++
				cp := filepath.Join(dir, "copy-"+string(rune('a'+n)))
				require.NoError(t, l.Checkpoint(cp))
				c, err := eventlog.Open(cp, &eventlog.Options{ReadOnly: true})
				require.NoError(t, err)
				return c
			},
		}
	})
}
