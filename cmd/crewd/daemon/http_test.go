package daemon

import (
	"bytes"
	"log/slog"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/httpapi"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// TestStartHTTPAddressInUse: the default address taken (another crewd) only turns HTTP off, with a warning; an
// address given explicitly that is taken stops the start.
func TestStartHTTPAddressInUse(t *testing.T) {
	l, err := eventlog.Open(filepath.Join(t.TempDir(), "store"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	eng, err := commands.Open(l, commands.Options{SnapshotEvery: -1, ExpiryInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { eng.Close() })
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()

	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := Config{DataDir: t.TempDir(), HTTPAddr: taken.Addr().String()}
	web, err := startHTTP(cfg, eng, l, nil, httpapi.NewMetrics(), "", nil, lg)
	require.NoError(t, err)
	require.Nil(t, web)
	require.Contains(t, logs.String(), "serving without HTTP")

	cfg.HTTPAddrSet = true
	_, err = startHTTP(cfg, eng, l, nil, httpapi.NewMetrics(), "", nil, lg)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.ErrorContains(t, err, "--http")

	cfg.HTTPAddr = ""
	web, err = startHTTP(cfg, eng, l, nil, httpapi.NewMetrics(), "", nil, lg)
	require.NoError(t, err)
	require.Nil(t, web, `--http "" turns HTTP off`)
}
