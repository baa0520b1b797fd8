package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The session cookie alone does not authenticate: a browser sends it to every port of the host name, so a server a
// worker runs on another port of 127.0.0.1 gets it whenever the operator opens one of its pages, and could replay it
// from outside a browser. With it comes the session's proof (sessionProof), which the login hands the page in the
// fragment of its redirect (never sent to a server) and the page keeps in its origin's own storage: in the
// proofHeader of each request, and in the stream's proofParam, since EventSource sends no header of its own.
const (
	proofHeader   = "X-Crewlog-Proof"
	proofParam    = "proof"
	streamPattern = "/api/v1/stream"
)

// maxSecretLen bounds a bearer token, a login code and a cookie value (the socket's tokens are ≤ 256 chars).
const maxSecretLen = 256

// Principal kinds. Every kind may read every route; the kind names whose limits (streams) a request counts
// against and what the logs say.
const (
	kindAdmin    = "admin"
	kindReadOnly = "read-only"
	kindSession  = "session"
)

// Credential keys: who minted a login link, and whose limits a request counts against.
const (
	keyAdmin = "admin"
	// keyCrewd owns the link crewd prints at start (LoginURL): whoever reads crewd's output is its operator.
	keyCrewd = "crewd"
	// keyReadOnlyPrefix + a read-only token's digest is that token's key.
	keyReadOnlyPrefix = "ro:"
)

// principal is who a request authenticated as. key identifies the credential for per-principal limits: a
// session's is the credential that minted its login link, so a token cannot multiply its stream and rebuild
// limits by opening sessions. session is the session's digest ("" for a bearer). Neither is ever logged.
type principal struct {
	kind    string
	key     string
	session string
}

// canEnd reports whether p may stop authenticating while the server runs: a session (it expires, and ends with the
// credential that minted it), a read-only token (revoked). The admin token and crewd's own key last as long as the
// server does.
func (p *principal) canEnd() bool { return p.session != "" || (p.key != keyAdmin && p.key != keyCrewd) }

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
			return principal{kind: kindAdmin, key: keyAdmin}, nil
		case s.opts.ReadOnly != nil && s.opts.ReadOnly.Valid(d):
			return principal{kind: kindReadOnly, key: keyReadOnlyPrefix + d}, nil
		}
		return principal{}, errorf(http.StatusUnauthorized, codeAuth, "unknown or revoked token")
	}
	if cookies := sessionCookies(r, s.sessionCookieName()); len(cookies) > 0 {
		// NB: SameSite=Strict still sends the cookie from every origin of the same site — another port of
		// 127.0.0.1, a dev server a worker started, say. Only the page's own requests and the user's own
		// navigation may use the session.
		if site, other := sentByAnotherOrigin(r); other {
			return principal{}, errorf(http.StatusForbidden, codeForbidden,
				"the session cookie is accepted only from the dashboard's own pages (Sec-Fetch-Site %q)", site)
		}
		// NB: not the first cookie of the name: a server on another port of the host can set one with a longer
		// Path, which the browser sends before the page's own, and the page's session would be refused while it
		// lives. The session is the cookie the proof was made for.
		proof, sess := []byte(proofOf(r)), ""
		for _, c := range cookies {
			if hmac.Equal(proof, []byte(s.sessionProof(c))) {
				sess = c
				break
			}
		}
		if sess == "" {
			return principal{}, errorf(http.StatusUnauthorized, codeAuth, "the session cookie needs the proof its "+
				"login gave the page (%s); open a new login link", proofHeader)
		}
		p := principal{kind: kindSession, session: digestOf(sess)}
		if s.current(&p) {
			return p, nil
		}
		return principal{}, errorf(http.StatusUnauthorized, codeAuth,
			"the session has expired, or the token that opened it was revoked; open a new login link")
	}
	return principal{}, errorf(http.StatusUnauthorized, codeAuth,
		"send Authorization: Bearer TOKEN (the admin token or one from crewctl token create --read-only), or log in with the link crewd prints")
}

