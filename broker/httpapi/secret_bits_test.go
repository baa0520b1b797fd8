package httpapi

import (
	"encoding/base64"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoginCodesAndSessionsAre128RandomBits: every login link's code (the one crewd prints, one minted by POST
// /api/v1/login) and every session cookie it opens is 128 bits, base64url without padding, and no two are alike.
// A code is a credential on its own for as long as it is valid, and a session cookie is half of one: fewer bits
// would let a local process that can reach the port guess one.
func TestLoginCodesAndSessionsAre128RandomBits(t *testing.T) {
	f := newFixture(t, Options{})
	seen := map[string]string{}
	bits := func(what, secret string) {
		t.Helper()
		raw, err := base64.RawURLEncoding.DecodeString(secret)
		require.NoError(t, err, "%s %q is base64url", what, secret)
		require.Len(t, raw, 128/8, "%s %q", what, secret)
		require.NotContains(t, seen, secret, "%s repeats a %s", what, seen[secret])
		seen[secret] = what
	}
	for range 8 {
		for _, link := range []string{f.mintLink(roToken), f.mintLink(adminToken), f.loginURL()} {
			u, err := url.Parse(link)
			require.NoError(t, err)
			bits("login code", u.Query().Get("code"))
			c := f.spendLink(link)
			require.NotNil(t, c, "the link %s opens a session", link)
			bits("session cookie", c.Value)
		}
	}
}

// loginURL is the link crewd prints at start, minted again.
func (f *fixture) loginURL() string {
	link, _ := f.srv.LoginURL()
	return link
}
