package broker

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestWaitingHellosCountAgainstTheirCredentialAndRun: a hello that waits for its pace holds its place of its
// credential's MaxConnsPerCredential and of a worker's run's MaxConnsPerRun, counted as its token is authenticated,
// as it holds its place of MaxConns. Counted only at bind, after the wait, the hellos of one token in debt filled
// every worker place (six of MaxConns 8 less 2 reserved, with MaxConnsPerCredential 2) and another token's hello was
// refused "too many worker connections"; past their bound they are now refused at once, and the others get in.
func TestWaitingHellosCountAgainstTheirCredentialAndRun(t *testing.T) {
	const maxConns, reserved, bound = 8, 2, 2
	for _, tc := range []struct {
		name    string
		opts    Options
		debtor  paceKeys // owes half a minute of its rate: within the hello timeout, so its hellos wait
		owes    int
		waiting []string // the tasks whose hellos wait, bound of them
		why     string   // in the refusal of the hellos past them
		others  func(f *fixture, s seeded)
	}{
		{"a credential's", Options{MaxConnsPerCredential: bound}, cred(workerKey(taskP)),
			30 * DefaultRatePerCredential, []string{taskP, taskP}, "credential",
			func(f *fixture, s seeded) { f.dial().hello(runR, taskQ, s.q) }},
		{"a run's", Options{MaxConnsPerRun: bound}, paceKeys{run: runR},
			30 * DefaultRatePerRun(DefaultRatePerCredential), []string{taskP, taskQ}, "run",
			func(f *fixture, s seeded) {
				f.dialOrchestrator(s).ok("ping", nil)
				_, token := f.runWithWorker("B", "T")
				f.dial().hello("B", "T", token)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.MaxConns, o.ReservedConns, o.HelloTimeout = maxConns, reserved, time.Minute
			f := newFixture(t, fixtureOpts{opts: o})
			waits := watchPacerWaits(f)
			s := f.seed()
			f.awaitConns(0)
			tokens := map[string]string{taskP: s.p, taskQ: s.q}
			f.srv.pacer.charge(tc.debtor, tc.owes, f.srv.pacer.now())
			for _, task := range tc.waiting {
				waits.arm()
				f.dial().sendLine(`{"id":"h","method":"hello","params":{"protocol":1,"runId":"` + runR +
					`","taskId":"` + task + `","token":"` + tokens[task] + `"}}`)
				waits.await("the hello did not wait for its pace")
			}
			for range maxConns - reserved - bound {
				e := f.dial().refusedHello(runR, taskP, s.p, wire.CodeTooManyConnections)
				require.Contains(t, e.Message, tc.why)
			}
			places, workers := f.places()
			require.Equal(t, [2]int{bound, bound}, [2]int{places, workers}, "only the waiting hellos hold places")
			tc.others(f, s)
		})
	}
}

// TestAHelloWaitsForItsPaceNoLongerThanItMay: a hello whose pace is further away than it may wait (the hello
// timeout here, a minute) is refused at once, too-many-connections, and its place given back. It holds a place while
// it waits and nothing reads its socket meanwhile, so a client that has gone would otherwise hold the place for as
// long as its token's debt lasted (an hour of replays, say). A hello its process's debt would hold as long is refused before its token
// is authenticated, and not charged (that costs no more than a connection that never says hello), but only once the
// wait has passed: a process that dials in a loop still meets back-pressure.
func TestAHelloWaitsForItsPaceNoLongerThanItMay(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{HelloTimeout: time.Minute}})
	clock := installPacerClock(f)
	waits := watchPacerWaits(f)
	s := f.seed()
	f.awaitConns(0)
	clock.freeze()
	process := peerKey(os.Getpid())
	f.srv.pacer.charge(cred(workerKey(taskP)), 2*60*DefaultRatePerCredential, clock.p.now()) // two minutes' worth

	e := f.dial().refusedHello(runR, taskP, s.p, wire.CodeTooManyConnections)
	require.Contains(t, e.Message, "for its pace")
	require.Equal(t, float64(DefaultRatePerCredential-helloCost), clock.level(process), "its process pays for it")
	f.awaitPlaces(0)

	f.srv.pacer.charge(cred(process), 2*60*DefaultRatePerCredential, clock.p.now())
	owed := clock.level(process)
	c := f.dial()
	waits.arm()
	c.sendLine(`{"id":"h","method":"hello","params":{"protocol":1,"runId":"` + runR + `","taskId":"` + taskQ +
		`","token":"` + s.q + `"}}`)
	waits.await("a hello its process's debt holds was not held until its wait had passed")
	// The hello waits now, for a minute: whatever the read below finds was sent before the wait.
	c.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := c.rd.ReadFrame()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a hello its process's debt holds is not answered before the wait")
	require.Equal(t, owed, clock.level(process), "a hello refused before its token is read costs nothing more")
	f.awaitPlaces(0) // its token was not read: it claims no place while it waits
}