// maxSessionCookies bounds the session cookies of one request that are checked against its proof: a browser sends
// the page's last, after whatever other ports of the host set, and a server on one may set a cookie of the name for
// each Path that path-matches a route, with a Partitioned twin of each: the deepest route
// (/api/v1/runs/{runId}/jobs/{jobId}) is matched by 11 Paths but "/", so 22 planted and the page's. A client that
// sends more spends no more of the server's time on them. NB: a bound below that lets such a server shadow the
// page's session on its run's routes (the page's reads of them refused 401 while its cookies live).
const maxSessionCookies = 32

// sessionCookies is the values of r's cookies of the session cookie's name that may be sessions (not empty, at most
// maxSecretLen), at most maxSessionCookies of them, in the order sent.
func sessionCookies(r *http.Request, name string) []string {
	var vs []string
	for _, c := range r.CookiesNamed(name) {
		if c.Value != "" && len(c.Value) <= maxSecretLen {
			vs = append(vs, c.Value)
			if len(vs) == maxSessionCookies {
				break
			}
		}
	}
	return vs
}

// sessionProof is the proof that goes with the session cookie's value sess: an HMAC of it that only this server
// can make, base64url.
func (s *Server) sessionProof(sess string) string {
	m := hmac.New(sha256.New, s.proofKey[:])
	m.Write([]byte(sess))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// proofOf is the session proof r carries: its proofHeader, or on the stream its proofParam.
func proofOf(r *http.Request) string {
	if p := r.Header.Get(proofHeader); p != "" || r.Pattern != streamPattern {
		return p
	}
	return r.URL.Query().Get(proofParam)
}

// sentByAnotherOrigin reports whether the browser says another origin's page sent r (Sec-Fetch-Site same-site or
// cross-site), and the header's value. The page's own requests (same-origin), the user's own navigation (none) and
// clients that send no such header pass.
func sentByAnotherOrigin(r *http.Request) (string, bool) {
	site := r.Header.Get("Sec-Fetch-Site")
	return site, site != "" && site != "same-origin" && site != "none"
}

// credentialRecheck bounds how long anything held for a credential waits without looking again at whether the
// credential still holds: a paced read however long its credential's debt (a large cold run read back or a large
// run's past rebuilt costs seconds to minutes of it), a rebuild, and a stream with nothing to send, whose keep-alive
// comes only every Options.KeepAlive (15 s). So a revoked token's or an expired session's reads and streams give
// back their turns, streams' places and connections' places within about a second of the moment the server sees it
// (crewd re-reads its read-only tokens at most once a second), not once their wait is over.
const credentialRecheck = time.Second

// current reports whether p still authenticates now, and fills in a session's key: a session lasts only while
// it has not expired and the credential that minted its login link is still valid (a revoked read-only token's
// sessions end with it). A stream asks again before each write and every credentialRecheck, so none outlives its
// credential.
func (s *Server) current(p *principal) bool {
	if p.session != "" {
		owner, ok := s.sessions.valid(p.session, s.opts.Now())
		if ok && !s.credentialValid(owner) {
			s.sessions.drop(p.session)
			ok = false
		}
		p.key = owner
		return ok
	}
	return s.credentialValid(p.key)
}

// credentialGone is the answer to a request whose credential was valid when it came but no longer is when its turn
// (to read, to rebuild) comes, or while its rebuild runs: the 401 the same request would get if it came now.
func credentialGone() *apiError {
	return errorf(http.StatusUnauthorized, codeAuth,
		"the token was revoked, or the session expired, while the request waited for its turn or was served")
}

// credentialValid reports whether the credential with this key is still accepted.
func (s *Server) credentialValid(key string) bool {
	switch {
	case key == keyAdmin:
		return s.opts.AdminDigest != "" // NB: the admin digest is fixed for the server's life
	case key == keyCrewd:
		return true
	case strings.HasPrefix(key, keyReadOnlyPrefix):
		return s.opts.ReadOnly != nil && s.opts.ReadOnly.Valid(strings.TrimPrefix(key, keyReadOnlyPrefix))
	}
	return false
}

// secrets holds digests of one kind of secret (login codes, sessions) with their expiry and the key of the
// credential that minted them (their owner), at most max of them and maxPerOwner of one owner: a credential over
// its share drops its own that expires first, so one token's many logins cannot push out another's; a full set
// drops, of the owners that hold the most, the one that expires first, so tokens that each keep their share and
// together fill the set push out one another's, never the secret of an owner that holds fewer (the admin's one
// link, say). Every secret expires (NB: a zero expiry has passed: nothing is minted to last until used or crewd
// stops). A secret whose owner is no longer valid (live: a revoked token) is refused anyway, so it is dropped as an
// expired one is, at the next add: otherwise a revoked token's sessions would hold their places for days, and a full
// set would drop a valid credential's for a login.
type secrets struct {
	mu          sync.Mutex
	max         int
	maxPerOwner int
	live        func(owner string) bool
	m           map[string]secretEntry // digest → entry
}

type secretEntry struct {
	exp   time.Time
	owner string
}

func (e secretEntry) expired(now time.Time) bool { return !now.Before(e.exp) }

func newSecrets(max, maxPerOwner int, live func(owner string) bool) *secrets {
	return &secrets{max: max, maxPerOwner: min(max, maxPerOwner), live: live, m: make(map[string]secretEntry)}
}

// add mints a secret of owner valid until exp and returns it; only its digest is kept. The
// expired secrets and those of owners no longer live go first.
func (ss *secrets) add(owner string, exp time.Time, now time.Time) string {
	sec := newSecret()
	live := ss.liveOwners()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// NB: the set may have changed since live was asked: a secret dropped meanwhile is gone from ss.m, and one of an
	// owner not asked (its first secret, added meanwhile) stays until the next add. Counted here, under ss.mu, the
	// bounds hold exactly.
	held := make(map[string]int, len(live))
	most := 0
	for d, e := range ss.m {
		alive, asked := live[e.owner]
		if e.expired(now) || asked && !alive {
			delete(ss.m, d)
			continue
		}
		held[e.owner]++
		most = max(most, held[e.owner])
	}
	switch {
	case held[owner] >= ss.maxPerOwner:
		ss.dropFirstExpiring(func(e secretEntry) bool { return e.owner == owner })
	case len(ss.m) >= ss.max:
		ss.dropFirstExpiring(func(e secretEntry) bool { return held[e.owner] == most })
	}
	ss.m[digestOf(sec)] = secretEntry{exp: exp, owner: owner}
	return sec
}

// liveOwners asks live once about each owner of a held secret. NB: not under ss.mu, which every session's request
// takes (current): live may read a file (a read-only token's, at most once a second), and one login would hold
// them all up behind it, once per secret.
func (ss *secrets) liveOwners() map[string]bool {
	ss.mu.Lock()
	owners := make(map[string]bool)
	for _, e := range ss.m {
		owners[e.owner] = false
	}
	ss.mu.Unlock()
	for o := range owners {
		owners[o] = ss.live(o)
	}
	return owners
}

// dropFirstExpiring removes, of the candidate entries, the one that expires first. Under ss.mu.
func (ss *secrets) dropFirstExpiring(candidate func(secretEntry) bool) {
	var (
		first string
		at    time.Time
	)
	for d, e := range ss.m {
		if !candidate(e) {
			continue
		}
		if first == "" || e.exp.Before(at) {
			first, at = d, e.exp
		}
	}
	delete(ss.m, first)
}

// valid reports whether the secret with digest d is held and not expired, and returns its owner.
func (ss *secrets) valid(d string, now time.Time) (string, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e, ok := ss.m[d]
	if ok && e.expired(now) {
		delete(ss.m, d)
		return "", false
	}
	return e.owner, ok
}

// drop removes the secret with digest d.
func (ss *secrets) drop(d string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, d)
}

