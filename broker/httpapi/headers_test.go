package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuthenticatedAnswersAreNotStored: every answer a credential opened (the data routes, the stream, /metrics)
// says no-store, so no browser or proxy cache keeps what only a credential may read.
func TestAuthenticatedAnswersAreNotStored(t *testing.T) {
	f := newFixture(t, Options{Metrics: NewMetrics()})
	for _, path := range everyRoute {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel() // ends the stream
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.web.URL+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := f.web.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
		})
	}
}

// TestThePagesFilesForbidFramingSniffingAndClimbingOut: every answer of the page's files, the index a client-side
// route or a path out of the files gets included, forbids framing, sniffing and any script or style not from the
// files, and sends no referrer; a path that climbs out of the files serves the index, never a file beside them; and
// no answer, of the page or of the API, lets another origin read it (no CORS header, whatever the Origin).
func TestThePagesFilesForbidFramingSniffingAndClimbingOut(t *testing.T) {
	// The files from a directory with a secret beside it, as a UI read from disk would be.
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "ui", "js"), 0o700))
	files := map[string]string{"ui/index.html": "<h1>page</h1>", "ui/js/app.js": "1", "secret": "s3cret"}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte(text), 0o600))
	}
	f := newFixture(t, Options{UI: os.DirFS(filepath.Join(dir, "ui"))})
	for _, c := range []struct{ path, body string }{
		{"/", "<h1>page</h1>"}, {"/js/app.js", "1"}, {"/run/abc", "<h1>page</h1>"}, {"/js/", "<h1>page</h1>"},
		{"/%2e%2e/secret", "<h1>page</h1>"}, {"/js/..%2f..%2fsecret", "<h1>page</h1>"},
		{"/js/%2e%2e/%2e%2e/secret", "<h1>page</h1>"}, {"/..%5csecret", "<h1>page</h1>"}, {"/x%00y", "<h1>page</h1>"},
	} {
		t.Run(c.path, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, f.web.URL+c.path, nil)
			require.NoError(t, err)
			req.Header.Set("Origin", "http://evil.example")
			resp, err := f.web.Client().Do(req)
			require.NoError(t, err)
			body := readAll(t, resp)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, c.body, body)
			h := resp.Header
			require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
			require.Equal(t, "DENY", h.Get("X-Frame-Options"))
			require.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
			csp := h.Get("Content-Security-Policy")
			for _, d := range []string{"default-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
				require.Contains(t, csp, d)
			}
			require.NotContains(t, csp, "unsafe-")
			require.Empty(t, h.Values("Access-Control-Allow-Origin"))
		})
	}
	for _, p := range append([]string{"/login?code=x", "/healthz"}, everyRoute...) {
		req, err := http.NewRequest(http.MethodGet, f.web.URL+p, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", "http://evil.example")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if p == "/api/v1/stream" {
			req.Method = http.MethodOptions // NB: a stream's answer lasts; the preflight is what CORS would answer
		}
		resp, err := f.web.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Empty(t, resp.Header.Values("Access-Control-Allow-Origin"), p)
		require.Empty(t, resp.Header.Values("Access-Control-Allow-Credentials"), p)
	}
}

// TestThePagesFilesAreServedWhole: a Range header is not read, however many ranges it names: the files are small,
// and before Go 1.26.9 net/http spent CPU without bound on a Range of many small ranges (GO-2026-6609), on a route
// that needs no credential.
func TestThePagesFilesAreServedWhole(t *testing.T) {
	dir := t.TempDir()
	page := strings.Repeat("<p>page</p>", 100)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte(page), 0o600))
	f := newFixture(t, Options{UI: os.DirFS(dir)})
	many := make([]string, 2000)
	for i := range many {
		many[i] = fmt.Sprintf("%d-%d", i%len(page), i%len(page))
	}
	for _, rng := range []string{"bytes=0-0", "bytes=5-", "bytes=-3", "bytes=" + strings.Join(many, ",")} {
		for _, p := range []string{"/", "/index.html", "/run/abc"} {
			req, err := http.NewRequest(http.MethodGet, f.web.URL+p, nil)
			require.NoError(t, err)
			req.Header.Set("Range", rng)
			resp, err := f.web.Client().Do(req)
			require.NoError(t, err)
			body := readAll(t, resp)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s with Range %.20s", p, rng)
			require.Equal(t, page, body, "%s with Range %.20s", p, rng)
			require.Empty(t, resp.Header.Get("Content-Range"))
		}
	}
}
