package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
)

// TestARebuildStopsOnceItsCredentialIsRevoked: a rebuild (state?at, a time's read of the log, explain) that had the
// slot when its token was revoked went on to its end and was answered, however long it took (minutes, for a time
// on a large log), holding the slot from every other credential's rebuilds. Now a rebuild looks at its credential
// every credentialRecheck, as a paced read waiting does, and stops once it no longer holds: it keeps nothing and is
// answered 401, as the same request sent then.
func TestARebuildStopsOnceItsCredentialIsRevoked(t *testing.T) {
	for _, tc := range rebuildRoutes(t) {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			path := tc.path(f)
			f.srv.states.holding = func(rctx context.Context) {
				f.tokens.set(roToken, false)
				// NB: stands in for a rebuild that lasts until its credential is looked at again
				// (credentialRecheck), or, where the rebuild does not look, ten times as long as that.
				select {
				case <-rctx.Done():
				case <-time.After(10 * credentialRecheck):
				}
			}
			status, m := f.getAs(path, "Bearer "+roToken)
			require.Equal(t, http.StatusUnauthorized, status, "%v", m)
			require.Equal(t, codeAuth, m["error"].(map[string]any)["code"])
			require.Nil(t, f.srv.states.Base(audittest.RunBudget, f.eng.Head()), "nothing kept of the rebuild")
			require.Equal(t, []int{0, 0}, slotLoad(f.srv.states.slot), "the slot given back")
		})
	}
}

// rebuildRoute is a route that rebuilds (state?at a position or a time, explain): its name and its path in f.
type rebuildRoute struct {
	name string
	path func(f *fixture) string
}

// rebuildRoutes are the routes that rebuild, each of budgetRun's.
func rebuildRoutes(t *testing.T) []rebuildRoute {
	at := url.QueryEscape(audittest.Epoch.Add(8 * time.Second).Format(time.RFC3339))
	return []rebuildRoute{
		{"state?at a position", func(*fixture) string { return budgetRun + "/state?at=10" }},
		{"state?at a time", func(*fixture) string { return budgetRun + "/state?at=" + at }},
		{"explain", func(f *fixture) string { return explainPath(t, f) }},
	}
}