// spend removes sec and reports whether it was held and not expired, with its owner: a login code works once.
func (ss *secrets) spend(sec string, now time.Time) (string, bool) {
	d := digestOf(sec)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e, ok := ss.m[d]
	delete(ss.m, d)
	return e.owner, ok && !e.expired(now)
}

// maxLoginCodes bounds the login codes waiting to be used, maxLoginCodesPerCredential those one credential
// minted, maxSessionsPerCredential the sessions opened with the links of one credential.
const (
	maxLoginCodes              = 64
	maxLoginCodesPerCredential = 8
	maxSessionsPerCredential   = 16
)

// LoginURL mints the one-time login code crewd prints at start, valid for LoginCodeLifetime, and returns the URL
// that spends it and when it expires. The URL names Options.PublicURL, or without one the listener's address (then
// the server must be listening).
//
// NB: short-lived, as every code: crewd's output goes to a journal or a file that others may read long after, and
// the session the code opens is the operator's, paced by nothing and revoked by no token.
func (s *Server) LoginURL() (string, time.Time) {
	return s.loginURL(keyCrewd)
}

// AdminLoginURL mints a one-time login code for the admin, valid for LoginCodeLifetime, as POST /api/v1/login
// with the admin token does, and returns the URL that spends it and when it expires. The daemon hands it out
// through its socket, so that a client need not send the admin token over TCP to whatever holds the address.
func (s *Server) AdminLoginURL() (string, time.Time) {
	return s.loginURL(keyAdmin)
}

