package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
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
	l, eng := openEmptyEngine(t)
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

// TestStartHTTPSecureCookie: the dashboard's session cookie is Secure with --http-secure-cookie and not without:
// crewd serves plain HTTP, so it was never Secure, behind the TLS proxy the docs ask for either.
func TestStartHTTPSecureCookie(t *testing.T) {
	l, eng := openEmptyEngine(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	for _, secure := range []bool{false, true} {
		cfg := Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", HTTPAddrSet: true, HTTPSecureCookie: secure}
		web, err := startHTTP(cfg, eng, l, nil, httpapi.NewMetrics(), "", nil, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- web.Serve(context.Background()) }()
		link, _ := web.LoginURL()
		resp, err := noRedirect.Get(link)
		require.NoError(t, err)
		resp.Body.Close()
		require.NoError(t, web.Close())
		require.NoError(t, <-served)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Len(t, resp.Cookies(), 1)
		require.Equal(t, secure, resp.Cookies()[0].Secure, "--http-secure-cookie=%v: %s", secure,
			resp.Header.Get("Set-Cookie"))
	}
}

// openEmptyEngine opens an empty store and an engine over it, both closed when the test ends.
func openEmptyEngine(t *testing.T) (*eventlog.Log, *commands.Engine) {
	t.Helper()
	l, err := eventlog.Open(filepath.Join(t.TempDir(), "store"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	eng, err := commands.Open(l, commands.Options{SnapshotEvery: -1, ExpiryInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { eng.Close() })
	return l, eng
}
