package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// coldFixture is a fixture whose run R1 (seed, plus coldUsage usage events) has ended and gone cold and is not among
// the decoded cold runs, so reading it back costs a re-fold from the log; run R2 is running, with task W and W's
// worker token. A credential's pacing bucket refills at one unit a second, and re-folding R1 costs far more units than
// a hello and a few requests: what a credential was charged shows in its bucket's level.
type coldFixture struct {
	*fixture
	r1   seeded
	w    string // R2's worker token for W
	orch string // R2's orchestrator token
}

func newColdFixture(t *testing.T) coldFixture {
	f := newFixture(t, fixtureOpts{cold: true, opts: Options{RatePerCredential: 1, BurstPerCredential: coldBurst}})
	cf := coldFixture{fixture: f, r1: f.seed(), orch: f.seedRun("R2", "W")}
	f.streamUsage(t, coldUsage)
	o := f.dial()
	o.hello("R2", events.OrchestratorKey, cf.orch)
	cf.w = o.ok("credential.issue", map[string]any{"taskId": "W"})["token"].(string)
	o.nc.Close()
	end := func(run, orch string) {
		c := f.dial()
		c.hello(run, events.OrchestratorKey, orch)
		c.ok("run.transition", map[string]any{"to": "completed"})
		c.nc.Close()
	}
	end(runR, cf.r1.orch)
	end("R3", f.seedRun("R3", "X")) // R3 goes cold after R1 and takes the one decoded place
	f.eng.Read(func(st *projections.State) {
		require.True(t, st.IsCold(runR))
		require.True(t, st.IsCold("R3"))
	})
	return cf
}

const (
	coldUsage = 4 * helloCost
	coldBurst = 1_000_000
)

// refolds is how many cold runs the engine has read back from the log so far.
func (f *fixture) refolds() int64 {
	var n int64
	f.eng.Read(func(st *projections.State) { n = st.ColdStore().Refolds() })
	return n
}

// helloFails sends a run-scoped hello that must be refused with code, re-folding no cold run, and requires the
// connection closed.
func (f *fixture) helloFails(runID, taskID, token string, code wire.Code) {
	f.t.Helper()
	before := f.refolds()
	c := f.dial()
	r := c.call("hello", map[string]any{"protocol": 1, "runId": runID, "taskId": taskID, "token": token})
	require.Equal(f.t, before, f.refolds(), "a refused hello (%s, %s) re-folded a cold run", runID, taskID)
	require.NotNil(f.t, r.Error)
	require.Equal(f.t, code, r.Error.Code, r.Error.Message)
	c.closed()
}

// A hello naming a cold run costs no re-fold until its token checks out: a client holding no valid token cannot
// make the daemon read runs back from the log, nor churn the cold runs' cache.
func TestHelloNamingAColdRunRefoldsNothingBeforeTheTokenChecksOut(t *testing.T) {
	f := newColdFixture(t)
	before := f.refolds()
	f.helloFails(runR, events.OrchestratorKey, "not-the-token", wire.CodeAuth)
	f.helloFails(runR, taskP, "not-the-token", wire.CodeAuth)
	f.helloFails(runR, "no-such-task", "not-the-token", wire.CodeAuth)
	f.helloFails(runR, taskP, f.r1.q, wire.CodeAuth) // another task's token
	f.helloFails(runR, taskP, f.r1.p, wire.CodeAuth) // its own token: a worker of an ended run has nothing to do
	require.Equal(t, before, f.refolds(), "a refused hello re-folded a cold run")

	// The run's orchestrator is authenticated from the cold run's summary, still with no re-fold; its first query
	// reads the run back, once, and the events it re-folded are charged to its credential.
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, f.r1.orch)
	require.Equal(t, before, f.refolds(), "an accepted hello re-folded a cold run")
	o.ok("query.tasks", nil)
	require.Equal(t, before+1, f.refolds())
	o.ok("query.tasks", nil)
	require.Equal(t, before+1, f.refolds(), "the run read back stays decoded")

	// The re-fold was charged: the bucket lost at least the run's events (more than the hello and the requests
	// cost, and than it refilled at one unit a second in any plausible run of this test).
	var run projections.Run
	f.eng.Read(func(st *projections.State) { run, _ = st.Run(runR) })
	require.Greater(t, run.Usage.Events, int64(coldUsage))
	f.srv.pacer.mu.Lock()
	orch := credKey(identity{runID: runR, key: events.OrchestratorKey})
	level := f.srv.pacer.creds.refill(orch, f.srv.pacer.now()).level
	f.srv.pacer.mu.Unlock()
	require.LessOrEqual(t, level, float64(coldBurst-run.Usage.Events), "the events re-folded were not charged")
}

// A worker naming another run, cold, is refused before the run is read back.
func TestAWorkerNamingAnotherColdRunRefoldsNothing(t *testing.T) {
	f := newColdFixture(t)
	before := f.refolds()
	w := f.dial()
	w.hello("R2", "W", f.w)
	w.fails("query.tasks", map[string]any{"runId": runR}, wire.CodeForbidden)
	w.fails("query.run", map[string]any{"runId": runR}, wire.CodeForbidden)
	w.fails("msg.send", map[string]any{"runId": runR, "to": taskP, "body": "hi"},
		wire.CodeForbidden)
	o := f.dial()
	o.hello("R2", events.OrchestratorKey, f.orch)
	o.fails("query.mailbox", map[string]any{"runId": runR, "recipient": taskP}, wire.CodeForbidden)
	require.Equal(t, before, f.refolds(), "a request for a run its credential may not read re-folded it")
}

// query.run and query.slots answer from a cold run's summary and the daemon-wide pool (which holds hot runs only),
// so they read nothing back from the log, and they answer what they answer once the run is read back.
func TestSummaryQueriesOfAColdRunReadNothingBack(t *testing.T) {
	f := newColdFixture(t)
	before := f.refolds()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, f.r1.orch)
	run := o.ok("query.run", nil)
	slots := o.ok("query.slots", nil)
	a := f.dial()
	a.helloAdmin()
	require.Equal(t, run, a.ok("query.run", map[string]any{"runId": runR}))
	require.Equal(t, slots, a.ok("query.slots", map[string]any{"runId": runR}))
	require.Equal(t, before, f.refolds(), "a summary query read a cold run back")
	require.Equal(t, "completed", run["status"])

	o.ok("query.tasks", nil)
	require.Equal(t, before+1, f.refolds(), "query.tasks reads the cold run back")
	require.Equal(t, run, o.ok("query.run", nil), "the run read back answers as its summary")
}

// A retried command that minted a secret (credential.issue, job.create) is answered its secret again only after the
// credential it recorded is checked against the run's records; for a cold run that check reads the run back. It is
// read as a query reads it: outside the state's lock, with the events re-folded charged to the caller, and the
// retry answers what it answered while the run was hot.
func TestARetriedIssueOfAColdRunIsChargedItsRefold(t *testing.T) {
	f := newFixture(t, fixtureOpts{cold: true, opts: Options{RatePerCredential: 1, BurstPerCredential: coldBurst}})
	clock := installPacerClock(f)
	s := f.seed()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	issue := map[string]any{"taskId": taskQ, "commandId": "issue-q"}
	token := o.ok("credential.issue", issue)["token"]
	f.streamUsage(t, coldUsage)
	o.ok("run.transition", map[string]any{"to": "completed"})
	// R3 goes cold after R1 and takes the one decoded place.
	r3 := f.dial()
	r3.hello("R3", events.OrchestratorKey, f.seedRun("R3", "X"))
	r3.ok("run.transition", map[string]any{"to": "completed"})
	var run projections.Run
	f.eng.Read(func(st *projections.State) {
		require.True(t, st.IsCold(runR))
		run, _ = st.Run(runR)
	})
	require.Greater(t, run.Usage.Events, int64(coldUsage))

	before := f.refolds()
	orch := credKey(identity{runID: runR, key: events.OrchestratorKey})
	level := func() float64 {
		f.srv.pacer.mu.Lock()
		defer f.srv.pacer.mu.Unlock()
		return f.srv.pacer.creds.refill(orch, f.srv.pacer.now()).level
	}
	clock.freeze() // NB: no refill between the two readings of the bucket, however slow the machine
	start := level()
	require.Equal(t, token, o.ok("credential.issue", issue)["token"], "the retry answers the token it minted")
	require.Equal(t, before+1, f.refolds(), "the retry read the cold run back")
	f.eng.Read(func(st *projections.State) { require.True(t, st.IsCold(runR), "the retry was answered, not decided") })
	require.LessOrEqual(t, level(), start-float64(run.Usage.Events),
		"the events re-folded for the retry were not charged")
}

// A cold run's orchestrator credential is in its summary, and is checked from there as a hot run's is: revoked, its
// own token is told so (revoked "token revoked", for good), not taken for a bad token, and the run is not read back.
func TestARevokedOrchestratorOfAColdRunIsToldRevoked(t *testing.T) {
	f := newColdFixture(t)
	r, err := f.eng.Submit(context.Background(), commands.Request{Actor: events.Actor{Role: events.RoleAdmin},
		Command: &commands.CredentialRevoke{RunID: runR, TaskID: events.OrchestratorKey}})
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	require.Eventually(t, func() bool { // faulted in for the revocation, it goes cold again at the next pass
		cold := false
		f.eng.Read(func(st *projections.State) { cold = st.IsCold(runR) })
		return cold
	}, guard, 10*time.Millisecond)
	f.helloFails(runR, events.OrchestratorKey, f.r1.orch, wire.CodeRevoked)
	f.helloFails(runR, events.OrchestratorKey, "not-the-token", wire.CodeAuth)
}