// loginURL is LoginURL for a link minted by the credential with key owner, valid for LoginCodeLifetime as every
// login code is: its session lasts while that credential does.
func (s *Server) loginURL(owner string) (string, time.Time) {
	now := s.opts.Now()
	exp := now.Add(LoginCodeLifetime)
	code := s.codes.add(owner, exp, now)
	return s.linkBase() + "/login?code=" + code, exp
}

// handleLogin spends a login code and sets the session cookie: GET /login?code=CODE → 303 to /.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, methodNotAllowed(allowGet, "%s /login: use GET", r.Method))
		return
	}
	if site, other := sentByAnotherOrigin(r); other {
		// NB: a link minted with a worker's read-only token and opened by a page the worker serves would log the
		// operator's browser into the worker's session: its cookie would replace the operator's, and the page would
		// count against the worker's limits and end with the worker's token. The code stays unspent: the user can
		// still open the link themselves.
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, fmt.Sprintf("crewlog: another site's page opened this login link (Sec-Fetch-Site %q), so it was "+
			"not used: open it yourself, from crewd's output or pasted into the address bar", site), http.StatusForbidden)
		return
	}
	code := r.URL.Query().Get("code")
	now := s.opts.Now()
	var (
		owner string
		ok    bool
	)
	if code != "" && len(code) <= maxSecretLen {
		owner, ok = s.codes.spend(code, now)
	}
	if !ok || !s.credentialValid(owner) {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, fmt.Sprintf("crewlog: this login link is not valid, was already used or has expired (a link is "+
			"valid %d minutes, the one crewd prints at start too); `crewctl dashboard` prints another",
			LoginCodeLifetime/time.Minute), http.StatusUnauthorized)
		return
	}
	sess := s.sessions.add(owner, now.Add(SessionLifetime), now)
	http.SetCookie(w, s.sessionCookie(r, sess))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/#"+proofParam+"="+s.sessionProof(sess), http.StatusSeeOther)
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
		writeError(w, methodNotAllowed(allowPost, "%s /api/v1/login: use POST", r.Method))
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
	u, exp := s.loginURL(p.key)
	writeJSON(w, loginResult{URL: u, ExpiresAt: &exp})
}
