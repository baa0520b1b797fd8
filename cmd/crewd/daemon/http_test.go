package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
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

// TestStartHTTPDefaultAddressOtherwiseUnusable: only a default address already in use turns HTTP off
// (docs/dashboard-api.md); a default address that cannot be bound for any other reason stops the start, as an
// explicit one does.
func TestStartHTTPDefaultAddressOtherwiseUnusable(t *testing.T) {
	l, eng := openEmptyEngine(t)
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:65536"} // no such port
	web, err := startHTTP(cfg, eng, l, nil, httpapi.NewMetrics(), "", nil, lg)
	require.Nil(t, web)
	require.ErrorContains(t, err, "daemon: --http: ")
	require.NotErrorIs(t, err, syscall.EADDRINUSE)
	require.NotContains(t, logs.String(), "serving without HTTP")
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

// TestRunLoginLinksNameThePublicURL: with --http-public-url the link crewd prints at start and dashboard.login's
// name the proxy's address, where they named crewd's own http://127.0.0.1:PORT, which the operator rewrote by hand
// behind the proxy; without it they name crewd's listener.
func TestRunLoginLinksNameThePublicURL(t *testing.T) {
	for _, c := range []struct {
		name, public string
		secure       bool
		want         string // a regexp of the links' base
	}{
		{name: "none", want: `http://127\.0\.0\.1:[0-9]+`},
		{name: "https", public: "https://crew.example.com", secure: true, want: `https://crew\.example\.com`},
		{name: "http with port", public: "http://192.0.2.7:8080", want: `http://192\.0\.2\.7:8080`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.HTTPAddr, cfg.HTTPAddrSet, cfg.HTTPPublicURL, cfg.HTTPSecureCookie = "127.0.0.1:0", true, c.public, c.secure
			d := startRun(t, cfg)
			require.Regexp(t, "^"+c.want+"$", d.base, "the link crewd prints")
			admin := dialAdmin(context.Background(), t, cfg.DataDir, cfg.SocketPath, nil)
			defer admin.Close()
			var out struct {
				URL string `json:"url"`
			}
			require.NoError(t, admin.Call(context.Background(), "dashboard.login", map[string]any{}, &out))
			require.Regexp(t, "^"+regexp.QuoteMeta(d.base)+`/login\?code=[A-Za-z0-9_-]{22}$`, out.URL, "dashboard.login")
			require.NoError(t, d.stop())
		})
	}
}

// TestStartHTTPSecureCookieWithoutPublicURL: with --http-secure-cookie and no --http-public-url the links name
// crewd's own http address, where the Secure cookie does not work: crewd's start-up log says to open them through
// the proxy's https address; with a public URL, or without the Secure cookie, it says nothing of it.
func TestStartHTTPSecureCookieWithoutPublicURL(t *testing.T) {
	l, eng := openEmptyEngine(t)
	for _, c := range []struct {
		secure bool
		public string
		warns  bool
	}{
		{secure: true, warns: true},
		{secure: true, public: "https://crew.example.com"},
		{public: "http://192.0.2.7:8080"},
		{},
	} {
		var logs bytes.Buffer
		cfg := Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", HTTPAddrSet: true, HTTPSecureCookie: c.secure,
			HTTPPublicURL: c.public}
		web, err := startHTTP(cfg, eng, l, nil, httpapi.NewMetrics(), "", nil, slog.New(slog.NewTextHandler(&logs, nil)))
		require.NoError(t, err)
		require.NoError(t, web.Close())
		if !c.warns {
			require.NotContains(t, logs.String(), "proxy's https address", "%+v", c)
			continue
		}
		require.Contains(t, logs.String(), "level=WARN")
		require.Contains(t, logs.String(), "open each through the proxy's https address")
		require.Contains(t, logs.String(), "--http-public-url")
		require.Contains(t, logs.String(), web.BaseURL(), "the line names the address the links name")
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
