package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoginLinksNameThePublicURL: behind a proxy every login link the server hands out (LoginURL, which crewd prints
// at start; AdminLoginURL, dashboard.login's; POST /api/v1/login's answer) names Options.PublicURL, where each named
// the listener's own http://127.0.0.1:PORT, which the operator had to rewrite by hand; and the request's Host and
// X-Forwarded-* headers, which any client sends, change none of them. Without a public URL the links name the
// listener. Each link's code opens a session when its path and query reach the listener.
func TestLoginLinksNameThePublicURL(t *testing.T) {
	for _, c := range []struct {
		name, public, want string // want "": the listener's address
		secure             bool
	}{
		{name: "none"},
		{name: "none, secure cookie", secure: true},
		{name: "https host", public: "https://crew.example.com/", want: "https://crew.example.com", secure: true},
		{name: "https host without slash", public: "https://crew.example.com", want: "https://crew.example.com"},
		{name: "https host and port", public: "https://crew.example.com:8443/", want: "https://crew.example.com:8443",
			secure: true},
		{name: "http ip and port", public: "http://192.0.2.7:7717/", want: "http://192.0.2.7:7717"},
		{name: "ipv6", public: "https://[2001:db8::7]/", want: "https://[2001:db8::7]", secure: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{PublicURL: c.public, SecureCookie: c.secure})
			want := c.want
			if want == "" {
				want = f.web.URL
			}
			start, _ := f.srv.LoginURL()
			admin, _ := f.srv.AdminLoginURL()
			links := map[string]string{"LoginURL": start, "AdminLoginURL": admin}
			for _, tok := range []string{adminToken, roToken} {
				req, err := http.NewRequest(http.MethodPost, f.web.URL+"/api/v1/login", nil)
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Host = "localhost"
				req.Header.Set("X-Forwarded-Host", "evil.example")
				req.Header.Set("X-Forwarded-Proto", "http")
				req.Header.Set("Forwarded", "host=evil.example;proto=http")
				code, m := f.send(req)
				require.Equal(t, http.StatusOK, code, "%v", m)
				links["POST /api/v1/login as "+tok] = m["url"].(string)
			}
			for what, link := range links {
				require.True(t, strings.HasPrefix(link, want+"/login?code="), "%s: %s, want it under %s", what, link, want)
				u, err := url.Parse(link)
				require.NoError(t, err)
				cookie := f.spendLink(f.web.URL + u.RequestURI())
				require.NotNil(t, cookie, "%s: the link's code opens a session", what)
				require.Equal(t, http.StatusOK, f.readsWith(cookie), what)
			}
		})
	}
}

