package httpapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/projections"
)

// A request naming a cold run re-folds it from the log only once the request is authenticated: without a valid
// token, no route costs a read of the log.
func TestAPIReadsAColdRunBackOnlyForAnAuthenticatedRequest(t *testing.T) {
	f := newFixtureEngine(t, Options{}, commands.Options{SnapshotEvery: -1, ExpiryInterval: -1, Retention: -1, ColdCache: 1})
	refolds := func() int64 {
		var n int64
		f.eng.Read(func(st *projections.State) { n = st.ColdStore().Refolds() })
		return n
	}
	// The scenario's ended runs are cold; with one decoded at most, the one that went cold first is not.
	var cold string
	f.eng.Read(func(st *projections.State) {
		page, err := st.Runs(projections.RunFilter{})
		require.NoError(t, err)
		for _, r := range page.Runs {
			if st.IsCold(r.RunID) {
				cold = r.RunID
				break
			}
		}
	})
	require.NotEmpty(t, cold)
	before := refolds()
	for _, route := range []string{"", "/tasks", "/delegations", "/ledger", "/mailbox", "/asks", "/credentials",
		"/events", "/state", "/jobs", "/jobs/j1"} {
		for _, auth := range []string{"", "Bearer wrong-token", "Basic abc"} {
			status, _ := f.getAs("/api/v1/runs/"+cold+route, auth)
			require.Equal(t, http.StatusUnauthorized, status, "%s %q", route, auth)
		}
	}
	require.Equal(t, before, refolds(), "an unauthenticated request re-folded a cold run")
	f.ok("/api/v1/runs/" + cold)
	require.Equal(t, before, refolds(), "the run's own route answers from its summary")
	f.ok("/api/v1/runs/" + cold + "/events")
	f.ok("/api/v1/runs/" + cold + "/events?order=desc&limit=2")
	require.Equal(t, before, refolds(), "the run's events are read from the log, not from the run read back")
	f.ok("/api/v1/runs/" + cold + "/tasks")
	require.Equal(t, before+1, refolds(), "an authenticated request reads the cold run back")
}
