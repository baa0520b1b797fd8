package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/brokertest"
)

// TestOutboundQueueBoundsMatchBroker: the flag's bounds are pi-crew's numbers, and must stay the broker's.
func TestOutboundQueueBoundsMatchBroker(t *testing.T) {
	require.Equal(t, broker.DefaultOutboundQueueCap, defaultOutboundQueueCap)
	require.Equal(t, broker.MinOutboundQueueCap, minOutboundQueueCap)
	require.Equal(t, broker.MaxOutboundQueueCap, maxOutboundQueueCap)
}

func TestMainExitStatus(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	sock := filepath.Join(brokertest.SocketDir(t), "crewd.sock")
	var out, errs bytes.Buffer

	require.Equal(t, ExitOK, Main([]string{"--help"}, &out, &errs))
	require.Contains(t, out.String(), "Usage: crewd [flags]")
	// A help that cannot be written (crewd --help > /dev/full) is a runtime error, not a success.
	require.Equal(t, ExitRuntime, Main([]string{"--help"}, failingWriter{}, &errs))
	require.Contains(t, errs.String(), "crewd: write the help: no space left on device")
	errs.Reset()

	require.Equal(t, ExitUsage, Main([]string{"--data", data, "--max-slots", "0"}, &out, &errs))
	require.Contains(t, errs.String(), "--max-slots: 0 is outside 1..64")
	require.NoDirExists(t, data)

	// A leaked admin token stops the start: a runtime error, reported before anything listens.
	require.NoError(t, os.MkdirAll(data, 0o700))
	tok := filepath.Join(data, AdminTokenFile)
	require.NoError(t, os.WriteFile(tok, []byte("tok\n"), 0o600))
	require.NoError(t, os.Chmod(tok, 0o644))
	errs.Reset()
	require.Equal(t, ExitRuntime, Main([]string{"--data", data, "--socket", sock}, &out, &errs))
	require.Contains(t, errs.String(), "has mode 0644")
	require.NoFileExists(t, sock)
}

// failingWriter fails every write as a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }
