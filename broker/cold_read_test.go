package broker

import (
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// unreadableCold is a daemon whose run R1 (seeded: tasks P and Q, their credentials) has ended and gone cold, with
// its summary, view and events only in the log's tables, read with no block cache; eio, while on, fails every read
// of a table (EIO), so that R1 cannot be read back from the log. o is R1's orchestrator, a the admin, both
// connected while the log could be read. While eio is on, every read of a table fails, or with from set, those made
// once the cold store has begun its from-th read of a summary (failFromRead).
type unreadableCold struct {
	*fixture
	eio    *errorfs.Toggle
	from   *atomic.Int64
	cs     *atomic.Pointer[projections.ColdStore]
	o, a   *client
	orch   string // R1's orchestrator token
	issued string // Q's token, which R1's orchestrator issued again with issueQ
}

// issueQ is the credential.issue R1's orchestrator sent while R1 was hot.
var issueQ = map[string]any{"taskId": taskQ, "commandId": "issue-q"}

func newUnreadableCold(t *testing.T) unreadableCold {
	mem := vfs.NewMem()
	f := newFixture(t, fixtureOpts{fs: mem, cold: true, snapshotEvery: 1})
	s := f.seed()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	o.ok("msg.send", map[string]any{"to": taskP, "body": "hello"})
	issued := o.ok("credential.issue", issueQ)["token"].(string)
	o.ok("run.transition", map[string]any{"to": "completed"})
	o.nc.Close()
	f.close() // views and a snapshot written; NB: a reopened store holds all of it in its tables, none in a memtable

	from, cs := new(atomic.Int64), new(atomic.Pointer[projections.ColdStore])
	fs, eio := failingTableReads(mem, func() bool { return from.Load() == 0 || cs.Load().SummaryReads() >= from.Load() })
	// NB: no views: none is then written in the background while the test reads (a run is read back from its
	// events), so there is nothing to wait for.
	g := newFixture(t, fixtureOpts{fs: fs, cold: true, uncached: true, noViews: true})
	g.clock.Store(f.clock.Load())
	d := g.dial()
	d.hello("R2", events.OrchestratorKey, g.seedRun("R2", "X"))
	d.ok("run.transition", map[string]any{"to": "completed"}) // R2 goes cold after R1 and takes the one decoded place
	d.nc.Close()
	g.seedRun("R3", "Y") // a group after R2 ended: it goes cold
	g.eng.Read(func(st *projections.State) { require.True(t, st.IsCold(runR) && st.IsCold("R2")) })
	g.eng.Read(func(st *projections.State) { cs.Store(st.ColdStore()) })
	u := unreadableCold{fixture: g, eio: eio, from: from, cs: cs, o: g.dial(), a: g.dial(), orch: s.orch, issued: issued}
	u.o.hello(runR, events.OrchestratorKey, s.orch)
	u.a.helloAdmin()
	return u
}

// failingTableReads is fs with eio, a toggle that, while on, fails the reads of a table (EIO) that fails lets fail
// (every one when fails is nil).
func failingTableReads(fs vfs.FS, fails func() bool) (_ vfs.FS, eio *errorfs.Toggle) {
	eio = &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpFileReadAt && (fails == nil || fails()) {
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	})}
	return errorfs.Wrap(fs, eio), eio
}

// A finished run gone cold that the log cannot give back (a read of its tables fails) is answered replay-failed by
// every query of its records and every command naming it, with the code's own message: never as a run that holds
// nothing (query.tasks answered no task where the log holds two), nor as no run (no-manifest), nor as a revoked
// credential (which closed the orchestrator's connection), and no command is decided without the run's records.
// Once the log can be read, the same requests answer the run as the log holds it.
func TestAColdRunTheLogCannotGiveBackIsAnsweredReplayFailed(t *testing.T) {
	u := newUnreadableCold(t)
	asAdmin := map[string]any{"runId": runR}
	reads := []struct {
		c      *client
		method string
		params map[string]any
	}{
		{u.a, "query.tasks", asAdmin},
		{u.a, "query.run", asAdmin},
		{u.a, "query.delegations", asAdmin},
		{u.a, "query.ledger", asAdmin},
		{u.a, "query.mailbox", map[string]any{"runId": runR, "taskId": taskP}},
		{u.a, "query.jobs", asAdmin},
		{u.a, "events.since", asAdmin},
		{u.o, "query.tasks", map[string]any{}},
		{u.o, "msg.inbox", nil},
		{u.o, "task.waitStatus", map[string]any{"taskId": taskP, "until": "running", "timeoutMs": 0}},
		{u.o, "events.since", map[string]any{}},
	}
	commands := []struct {
		method string
		params map[string]any
	}{
		{"run.transition", map[string]any{"to": "running"}},
		{"task.transition", map[string]any{"taskId": taskP, "to": "completed"}},
		{"msg.send", map[string]any{"to": taskP, "body": "again", "commandId": "c1"}},
	}

	u.eio.On()
	for _, r := range reads {
		e := r.c.fails(r.method, r.params, wire.CodeReplayFailed)
		require.Equal(t, wire.CodeReplayFailed.Message(), e.Message, r.method)
	}
	for _, c := range commands {
		e := u.o.fails(c.method, c.params, wire.CodeReplayFailed)
		require.Equal(t, wire.CodeReplayFailed.Message(), e.Message, c.method)
	}
	u.eio.Off()

	tasks := u.o.ok("query.tasks", map[string]any{})["tasks"].([]any)
	require.Len(t, tasks, 2, "the log holds the run's tasks")
	u.eng.Read(func(st *projections.State) {
		run, ok := st.Run(runR)
		require.True(t, ok)
		require.Equal(t, projections.RunCompleted, run.Status, "no command was decided")
	})
	u.o.ok("run.transition", map[string]any{"to": "running"})
}

