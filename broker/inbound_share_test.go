package broker

import (
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// stallLine has c send a request line of about n bytes that it never ends, from a goroutine of its own (the reader
// may leave it blocked on a full socket); wg counts it until its write returns.
func stallLine(c *client, n int, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.nc.SetWriteDeadline(time.Now().Add(guard))
		c.nc.Write([]byte(`{"id":"x","method":"ping","params":"` + strings.Repeat("x", n))) // never ended
	}()
}

// answersLongPingWithin requires c's ping of a parameter of n bytes, longer than the read-ahead, to be answered
// within d.
func answersLongPingWithin(t *testing.T, c *client, n int, d time.Duration, who string) {
	t.Helper()
	start := time.Now()
	c.sendLine(`{"id":"long","method":"ping","params":"` + strings.Repeat("y", n) + `"}`)
	c.nc.SetReadDeadline(time.Now().Add(d))
	f, err := c.rd.ReadFrame()
	require.NoError(t, err, "%s's request of %d bytes is not answered within %v", who, n, d)
	r := c.result("ping", decodeResponse(t, f))
	require.Equal(t, true, r["pong"], who)
	require.Less(t, time.Since(start), d, who)
}

// decodeResponse decodes frame f as a response.
func decodeResponse(t *testing.T, f []byte) wire.Response {
	t.Helper()
	var r wire.Response
	require.NoError(t, jsonUnmarshal(f, &r))
	return r
}

// TestOneRunCannotHoldTheInboundBudget: the workers of one run, a credential to each of its tasks, that each leave
// lines longer than the read-ahead unfinished hold at most their run's share of the daemon's inbound budget
// (InboundBytesPerRun, a quarter of it by default), so another run's worker, their own run's orchestrator and the
// admin are each served a request of 20 KiB at once. Without the shares, their lines held all of
// GlobalInboundBytes, for as long as they stayed, and every other client's request longer than 4 KiB waited the
// write timeout for room and then was closed.
func TestOneRunCannotHoldTheInboundBudget(t *testing.T) {
	const (
		budget = 1 << 20   // four lines of the default frame cap
		creds  = 4         // R's workers' credentials
		conns  = 2         // each one's connections
		stall  = 200 << 10 // each stalled line's, spilled into MaxFrame-1 bytes of chunks
		long   = 20 << 10  // the others' requests
		// longSpill is what a request of long bytes spills into: chunks of 4, 4, 8 and 16 KiB.
		longSpill = 32 << 10
	)
	f := newFixture(t, fixtureOpts{opts: Options{GlobalInboundBytes: budget}, write: time.Minute})
	s := f.seed()
	o := f.dialOrchestrator(s)
	tasks, tokens := f.issueWorkers(o, creds)
	_, token := f.runWithWorker("B", "T")
	b := f.dial()
	b.hello("B", "T", token)
	admin := f.dial()
	admin.helloAdmin()

	var writes sync.WaitGroup
	for i, task := range tasks {
		for range conns {
			c := f.dial()
			c.hello(runR, task, tokens[i])
			stallLine(c, stall, &writes)
		}
	}
	require.Eventually(t, func() bool { return f.srv.inBudget.inUse() >= wire.DefaultMaxFrame-1 }, guard,
		time.Millisecond, "R's workers' lines take the budget")
	// NB: a condition, not a pause: the others' requests are sent once R's workers' lines have taken so much of a
	// budget they count against, their run's or the daemon's, that a request of long bytes counted against it too
	// would find no room. With the shares that is their run's at once; were the shares not kept, the daemon's once
	// the lines that find room there have taken it.
	require.Eventually(t, func() bool {
		f.srv.mu.Lock()
		run := f.srv.runIn[runR]
		f.srv.mu.Unlock()
		return leavesLessThan(run, longSpill) || leavesLessThan(&f.srv.inBudget, longSpill)
	}, guard, time.Millisecond, "R's workers' lines take all they can")

	answersLongPingWithin(t, b, long, 5*time.Second, "another run's worker")
	answersLongPingWithin(t, o, long, 5*time.Second, "R's orchestrator")
	answersLongPingWithin(t, admin, long, 5*time.Second, "the admin")
	require.LessOrEqual(t, f.srv.inBudget.inUse(), int64(budget/4), "R's workers hold their run's share at most")

	// NB: the server's close, which ends every reader's wait and gives back every byte at once.
	srv := f.srv
	f.close()
	awaitGroup(t, &writes, "end of the stalled lines' writes")
	require.Zero(t, srv.inBudget.inUse(), "every byte is given back once")
}

