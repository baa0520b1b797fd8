package httpapi

import (
	"net"
	"net/http"
	"strconv"
	"time"
)

// sessionCookieBase is the start of the session cookie's name: crewlog_session_PORT, PORT the listener's (Listen),
// or __Host-crewlog_session_PORT with Options.SecureCookie; crewlog_session, or __Host-crewlog_session, on a
// Handler served by another listener.
//
// NB: a browser keeps cookies apart by host name, never by port: with one name for every crewd, two dashboards of one
// host (two data directories, 127.0.0.1:7717 and :7718) shared one cookie of Path=/, and signing in to one signed
// the other out. The port is what tells them apart: their pages' origins differ only by it, and two listeners of one
// host name cannot share one. A digest of the data directory would outlive a restart, which buys nothing: sessions
// live in crewd's memory, so a restart signs every page out anyway (and with port 0 the name changes as they do);
// and it needs what this package does not know. Behind a TLS proxy the port is crewd's own: two crewd of one machine
// still differ by it.
//
// NB: the name crewlog_session that crewd used for every listener is not read: a crewd that names its cookie by its
// port has restarted since it set one, so that cookie names no session it holds. Each page signs in again once, as
// after any restart; the old cookie lives out its Max-Age in the browser, sent along and ignored (not deleted: a
// crewd of the previous version on another port of the host may still use it).
const sessionCookieBase = "crewlog_session"

// hostCookiePrefix is the prefix browsers hold to Secure, Path=/ and no Domain, and that a page of a plain-http
// origin (a server on another port of the host) may not set: with it no such server can replace or shadow the
// session.
const hostCookiePrefix = "__Host-"

// cookieNameFor is the session cookie's name for a listener on port (0: not known), marked Secure or not.
func cookieNameFor(port int, secure bool) string {
	name := sessionCookieBase
	if port > 0 {
		name += "_" + strconv.Itoa(port)
	}
	if secure {
		name = hostCookiePrefix + name
	}
	return name
}

// reachedAt records where the server is reached, the listener's host and port: the base URL of its login links and
// the session cookie's name. Under s.mu.
func (s *Server) reachedAt(host string, port int) {
	s.baseURL = "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	s.cookieName = cookieNameFor(port, s.opts.SecureCookie)
}

// sessionCookieName is the name of the server's session cookie (reachedAt).
func (s *Server) sessionCookieName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cookieName
}

// sessionCookie is the cookie that hands the page session sess: HttpOnly (no script reads it), SameSite=Strict,
// Path=/ and no Domain (this host name only), for SessionLifetime; Secure with Options.SecureCookie, or when the
// request came over TLS.
//
// NB: never Secure on the word of X-Forwarded-Proto, which any client may send (with no proxy in front, or through
// one that passes it on): whether browsers reach the server over https is for its operator to say (crewd's
// --http-secure-cookie), and a Secure cookie sent over plain http to another machine never comes back.
func (s *Server) sessionCookie(r *http.Request, sess string) *http.Cookie {
	return &http.Cookie{
		Name: s.sessionCookieName(), Value: sess, Path: "/", MaxAge: int(SessionLifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.opts.SecureCookie || r.TLS != nil,
	}
}