// A hello naming a finished run gone cold whose summary the log cannot give back cannot check its token: it is
// answered replay-failed, as every other request of the run is, and its connection closed (every refused hello
// closes it) — never auth "hello rejected", which told the run's orchestrator its token was bad. A hello naming a
// run the log does not hold answers alike while the index cannot be read (it is not known to be absent), so the
// answer still tells nobody whether a run exists. Once the log can be read, the same token is accepted.
func TestAHelloOfAColdRunTheLogCannotGiveBackIsAnsweredReplayFailed(t *testing.T) {
	u := newUnreadableCold(t)
	hello := func(runID, token string) map[string]any {
		return map[string]any{"protocol": 1, "runId": runID, "taskId": events.OrchestratorKey, "token": token}
	}

	u.eio.On()
	for _, h := range []map[string]any{hello(runR, u.orch), hello(runR, "wrong"), hello("R9", u.orch)} {
		c := u.dial()
		e := c.fails("hello", h, wire.CodeReplayFailed)
		require.Equal(t, wire.CodeReplayFailed.Message(), e.Message, h["runId"])
		c.closed()
	}
	u.eio.Off()

	u.dial().hello(runR, events.OrchestratorKey, u.orch)
}

// A page of query.runs that meets a failed read of the index of cold runs' summaries is answered replay-failed, the
// code of a log that could not be read: not internal (a bug, for which crewctl exits 1 as for a problem found).
// The connection stays open, and once the log can be read the page lists every run.
func TestAPageOfRunsTheIndexCannotGiveIsAnsweredReplayFailed(t *testing.T) {
	u := newUnreadableCold(t)

	u.eio.On()
	for _, p := range []map[string]any{{}, {"newest": true}, {"status": "completed"}} {
		e := u.a.fails("query.runs", p, wire.CodeReplayFailed)
		require.Equal(t, wire.CodeReplayFailed.Message(), e.Message)
	}
	u.eio.Off()

	runs := u.a.ok("query.runs", map[string]any{})["runs"].([]any)
	require.Len(t, runs, 3)
}

// A query whose cold run was found and read back (params.run), then meets a log that fails as it reads the run
// under the state's lock (the one decoded place taken by another run meanwhile, or the run's summary read again
// there), is answered replay-failed: never as a run that holds nothing (an empty page), nor as no run (a zero
// record from query.run), nor as no job or no task, nor a nested call allowed as covered by no lease (job.authorize).
// The log fails at the read (onRead), after the read-back.
func TestAQueryWhoseColdRunTheLogStopsGivingBackIsAnsweredReplayFailed(t *testing.T) {
	u := newUnreadableCold(t)
	fail := u.failingAtRead()
	a := u.dial()
	a.helloAdmin()
	asAdmin := func(kv ...any) map[string]any {
		p := map[string]any{"runId": runR}
		for i := 0; i < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
		return p
	}
	reads := []struct {
		method string
		params map[string]any
	}{
		{"query.run", asAdmin()},
		{"query.tasks", asAdmin()},
		{"query.delegations", asAdmin()},
		{"query.ledger", asAdmin()},
		{"query.ledger", asAdmin("taskId", taskP)},
		{"query.mailbox", asAdmin("taskId", taskP)},
		{"query.jobs", asAdmin()},
		{"query.job", asAdmin("jobId", "J")},
		{"job.authorize", asAdmin("parentToolCallId", "root/call", "tool", "write")},
		{"task.waitStatus", asAdmin("taskId", taskP, "until", "running", "timeoutMs", 0)},
	}
	for _, r := range reads {
		fail.Store(true)
		e := a.fails(r.method, r.params, wire.CodeReplayFailed)
		require.Equal(t, wire.CodeReplayFailed.Message(), e.Message, r.method)
		require.False(t, fail.Load(), "%s: the log failed at the read", r.method)
		u.eio.Off()
		a.ok("query.runs", map[string]any{}) // the connection stays open
	}
	tasks := a.ok("query.tasks", asAdmin())["tasks"].([]any)
	require.Len(t, tasks, 2, "the log holds the run's tasks")
}