// leavesLessThan reports whether b (nil: none) has less than n bytes of room left.
func leavesLessThan(b *inboundBudget, n int64) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit-b.used < n
}

// waitsForRoom reports whether a reader waits for room in b.
func waitsForRoom(b *inboundBudget) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters) > 0
}

// TestInboundSharesPerCredentialAndRun: a reader takes a line's bytes from its credential's share and a worker's
// from its run's as well as from the daemon's, all of them or none: a credential's second line waits for its own
// share, holding none of its run's or the daemon's meanwhile; a third credential of the run waits for the run's,
// holding none of its own; the run's orchestrator, counted against its own credential's share only, and another
// run's worker are served meanwhile, and the admin counts against no share. The server's close gives every byte
// back to every budget once.
func TestInboundSharesPerCredentialAndRun(t *testing.T) {
	const (
		frame = 64 << 10
		line  = frame - 1 // what a line longer than half the cap spills into
		stall = 60 << 10
	)
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame, GlobalInboundBytes: 8 * frame,
		InboundBytesPerCredential: frame, InboundBytesPerRun: 2 * frame}, write: time.Minute})
	s := f.seed()
	o := f.dialOrchestrator(s)
	tasks, tokens := f.issueWorkers(o, 1)
	_, token := f.runWithWorker("B", "T")
	budgets := func() (cred map[string]*inboundBudget, run *inboundBudget) {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return maps.Clone(f.srv.credIn), f.srv.runIn[runR]
	}
	var writes sync.WaitGroup
	stalled := func(task, token string) {
		c := f.dial()
		c.hello(runR, task, token)
		stallLine(c, stall, &writes)
	}

	stalled(taskP, s.p)
	require.Eventually(t, func() bool { cred, _ := budgets(); return cred[workerKey(taskP)].inUse() == line }, guard,
		time.Millisecond, "P's first line takes its share")
	stalled(taskP, s.p)
	require.Eventually(t, func() bool { cred, _ := budgets(); return waitsForRoom(cred[workerKey(taskP)]) }, guard,
		time.Millisecond, "P's second line waits for P's share")
	stalled(taskQ, s.q)
	require.Eventually(t, func() bool { _, run := budgets(); return run.inUse() == 2*line }, guard,
		time.Millisecond, "Q's line takes its share, and with P's the run's")
	stalled(tasks[0], tokens[0])
	require.Eventually(t, func() bool { _, run := budgets(); return waitsForRoom(run) }, guard, time.Millisecond,
		"a third credential's line waits for the run's share")

	cred, run := budgets()
	require.Equal(t, int64(line), cred[workerKey(taskP)].inUse(), "P's second line holds none of P's share")
	require.Zero(t, cred[workerKey(tasks[0])].inUse(), "a line waiting for the run's share holds none of its own")
	require.Equal(t, int64(2*line), run.inUse())
	require.Equal(t, int64(2*line), f.srv.inBudget.inUse(), "the waiting lines hold none of the daemon's budget")

	answersLongPingWithin(t, o, 20<<10, 5*time.Second, "R's orchestrator")
	b := f.dial()
	b.hello("B", "T", token)
	answersLongPingWithin(t, b, 20<<10, 5*time.Second, "another run's worker")
	admin := f.dial()
	admin.helloAdmin()
	answersLongPingWithin(t, admin, 20<<10, 5*time.Second, "the admin")
	cred, run = budgets()
	require.NotContains(t, cred, "", "the admin has no share")
	orch := credKey(identity{role: events.RoleOrchestrator, runID: runR, key: events.OrchestratorKey})
	require.Zero(t, cred[orch].inUse(), "the orchestrator's line, served, is given back")
	require.Equal(t, int64(2*line), run.inUse(), "the orchestrator's line took none of its run's share")

	srv := f.srv
	f.close()
	awaitGroup(t, &writes, "end of the stalled lines' writes")
	require.Zero(t, srv.inBudget.inUse())
	require.Zero(t, run.inUse())
	for k, b := range cred {
		require.Zero(t, b.inUse(), "credential %q", k)
	}
	require.Empty(t, srv.credIn, "a budget is dropped with its last connection")
	require.Empty(t, srv.runIn)
}