// TestNoPlaceIsCountedForAConnectionClosedMeanwhile: a connection closed by another goroutine (Close, a write
// failure) between its hello's authentication and its place, or its bind, is neither counted nor indexed: forget has
// run for it and would not run again, so a place, a budget or an index entry made then would never be given back.
func TestNoPlaceIsCountedForAConnectionClosedMeanwhile(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	cl := f.dial()
	f.awaitConns(1)
	var c *conn
	f.srv.mu.Lock()
	for sc := range f.srv.conns {
		c = sc
	}
	f.srv.mu.Unlock()
	c.close(reasonServerClosed)
	cl.closed()

	id := identity{role: events.RoleWorker, runID: runR, taskID: taskP, key: taskP}
	require.Equal(t, errConnClosed, f.srv.claimPlace(c, id))
	require.Equal(t, errConnClosed, f.srv.bindAt(c, id, 0, []byte("{}\n")))
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	require.Zero(t, f.srv.places)
	require.Zero(t, f.srv.workers)
	require.Empty(t, f.srv.credConns)
	require.Empty(t, f.srv.runConns)
	require.Empty(t, f.srv.byRun)
	require.Empty(t, f.srv.byBox)
	require.Empty(t, f.srv.credOut)
	require.Empty(t, f.srv.runOut)
}

// TestAHelloRefusedAtBindGivesBackItsPlace: a hello whose place was claimed as its token was authenticated, and
// whose credential then ended after its pace let it in, is refused at its bind and gives its place back (of
// MaxConns, of its credential and of its run), or every such refusal would shrink the daemon for good.
func TestAHelloRefusedAtBindGivesBackItsPlace(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	paced := holdPaced(f)
	s := f.seed()
	o := f.dialOrchestrator(s)
	f.awaitPlaces(1)
	late := helloHeldPastItsPace(t, f, paced, s, o)
	f.awaitPlaces(2) // the orchestrator's and the held hello's: the revocation ended the first hello's connection

	paced.release() // the held hello goes on to its bind, which refuses it
	r := late.answerOf("h")
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeRevoked, r.Error.Code)
	late.closed()
	f.awaitPlaces(1)
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	require.Zero(t, f.srv.workers)
	require.Empty(t, f.srv.runConns)
	require.NotContains(t, f.srv.credConns, workerKey(taskP))
}

// TestTheOrchestratorTakesNoRoomOfItsRunsOutboundBudget: a run's orchestrator counts against its credential's
// outbound budget, not its run's, as it does not against MaxConnsPerRun or its run's pacing: its workers, which
// hold their run's budget when they read nothing, cannot have its subscription resynced.
func TestTheOrchestratorTakesNoRoomOfItsRunsOutboundBudget(t *testing.T) {
	const perConn, frame = 64 << 10, 16 << 10
	f := newFixture(t, fixtureOpts{opts: Options{
		MaxFrame: frame, OutboundQueueCap: 4096, OutboundBytes: perConn, OutboundBytesPerCredential: perConn,
		OutboundBytesPerRun: perConn, GlobalOutboundBytes: 8 * perConn, RatePerCredential: -1,
	}, write: time.Minute})
	s := f.seed()
	f.streamUsage(t, 10000)
	// P's connection subscribes from the start and reads nothing: it holds its run's whole budget.
	p := f.dial()
	p.hello(runR, taskP, s.p)
	f.stalledSubscription(p, taskP)
	f.srv.mu.Lock()
	held := f.srv.runOut[runR].used.Load()
	f.srv.mu.Unlock()
	require.Greater(t, held, int64(perConn-frame), "P holds its run's budget")

	// The orchestrator reads everything it is sent: fifty events, pushed faster than it reads them one by one.
	o := f.dialOrchestrator(s)
	o.ok("events.subscribe", map[string]any{"sinceSeq": 10000 - 50})
	o.readsWithoutResync(50, "the orchestrator counts against its run's budget")
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	require.Equal(t, 1, f.srv.runOut[runR].conns, "P's connection alone counts against its run's budget")
}

// places is the server's count of places (claimPlace) and of those of workers.
func (f *fixture) places() (places, workers int) {
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	return f.srv.places, f.srv.workers
}

// awaitPlaces waits until the server counts n places: a connection gives its place back when its close is seen.
func (f *fixture) awaitPlaces(n int) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		places, _ := f.places()
		return places == n
	}, guard, time.Millisecond, "places")
}

// TestAHelloWaitsSecondsOfItsRunsDebt: a hello waits for a debt of its credential or run of a few seconds rather
// than fail: a run's workers can owe seconds after a large replay (a page is charged after it is served), and its
// other workers' next hellos were refused for it, though a hello waited that long before and pi-crew's client waits
// 5 s for one. Only a debt past MinHelloPaceWait (or the hello timeout, when longer) refuses a hello.
func TestAHelloWaitsSecondsOfItsRunsDebt(t *testing.T) {
	f := newFixture(t, fixtureOpts{}) // the default hello timeout, 1 s
	clock := installPacerClock(f)
	waits := watchPacerWaits(f)
	s := f.seed()
	f.awaitConns(0)
	clock.freeze()
	rate := DefaultRatePerRun(DefaultRatePerCredential)
	f.srv.pacer.charge(paceKeys{run: runR}, 3*rate, clock.p.now()) // the run's burst and two seconds more

	q := f.dial()
	waits.arm()
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.hello(runR, taskQ, s.q)
	}()
	waits.await("the hello did not wait for its run's pace")
	clock.advance(3 * time.Second)
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("the hello was not answered once its run's debt was paid")
	}
	require.Equal(t, true, q.ok("ping", nil)["pong"])
}