// failFromRead makes the k-th read of a summary the cold store begins from now fail, and every read after it, while
// eio is on. NB: by the store's count of its summaries, not a count of the tables' reads, which takes in Pebble's
// background compactions too: a compaction that read a table meanwhile moved the failure to another read.
func (u unreadableCold) failFromRead(k int64) {
	u.from.Store(u.cs.Load().SummaryReads() + k)
}

// A hello or a request checked against the summary of a cold run read once, then meeting a log that fails as it
// reads that summary again in the same read of the state (the run's orchestrator credential, its tier), is answered
// replay-failed: the hello was refused auth "hello rejected" (its token bad, for which clients give up), and the
// orchestrator's connection was closed revoked "token revoked", as if the credential had ended for good.
func TestACredentialWhoseColdRunsSummaryFailsOnItsSecondReadIsAnsweredReplayFailed(t *testing.T) {
	u := newUnreadableCold(t)
	u.failFromRead(2) // the first read of the summary passes, the next fails
	u.eio.On()
	h := u.dial()
	e := h.fails("hello", map[string]any{"protocol": 1, "runId": runR, "taskId": events.OrchestratorKey, "token": u.orch},
		wire.CodeReplayFailed)
	require.Equal(t, wire.CodeReplayFailed.Message(), e.Message)
	u.eio.Off()

	u.failFromRead(2)
	u.eio.On()
	e = u.o.fails("ping", nil, wire.CodeReplayFailed)
	require.Equal(t, wire.CodeReplayFailed.Message(), e.Message)
	u.eio.Off()
	u.o.ok("ping", nil) // the connection stays open, its credential live
	u.dial().hello(runR, events.OrchestratorKey, u.orch)
}

// A retried credential.issue of a cold run, its outcome recorded, is answered its token again only once the
// credential it recorded is found among the run's records, read back for it. When that read of the run fails after
// the read-back (onRead), the retry is answered replay-failed: not bad-params "commandId was already used for a
// request whose credential is not current; retry with a new commandId", which would have the runtime issue the
// credential again, ending the one its worker holds. Once the log can be read, the retry answers the same token.
func TestARetriedIssueOfAColdRunTheLogStopsGivingBackIsAnsweredReplayFailed(t *testing.T) {
	u := newUnreadableCold(t)
	fail := u.failingAtRead()
	fail.Store(true)
	e := u.o.fails("credential.issue", issueQ, wire.CodeReplayFailed)
	require.Equal(t, wire.CodeReplayFailed.Message(), e.Message)
	require.False(t, fail.Load(), "the log failed after the read-back")
	u.eio.Off()

	require.Equal(t, u.issued, u.o.ok("credential.issue", issueQ)["token"])
}

// failingAtRead makes the log fail (eio on) as the next request after fail is set reads the published state
// (onRead): after its run was found and read back. fail is cleared as the log fails.
func (u unreadableCold) failingAtRead() (fail *atomic.Bool) {
	fail = new(atomic.Bool)
	u.srv.onRead = func() {
		if fail.CompareAndSwap(true, false) {
			u.eio.On()
		}
	}
	return fail
}

// A hello whose token checked out against a cold run's summary, then meets a log that fails as its bind checks the
// credential again (the summary's third read), is answered replay-failed and its connection closed, as every
// refused hello's is: it was left open and unauthenticated with the place it claimed, and a second hello on it
// would claim another, which its close never gave back.
func TestAHelloRefusedReplayFailedAtItsBindClosesItsConnection(t *testing.T) {
	u := newUnreadableCold(t)
	h := u.dial()
	u.failFromRead(3) // the hello's two reads of the summary pass, its bind's fails
	u.eio.On()
	e := h.fails("hello", map[string]any{"protocol": 1, "runId": runR, "taskId": events.OrchestratorKey, "token": u.orch},
		wire.CodeReplayFailed)
	u.eio.Off()
	require.Equal(t, wire.CodeReplayFailed.Message(), e.Message)
	_, _ = h.nc.Write([]byte(`{"id":"p","method":"ping","params":null}` + "\n")) // NB: may meet the close
	h.closed()
}