// TestInboundSharesGiveBackOnceToEachBudget: two readers of one credential, joined to its share and its run's at
// their binds, take and release lines' chunks from the three budgets, which are small enough for their takes to
// wait and fail, while their connections' closes race them (before a bind, after it, with a chunk held): every
// budget ends with nothing held, each byte given back to each budget by the close or by the reader, never both and
// never to a budget it was not taken from (run with -race).
func TestInboundSharesGiveBackOnceToEachBudget(t *testing.T) {
	global, cred, run := &inboundBudget{limit: 64 << 10}, &inboundBudget{limit: 32 << 10},
		&inboundBudget{limit: 48 << 10}
	for i := range 200 {
		var wg sync.WaitGroup
		for r := range 2 {
			done := make(chan struct{})
			sh := &inboundShare{budgets: [maxBudgets]*inboundBudget{global}, done: done, wait: time.Millisecond}
			wg.Add(2)
			go func() {
				defer wg.Done()
				for j := range 40 {
					if j == 10 { // the hello's bind, between two lines
						sh.share(cred)
						sh.share(run)
					}
					if n := 4096 << ((i + j + r) % 3); sh.Take(n) {
						sh.Release(n)
					}
					if j == 20+r {
						sh.Take(8192) // held when the close comes, or refused after it
					}
				}
			}()
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration((i*7+r*3)%40) * 10 * time.Microsecond)
				close(done)
				sh.close()
			}()
		}
		awaitGroup(t, &wg, "end of the takers and the closers")
		require.Zero(t, global.inUse(), "round %d: the daemon's budget", i)
		require.Zero(t, cred.inUse(), "round %d: the credential's", i)
		require.Zero(t, run.inUse(), "round %d: the run's", i)
	}
}

// TestAReaderThatLeavesABudgetDuringATakeHoldsNothingOfIt: a reader that leaves a budget while it waits for its room
// (its connection's credential ended) is given the room by a release and keeps nothing of it once its Take ends,
// holding its chunk against the budgets it still counts against.
func TestAReaderThatLeavesABudgetDuringATakeHoldsNothingOfIt(t *testing.T) {
	global, cred := &inboundBudget{limit: 1000}, &inboundBudget{limit: 100}
	cred.add(100) // another reader's
	sh := &inboundShare{budgets: [maxBudgets]*inboundBudget{global, cred}, done: make(chan struct{}), wait: guard}
	took := make(chan bool)
	go func() { took <- sh.Take(50) }()
	require.Eventually(t, func() bool {
		cred.mu.Lock()
		defer cred.mu.Unlock()
		return len(cred.waiters) == 1
	}, guard, time.Millisecond, "the Take does not wait for the credential's room")
	sh.leave(cred)
	cred.release(100) // the other reader's line ends: its room is counted for the Take
	require.True(t, recv(t, took, "return from the Take"))
	require.Zero(t, cred.inUse(), "the budget the reader left holds its chunk")
	require.Equal(t, int64(50), global.inUse())
	sh.Release(50)
	require.Zero(t, global.inUse())
	require.Zero(t, cred.inUse())
}

