package httpapi

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
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
	cold := f.firstColdRun()
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

// A finished run's credentials answer alike hot and cold: who issued and revoked each, and why, are the run's
// records, read back with the run (from its view, or re-folded) like the rest of them.
func TestCredentialsOfAColdRunShowWhoIssuedAndRevoked(t *testing.T) {
	f := newFixtureEngine(t, Options{}, commands.Options{SnapshotEvery: -1, ExpiryInterval: -1, Retention: -1, ColdCache: 1})
	const run = "team_20261001110000_a1b2c3d4e5f6000c"
	f.do(audittest.Admin, &commands.RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/srv/c",
		OrchestratorDigest: digestOf("tok-orchestrator")})
	f.do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"})
	for _, task := range []string{"01_a", "02_b"} {
		f.do(audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: task, Role: "executor", Agent: "executor",
			Title: task, Cwd: "/srv/c/" + task, StepID: task})
		r := f.do(audittest.Orchestrator, &commands.CredentialIssue{RunID: run, TaskID: task, Digest: digestOf("tok-" + task)})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
	}
	r := f.do(audittest.Admin, &commands.CredentialRevoke{RunID: run, TaskID: "01_a", Reason: "rotated"})
	require.Nil(t, r.Rejected, "%v", r.Rejected)
	r = f.do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "completed"})
	require.Nil(t, r.Rejected, "%v", r.Rejected)
	path := "/api/v1/runs/" + run + "/credentials"
	hot := f.ok(path)

	// With no retention, the next group's eviction pass makes the run cold; the published copy follows. Another
	// cold run read takes the one place of the cache, so the run is read back from the log.
	f.do(audittest.Orchestrator, &commands.TaskUsage{RunID: liveRun, TaskID: liveTasks[0], Input: 1, Turns: 1})
	var cold bool
	f.eng.Read(func(st *projections.State) { cold = st.IsCold(run) })
	require.True(t, cold, "the finished run went cold")
	f.ok(budgetRun + "/tasks")
	var before, after int64
	f.eng.Read(func(st *projections.State) { before = st.ColdStore().Refolds() })
	require.Equal(t, hot, f.ok(path), "the cold run's credentials answer as the hot run's")
	f.eng.Read(func(st *projections.State) { after = st.ColdStore().Refolds() })
	require.Equal(t, before+1, after, "the run was read back from the log")

	creds := hot["credentials"].([]any)
	require.Len(t, creds, 3)
	who := func(i int) []any {
		c := creds[i].(map[string]any)
		return []any{c["key"], c["issuedBy"], c["revoked"], c["revokedBy"], c["revokedReason"]}
	}
	require.Equal(t, []any{"orchestrator", "admin", false, nil, nil}, who(0))
	require.Equal(t, []any{"01_a", "orchestrator", true, "admin", "rotated"}, who(1))
	require.Equal(t, []any{"02_b", "orchestrator", false, nil, nil}, who(2))
}

// A delegation's holdsSlot says whether it holds a slot of the pool itself. The pool is keyed by subId, and a run
// whose delegation settled long ago (here cold) may share its subId with another run's delegation in flight (an
// import chooses its own subIds, and may take one whose delegation another run settled): the settled one holds
// nothing.
func TestASettledDelegationHoldsNoSlotAnotherRunsDelegationHolds(t *testing.T) {
	f := newFixtureEngine(t, Options{}, commands.Options{SnapshotEvery: -1, ExpiryInterval: -1, Retention: -1})
	const sub, imported = "gc-00000001", "imported-1"
	settled := f.ok(budgetRun + "/delegations")["delegations"].([]any)[0].(map[string]any)
	require.Equal(t, sub, settled["subId"])
	require.Equal(t, "completed", settled["status"])
	r := f.do(events.Actor{Role: events.RoleAdmin}, &commands.Import{Source: events.ForeignSourcePicrew, RunID: imported,
		Events: []commands.ImportedEvent{
			{Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{Team: "t", Goal: "g", Cwd: "/srv"}},
			{Type: events.TypeDelegateAdmitted, TimeMs: 1000, Payload: &events.DelegateAdmitted{TaskID: "T", SubID: sub,
				ChildDepth: 2, Role: "explorer", Unmetered: true}}}})
	require.Nil(t, r.Rejected, "%v", r.Rejected)
	f.eng.Read(func(st *projections.State) {
		require.True(t, st.IsCold(audittest.RunBudget))
		holder, ok := st.SlotHolder(sub)
		require.True(t, ok)
		require.Equal(t, imported, holder)
	})

	atHead := budgetRun + "/state?at=" + strconv.FormatUint(head(f), 10)
	for _, path := range []string{budgetRun + "/delegations", atHead} {
		d := f.ok(path)["delegations"].([]any)[0].(map[string]any)
		require.Equal(t, sub, d["subId"], path)
		require.Equal(t, false, d["holdsSlot"], "%s: the settled delegation holds another run's slot", path)
	}
	d := f.ok("/api/v1/runs/" + imported + "/delegations")["delegations"].([]any)[0].(map[string]any)
	require.Equal(t, true, d["holdsSlot"], "the imported delegation holds its slot")
}

// firstColdRun is the first run of the runs list that is cold.
func (f *fixture) firstColdRun() string {
	f.t.Helper()
	var cold string
	f.eng.Read(func(st *projections.State) {
		page, err := st.Runs(projections.RunFilter{})
		require.NoError(f.t, err)
		for _, r := range page.Runs {
			if st.IsCold(r.RunID) {
				cold = r.RunID
				break
			}
		}
	})
	require.NotEmpty(f.t, cold)
	return cold
}
