package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestABearerTokenIsBoundedInBytes: a bearer token of maxSecretLen bytes (the socket's tokens are at most 256) is
// looked up and accepted when valid; one byte more is refused 401 auth as malformed before it is hashed, even if a
// token of that length were valid.
func TestABearerTokenIsBoundedInBytes(t *testing.T) {
	f := newFixture(t, Options{})
	for _, tc := range []struct {
		name    string
		length  int
		status  int
		message string
	}{
		{"at the bound", maxSecretLen, http.StatusOK, ""},
		{"one past it", maxSecretLen + 1, http.StatusUnauthorized, `Authorization must be "Bearer TOKEN"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := "crro_" + strings.Repeat("t", tc.length-len("crro_"))
			f.tokens.set(tok, true)
			status, m := f.getAs("/api/v1/runs", "Bearer "+tok)
			require.Equal(t, tc.status, status, "%v", m)
			if tc.message != "" {
				e := m["error"].(map[string]any)
				require.Equal(t, codeAuth, e["code"])
				require.Equal(t, tc.message, e["message"])
			}
		})
	}
}

// TestOverlongSessionCookiesAreNotCounted: a cookie of the session's name whose value passes maxSecretLen names no
// session and is skipped, so it takes none of the maxSessionCookies places that are checked against the proof; one
// of maxSecretLen bytes takes one. maxSessionCookies overlong cookies before the page's leave its session read;
// as many at the bound push it out.
func TestOverlongSessionCookiesAreNotCounted(t *testing.T) {
	f := newFixture(t, Options{})
	start, _ := f.srv.LoginURL()
	page := f.spendLink(start)
	for _, tc := range []struct {
		name   string
		length int
		status int
	}{
		{"one past the bound: skipped", maxSecretLen + 1, http.StatusOK},
		{"at the bound: counted", maxSecretLen, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/runs", nil)
			require.NoError(t, err)
			planted := &http.Cookie{Name: f.srv.sessionCookieName(), Value: strings.Repeat("c", tc.length)}
			for range maxSessionCookies {
				req.AddCookie(planted)
			}
			f.withSession(req, page)
			status, m := f.send(req)
			require.Equal(t, tc.status, status, "%v", m)
		})
	}
}