// TestInboundShareOptions: a credential's share of the inbound budget defaults to a sixteenth of it, at least a
// frame (so a line of the cap can end), and a run's to a quarter, at least a credential's, both at most the whole;
// a share given is taken within those bounds, and anything else is refused naming it.
func TestInboundShareOptions(t *testing.T) {
	ok := Options{SocketPath: "/x/b.sock", ServerKey: make([]byte, MinServerKeyLen)}
	for _, tc := range []struct {
		name      string
		o         Options
		cred, run int64
	}{
		{"the defaults", Options{}, DefaultGlobalInboundBytes / credentialShares, DefaultGlobalInboundBytes / runShares},
		{"follows the daemon's budget", Options{GlobalInboundBytes: 1 << 30}, 64 << 20, 256 << 20},
		{"at least a frame", Options{GlobalInboundBytes: 1 << 20}, wire.DefaultMaxFrame, wire.DefaultMaxFrame},
		{"at least a frame of a larger cap", Options{MaxFrame: 1 << 20, GlobalInboundBytes: 2 << 20}, 1 << 20, 1 << 20},
		{"a run's at least a credential's", Options{InboundBytesPerCredential: 32 << 20}, 32 << 20, 32 << 20},
		{"given", Options{InboundBytesPerCredential: 1 << 20, InboundBytesPerRun: 2 << 20}, 1 << 20, 2 << 20},
		{"the whole", Options{InboundBytesPerCredential: DefaultGlobalInboundBytes,
			InboundBytesPerRun: DefaultGlobalInboundBytes}, DefaultGlobalInboundBytes, DefaultGlobalInboundBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.SocketPath, o.ServerKey = ok.SocketPath, ok.ServerKey
			require.NoError(t, o.Validate())
			d := o.withDefaults()
			require.Equal(t, tc.cred, d.InboundBytesPerCredential)
			require.Equal(t, tc.run, d.InboundBytesPerRun)
		})
	}
	for _, tc := range []struct {
		name string
		o    Options
		err  string
	}{
		{"a credential's below a frame", Options{InboundBytesPerCredential: 1024},
			"InboundBytesPerCredential 1024 must be within MaxFrame 262144..GlobalInboundBytes 67108864"},
		{"a credential's above the whole", Options{InboundBytesPerCredential: 1 << 40},
			"InboundBytesPerCredential 1099511627776 must be within MaxFrame 262144..GlobalInboundBytes 67108864"},
		{"a run's below a credential's", Options{InboundBytesPerRun: 1 << 20},
			"InboundBytesPerRun 1048576 must be within InboundBytesPerCredential 4194304..GlobalInboundBytes 67108864"},
		{"a run's above the whole", Options{GlobalInboundBytes: 8 << 20, InboundBytesPerRun: 16 << 20},
			"InboundBytesPerRun 16777216 must be within InboundBytesPerCredential 524288..GlobalInboundBytes 8388608"},
		{"negative", Options{InboundBytesPerCredential: -1, InboundBytesPerRun: -1},
			"InboundBytesPerCredential must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.SocketPath, o.ServerKey = ok.SocketPath, ok.ServerKey
			require.ErrorContains(t, o.Validate(), tc.err)
		})
	}
}

// TestLinesBeforeHelloCannotHoldTheInboundBudget: connections that have not said hello, which have no credential
// and whose processes need none, that each leave a line longer than the read-ahead unfinished hold a credential's
// share of the daemon's inbound budget at most, all of them together, so an authenticated worker is served a
// request of 20 KiB at once. Without it, their lines held all of GlobalInboundBytes until their hello's deadline,
// and a client of a few processes (MaxPendingPerPeer connections each), dialling again as each was closed, held it
// for good while every other client's request longer than 4 KiB waited the write timeout and was closed.
func TestLinesBeforeHelloCannotHoldTheInboundBudget(t *testing.T) {
	const (
		budget = 1 << 20   // four lines of the default frame cap
		conns  = 8         // connections that never say hello
		stall  = 200 << 10 // each stalled line's, spilled into MaxFrame-1 bytes of chunks
		long   = 20 << 10  // the worker's request
		// longSpill is what a request of long bytes spills into: chunks of 4, 4, 8 and 16 KiB.
		longSpill = 32 << 10
	)
	f := newFixture(t, fixtureOpts{opts: Options{GlobalInboundBytes: budget, HelloTimeout: time.Minute},
		write: time.Minute})
	s := f.seed()
	w := f.dial()
	w.hello(runR, taskP, s.p)

	var writes sync.WaitGroup
	for range conns {
		c := f.dial()
		writes.Add(1)
		go func() {
			defer writes.Done()
			c.nc.SetWriteDeadline(time.Now().Add(guard))
			c.nc.Write([]byte(`{"id":"h","method":"hello","params":{"token":"` + strings.Repeat("x", stall)))
		}()
	}
	require.Eventually(t, func() bool { return f.srv.inBudget.inUse() >= wire.DefaultMaxFrame-1 }, guard,
		time.Millisecond, "the lines before hello take the budget")
	// NB: as in TestOneRunCannotHoldTheInboundBudget, the request is sent once the lines have taken all they can.
	require.Eventually(t, func() bool {
		return leavesLessThan(&f.srv.helloIn, longSpill) || leavesLessThan(&f.srv.inBudget, longSpill)
	}, guard, time.Millisecond, "the lines before hello take all they can")

	answersLongPingWithin(t, w, long, 5*time.Second, "an authenticated worker")
	require.LessOrEqual(t, f.srv.inBudget.inUse(), f.srv.opts.InboundBytesPerCredential,
		"the lines before hello hold a credential's share at most")

	srv := f.srv
	f.close()
	awaitGroup(t, &writes, "end of the stalled lines' writes")
	require.Zero(t, srv.inBudget.inUse(), "every byte is given back once")
	require.Zero(t, srv.helloIn.inUse(), "every byte is given back once")
}
