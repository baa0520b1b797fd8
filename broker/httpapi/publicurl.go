package httpapi

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// CheckPublicURL checks raw as Options.PublicURL, the address browsers reach the server at through a proxy in front
// of it, and returns it as the base of the login links: scheme://host[:port], no trailing slash. It must be an
// absolute http or https URL with a host and no user name or password, query, fragment or path but "/"; with
// secureCookie it must be https. The messages say what to give instead; they do not start with "httpapi: ".
//
// NB: no path prefix (https://host/crewlog/ behind a proxy that strips it). The page's files and requests, and the
// login's redirect, name root paths (/app.css, /api/v1/…, /#proof=…), which a proxy that serves the page under a
// prefix would send elsewhere; the __Host- cookie of SecureCookie must have Path=/; and a page at another path of the
// same origin reads the session's proof from the origin's localStorage and sends the cookie with its own requests
// as the dashboard's page does (both are same-origin): the dashboard needs an origin of its own (a host name, or a
// port, of the proxy's).
//
// NB: set by the operator only, never taken from a request's Host or X-Forwarded-* headers, which any client sends:
// a link that named an address a client chose would hand the operator's login code to it.
func CheckPublicURL(raw string, secureCookie bool) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https" || u.Opaque != "" || u.Host == "":
		return "", fmt.Errorf("%q is not an absolute http or https URL (give the proxy's address, like "+
			"https://crew.example.com/)", raw)
	case u.User != nil:
		return "", fmt.Errorf("%q holds a user name or password, which every login link would carry: give the "+
			"address alone", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return "", fmt.Errorf("%q has a query or a fragment: give the address alone, like https://crew.example.com/",
			raw)
	case u.Path != "" && u.Path != "/" || u.RawPath != "":
		return "", fmt.Errorf("%q has a path: the dashboard is served at / of a host name or port of its own (a path "+
			"prefix is not supported: the page's requests name root paths, and other pages of its origin could read "+
			"its session)", raw)
	case u.Hostname() == "":
		return "", fmt.Errorf("%q names no host", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q has no valid port (1..65535)", raw)
		}
	}
	if secureCookie && u.Scheme != "https" {
		return "", fmt.Errorf("%q is plain http, and browsers refuse a Secure session cookie (--http-secure-cookie) "+
			"on a page they reach over http: give the proxy's https address", raw)
	}
	// NB: "host:" is the scheme's default port. u.Host is unescaped, and an IPv6 zone's "%25" read as "%" named a
	// base no URL parser (nor this check, which crewd's flag and then New make) takes: String escapes it again.
	return (&url.URL{Scheme: u.Scheme, Host: strings.TrimSuffix(u.Host, ":")}).String(), nil
}

// linkBase is the base URL of the login links: Options.PublicURL, or the listener's address (BaseURL).
func (s *Server) linkBase() string {
	if s.publicURL != "" {
		return s.publicURL
	}
	return s.BaseURL()
}

// loginHeader names, on every answer of the API, the base of the login links the server hands out (signInBase): the
// page's hint for a browser signed out shows where a link is opened, where it showed http://… whatever the links name.
const loginHeader = "X-Crewlog-Login"

// signInBase is where a login link is opened, as loginHeader names it: linkBase, but "" (none) with the Secure cookie
// and no public URL. NB: then the links name the listener's plain-http address, where the browser keeps no Secure
// cookie: a link is opened through the proxy's https address, which only the page knows (its own origin).
func (s *Server) signInBase() string {
	if s.publicURL == "" && s.opts.SecureCookie {
		return ""
	}
	return s.linkBase()
}
