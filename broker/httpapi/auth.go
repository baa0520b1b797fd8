package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"
)

// sessionCookie is the page's session: HttpOnly, SameSite=Strict, Path=/.
const sessionCookie = "crewlog_session"

// maxSecretLen bounds a bearer token, a login code and a cookie value (the socket's tokens are ≤ 256 chars).
const maxSecretLen = 256

// Principal kinds. Every kind may read every route; the kind names whose limits (streams) a request counts
// against and what the logs say.
const (
	kindAdmin    = "admin"
	kindReadOnly = "read-only"
	kindSession  = "session"
)

// principal is who a request authenticated as. key identifies the credential (its digest) for per-principal
// limits; it is never logged.
type principal struct {
	kind string
	key  string
}

// digestOf is the lowercase hex sha-256 of a secret: the only form in which tokens, codes and sessions are held.
func digestOf(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func sameDigest(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// newSecret is 128 random bits, base64url: login codes and session ids.
func newSecret() string {
	var b [16]byte
	rand.Read(b[:]) // NB: crypto/rand.Read never fails (Go ≥ 1.24 crashes the process instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// authenticate finds the request's principal: a Bearer token (admin or read-only), else the session cookie.
func (s *Server) authenticate(r *http.Request) (principal, *apiError) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || tok == "" || len(tok) > maxSecretLen {
			return principal{}, errorf(http.StatusUnauthorized, codeAuth, "Authorization must be \"Bearer TOKEN\"")
		}
		d := digestOf(tok)
		switch {
		case s.opts.AdminDigest != "" && sameDigest(d, s.opts.AdminDigest):
			return principal{kind: kindAdmin, key: "admin"}, nil
		case s.opts.ReadOnly != nil && s.opts.ReadOnly.Valid(d):
			return principal{kind: kindReadOnly, key: "ro:" + d}, nil
		}
		return principal{}, errorf(http.StatusUnauthorized, codeAuth, "unknown or revoked token")
	}
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" && len(c.Value) <= maxSecretLen {
		if key, ok := s.sessions.valid(c.Value, s.opts.Now()); ok {
			return principal{kind: kindSession, key: key}, nil
		}
		return principal{}, errorf(http.StatusUnauthorized, codeAuth, "the session has expired; open a new login link")
	}
	return principal{}, errorf(http.StatusUnauthorized, codeAuth,
		"send Authorization: Bearer TOKEN (the admin token or one from crewctl token create --read-only), or log in with the link crewd prints")
}

// secrets holds digests of one kind of secret (login codes, sessions) with their expiry, at most max of them:
// adding one more drops the one that expires first. A zero expiry never expires.
type secrets struct {
	mu  sync.Mutex
	max int
	m   map[string]time.Time // digest → expiry
}

func newSecrets(max int) *secrets { return &secrets{max: max, m: make(map[string]time.Time)} }

// add mints a secret valid until exp (zero: no expiry) and returns it; only its digest is kept.
func (ss *secrets) add(exp time.Time, now time.Time) string {
	sec := newSecret()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for d, e := range ss.m {
		if !e.IsZero() && !now.Before(e) {
			delete(ss.m, d)
		}
	}
	if len(ss.m) >= ss.max {
		var (
			first string
			at    time.Time
		)
		for d, e := range ss.m {
			if first == "" || !e.IsZero() && (at.IsZero() || e.Before(at)) {
				first, at = d, e
			}
		}
		delete(ss.m, first)
	}
	ss.m[digestOf(sec)] = exp
	return sec
}

// valid reports whether sec is held and not expired, and returns its digest.
func (ss *secrets) valid(sec string, now time.Time) (string, bool) {
	d := digestOf(sec)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e, ok := ss.m[d]
	if ok && !e.IsZero() && !now.Before(e) {
		delete(ss.m, d)
		return "", false
	}
	return d, ok
}

// spend removes sec and reports whether it was held and not expired: a login code works once.
func (ss *secrets) spend(sec string, now time.Time) bool {
	d := digestOf(sec)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e, ok := ss.m[d]
	delete(ss.m, d)
	return ok && (e.IsZero() || now.Before(e))
}

// maxLoginCodes bounds the login codes waiting to be used.
const maxLoginCodes = 64

// LoginURL mints a one-time login code valid for ttl (0: until it is used or the server stops) and returns the
// URL that spends it. The server must be listening (the URL names its address).
func (s *Server) LoginURL(ttl time.Duration) (string, time.Time) {
	now := s.opts.Now()
	var exp time.Time
	if ttl > 0 {
		exp = now.Add(ttl)
	}
	code := s.codes.add(exp, now)
	return s.BaseURL() + "/login?code=" + code, exp
}

// handleLogin spends a login code and sets the session cookie: GET /login?code=CODE → 303 to /.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, errorf(http.StatusMethodNotAllowed, codeMethod, "%s /login: use GET", r.Method))
		return
	}
	code := r.URL.Query().Get("code")
	now := s.opts.Now()
	if code == "" || len(code) > maxSecretLen || !s.codes.spend(code, now) {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "crewlog: this login link is not valid or was already used; crewd printed it once at start, and "+
			"POST /api/v1/login with a token mints another", http.StatusUnauthorized)
		return
	}
	sess := s.sessions.add(now.Add(SessionLifetime), now)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: sess, Path: "/", MaxAge: int(SessionLifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

type loginResult struct {
	URL       string     `json:"url"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// handleNewLogin mints a login link for a bearer: POST /api/v1/login. A session cannot mint one (a page must not
// be able to pass its login on); it needs no CSRF token because a bearer token is never sent by a browser on its
// own.
func (s *Server) handleNewLogin(w http.ResponseWriter, r *http.Request, p principal) {
	if r.Method != http.MethodPost {
		writeError(w, errorf(http.StatusMethodNotAllowed, codeMethod, "%s /api/v1/login: use POST", r.Method))
		return
	}
	if p.kind == kindSession {
		writeError(w, errorf(http.StatusForbidden, codeForbidden, "a login link needs a token, not a session"))
		return
	}
	if e := newParams(r.URL).strict(); e != nil {
		writeError(w, e)
		return
	}
	u, exp := s.LoginURL(LoginCodeLifetime)
	writeJSON(w, loginResult{URL: u, ExpiresAt: &exp})
}