// TestCheckPublicURL: a public URL is an absolute http or https URL of a host, at / of it, with no user name,
// query or fragment, https with the Secure cookie; each refusal says what is wrong, and New refuses such Options.
// The base it answers is a URL it takes again as is (crewd checks its flag, then hands New the base).
func TestCheckPublicURL(t *testing.T) {
	for _, c := range []struct {
		raw    string
		secure bool
		want   string // the base of the links, or the refusal's words
		ok     bool
	}{
		{raw: "https://crew.example.com/", want: "https://crew.example.com", ok: true},
		{raw: "https://crew.example.com", secure: true, want: "https://crew.example.com", ok: true},
		{raw: "HTTPS://crew.example.com:443/", secure: true, want: "https://crew.example.com:443", ok: true},
		{raw: "http://10.0.0.5:7717", want: "http://10.0.0.5:7717", ok: true},
		{raw: "https://crew.example.com:/", want: "https://crew.example.com", ok: true},
		{raw: "https://[2001:db8::7]:8443", want: "https://[2001:db8::7]:8443", ok: true},
		{raw: "https://[fe80::7%25eth0]:8443/", want: "https://[fe80::7%25eth0]:8443", ok: true},
		{raw: "http://10.0.0.5:7717/", secure: true, want: "is plain http"},
		{raw: "crew.example.com", want: "not an absolute http or https URL"},
		{raw: "/crewlog/", want: "not an absolute http or https URL"},
		{raw: "ftp://crew.example.com/", want: "not an absolute http or https URL"},
		{raw: "https:crew.example.com", want: "not an absolute http or https URL"},
		{raw: "https:///login", want: "not an absolute http or https URL"},
		{raw: "https://:8443/", want: "names no host"},
		{raw: "https://user:pw@crew.example.com/", want: "user name or password"},
		{raw: "https://user@crew.example.com/", want: "user name or password"},
		{raw: "https://crew.example.com/?a=b", want: "query or a fragment"},
		{raw: "https://crew.example.com/?", want: "query or a fragment"},
		{raw: "https://crew.example.com/#x", want: "query or a fragment"},
		{raw: "https://crew.example.com/#", want: "query or a fragment"},
		{raw: "https://crew.example.com/crewlog/", want: "has a path"},
		{raw: "https://crew.example.com//", want: "has a path"},
		{raw: "https://crew.example.com/%2F", want: "has a path"},
		{raw: "https://crew.example.com:0/", want: "no valid port"},
		{raw: "https://crew.example.com:1/", want: "https://crew.example.com:1", ok: true},
		{raw: "https://crew.example.com:65535/", want: "https://crew.example.com:65535", ok: true},
		{raw: "https://crew.example.com:65536/", want: "no valid port"},
		{raw: "https://crew.example.com:70000/", want: "no valid port"},
		{raw: "https://crew.example.com:x/", want: "not a URL"},
		{raw: "https://crew example.com/", want: "not a URL"},
		{raw: "https://crew.example.com/\n", want: "not a URL"},
		{raw: "", want: "not an absolute http or https URL"},
	} {
		t.Run(c.raw, func(t *testing.T) {
			got, err := CheckPublicURL(c.raw, c.secure)
			if c.ok {
				require.NoError(t, err)
				require.Equal(t, c.want, got)
				again, err := CheckPublicURL(got, c.secure) // crewd checks --http-public-url, then New its answer
				require.NoError(t, err, "the base checked again")
				require.Equal(t, got, again)
				return
			}
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, strings.TrimSpace(c.raw), "the message names the URL")
			require.Empty(t, got)
			if c.raw == "" {
				return // New takes "" as no public URL
			}
			_, err = New(Options{Engine: nil, PublicURL: c.raw, SecureCookie: c.secure})
			require.ErrorContains(t, err, "httpapi: PublicURL: ")
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestTheHostCheckTakesThePublicURLsHost: a loopback server refuses a request whose Host is not a loopback name (DNS
// rebinding), but for the public URL's host, which a proxy in front may pass on as the browser sent it: the
// operator's name, whose DNS no rebinding page controls, with a trailing dot or without (one name, either side).
// Without a public URL that name is refused as any other.
func TestTheHostCheckTakesThePublicURLsHost(t *testing.T) {
	for _, c := range []struct {
		public string
		host   string
		code   int
	}{
		{"", "crew.example.com", http.StatusForbidden},
		{"https://crew.example.com/", "crew.example.com", http.StatusOK},
		{"https://crew.example.com/", "CREW.example.com:443", http.StatusOK},
		{"https://crew.example.com/", "crew.example.com.", http.StatusOK},
		{"https://crew.example.com./", "crew.example.com.", http.StatusOK},
		{"https://crew.example.com./", "crew.example.com:443", http.StatusOK},
		{"https://crew.example.com/", "evil.example", http.StatusForbidden},
		{"https://crew.example.com/", "crew.example.com.evil.example", http.StatusForbidden},
		{"https://crew.example.com/", "localhost:7717", http.StatusOK},
		{"https://[2001:db8::7]/", "[2001:db8::7]", http.StatusOK},
		// An IPv6 zone names the proxy's interface on its own machine only: a client or proxy drops it from the
		// Host it sends (RFC 6874; net/http's client, as here, writes "[fe80::1%eth0]:8080" as "[fe80::1]:8080").
		{"http://[fe80::1%25eth0]:8080/", "[fe80::1%eth0]:8080", http.StatusOK},
		{"http://[fe80::1%25eth0]:8080/", "[fe80::1]:8080", http.StatusOK},
		{"http://[fe80::1%25eth0]:8080/", "[FE80::1]", http.StatusOK},
		{"http://[fe80::1%25eth0]:8080/", "[fe80::2]:8080", http.StatusForbidden},
	} {
		code, m := statusWithHost(t, Options{PublicURL: c.public}, c.host)
		require.Equal(t, c.code, code, "public %q, Host %q: %v", c.public, c.host, m)
	}
}

// TestOnlyALoopbackServerChecksTheHost: DNS rebinding reaches loopback only, so a server allowed to listen on other
// addresses (AllowRemote, behind whatever the operator put in front) takes any Host, which the loopback one refuses.
func TestOnlyALoopbackServerChecksTheHost(t *testing.T) {
	for _, c := range []struct {
		remote bool
		host   string
		code   int
	}{
		{false, "crew.example.com", http.StatusForbidden},
		{true, "crew.example.com", http.StatusOK},
		{true, "evil.example:7717", http.StatusOK},
		{true, "localhost:7717", http.StatusOK},
	} {
		code, m := statusWithHost(t, Options{AllowRemote: c.remote}, c.host)
		require.Equal(t, c.code, code, "remote %v, Host %q: %v", c.remote, c.host, m)
	}
}

// statusWithHost is the answer to the admin's GET /api/v1/runs sent with Host host to a server of opts.
func statusWithHost(t *testing.T, opts Options, host string) (int, map[string]any) {
	f := newFixture(t, opts)
	req, err := http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/runs", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Host = host
	return f.send(req)
}

// TestRefusalsNameWhereLoginLinksAreOpened: the page's hint for a browser signed out showed http://…/login?code=…
// whatever crewd's links name, an https public URL's too, so an operator behind a TLS proxy was told to open a
// plain-http address; every API answer (a 401 first) now names, in X-Crewlog-Login, the base of the links crewd hands
// out: the public URL, or the listener's address. With the Secure cookie and no public URL it names none: the links
// name crewd's own plain-http address, which the proxy's https one (the page's own) stands in for.
func TestRefusalsNameWhereLoginLinksAreOpened(t *testing.T) {
	for _, c := range []struct {
		name, public, want string // want "-": none; "": the listener's address
		secure             bool
	}{
		{name: "none"},
		{name: "https public URL", public: "https://crew.example.com/", want: "https://crew.example.com"},
		{name: "https public URL, secure cookie", public: "https://crew.example.com:8443/", secure: true,
			want: "https://crew.example.com:8443"},
		{name: "secure cookie alone", secure: true, want: "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{PublicURL: c.public, SecureCookie: c.secure})
			want := c.want
			if want == "" {
				want = f.web.URL
			}
			for _, path := range []string{"/api/v1/runs", "/api/v1/stream", "/api/v1/nothing"} {
				req, err := http.NewRequest(http.MethodGet, f.web.URL+path, nil)
				require.NoError(t, err)
				resp, err := f.web.Client().Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
				if want == "-" {
					require.Empty(t, resp.Header.Values(loginHeader), path)
					continue
				}
				require.Equal(t, want, resp.Header.Get(loginHeader), path)
			}
		})
	}
}
