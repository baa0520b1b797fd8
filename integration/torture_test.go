package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// tortureWorkers is how many client goroutines submit commands at once.
const tortureWorkers = 64

// tortureRounds is CREWLOG_TORTURE_ROUNDS, default 20.
func tortureRounds(t *testing.T) int {
	s := os.Getenv("CREWLOG_TORTURE_ROUNDS")
	if s == "" {
		return 20
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "CREWLOG_TORTURE_ROUNDS")
	require.Positive(t, n, "CREWLOG_TORTURE_ROUNDS")
	return n
}

// generations tells client goroutines when a restarted daemon is ready, so they wait for a signal instead of
// polling a socket that is not there.
type generations struct {
	mu      sync.Mutex
	gen     int
	ready   bool
	changed chan struct{} // closed and replaced at every change
	// lost counts answers lost to a kill (and so retried with the same
	// commandId): the test is only worth something when it is above zero.
	lost atomic.Int64
	// closed counts connections the daemon closed with no kill under way (an engine that failed stop closes
	// them too, when it exits).
	closed atomic.Int64
	// failStops counts answers lost to an engine that failed stop (internal), retried once crewd restarted.
	failStops atomic.Int64
	// unavailable counts a cluster node's unavailable answers (no writer answered), retried on the same node.
	unavailable atomic.Int64
}

func newGenerations() *generations { return &generations{ready: true, changed: make(chan struct{})} }

func (g *generations) state() (int, bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen, g.ready, g.changed
}

func (g *generations) set(next, ready bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if next {
		g.gen++
	}
	g.ready = ready
	close(g.changed)
	g.changed = make(chan struct{})
}

// down starts the next generation, not yet ready (call before the kill); up makes it ready (after the start).
func (g *generations) down() { g.set(true, false) }
func (g *generations) up()   { g.set(false, true) }

// killedSince says whether generation gen has ended (or is ending): a failed dial of gen is then no surprise.
func (g *generations) killedSince(gen int) bool {
	cur, ready, _ := g.state()
	return cur != gen || !ready
}

// await waits for a ready generation numbered at least min and returns its number.
func (g *generations) await(ctx context.Context, min int) (int, error) {
	for {
		gen, ready, changed := g.state()
		if gen >= min && ready {
			return gen, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// ack is an acknowledged command: what was sent and what the broker answered.
type ack struct {
	method string
	as     client.Hello
	params map[string]any // with the commandId
	result json.RawMessage
	err    *wire.Error
}

// ackLog collects the acknowledged commands of a torture test's goroutines and lets the killer wait for progress.
type ackLog struct {
	mu    sync.Mutex
	acks  []ack
	count atomic.Int64
	moved chan struct{} // a non-blocking nudge at every acknowledgement
}

func newAckLog() *ackLog { return &ackLog{moved: make(chan struct{}, 1)} }

func (l *ackLog) record(a ack) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
	l.count.Add(1)
	select {
	case l.moved <- struct{}{}:
	default:
	}
}

// awaitProgress waits until n more commands were acknowledged, failing the test on a goroutine's error or the
// context's end.
func (l *ackLog) awaitProgress(ctx context.Context, t *testing.T, failed <-chan error, round, n int) {
	target := l.count.Load() + int64(n)
	for l.count.Load() < target {
		select {
		case err := <-failed:
			t.Fatalf("round %d: %v", round, err)
		case <-ctx.Done():
			t.Fatalf("round %d: no progress: %v", round, ctx.Err())
		case <-l.moved:
		}
	}
}

// session keeps one connection per identity for a goroutine and redials after a kill.
type session struct {
	d    *daemon
	gens *generations
	as   client.Hello
	c    *client.Client
	gen  int // the generation c was dialed in
	min  int // the generation to wait for before dialing again
	// cut, when set, is asked before each attempt how long to let it run before the connection is closed under
	// it (0: not cut); the attempt's answer is then lost and the command retried with its commandId.
	cut func() time.Duration
	// attempts is how many times the last call was sent.
	attempts int
	// failStop, when set, takes an internal answer for an engine that failed stop after a commit error: the
	// command's outcome is unknown until crewd has exited and restarted, then it is retried with its commandId.
	failStop bool
	// inDoubt, when set with failStop, is how long an internal answer waits for crewd's restart before the command
	// is sent again to the same crewd, which may have answered internal without exiting. (A cluster node whose
	// forwarded command no writer answered says unavailable: see answeredUnavailable.)
	inDoubt time.Duration
}

// maxAttempts bounds how many times one call is sent: a daemon that keeps closing the connection under it is a
// failure, not something to wait out.
const maxAttempts = 1000

// call sends the command until the broker answers it: a lost answer (the daemon was killed) is retried with the
// same commandId on the next generation, which answers with the recorded outcome if the first attempt committed.
func (s *session) call(ctx context.Context, method string, params map[string]any) (ack, error) {
	s.attempts = 0
	for {
		if s.c == nil {
			gen, err := s.gens.await(ctx, s.min)
			if err != nil {
				return ack{}, err
			}
			c, err := s.d.dial(ctx, s.as)
			if err != nil {
				var we *wire.Error
				if errors.As(err, &we) {
					return ack{}, fmt.Errorf("hello as %s refused: %w", s.as, err)
				}
				if !s.gens.killedSince(gen) {
					continue // NB: a dial can time out on a loaded machine; only a restart is worth waiting for
				}
				s.min = gen + 1 // killed while dialing: wait for the restart
				continue
			}
			s.c, s.gen = c, gen
		}
		var res json.RawMessage
		s.attempts++
		if s.attempts > maxAttempts {
			return ack{}, fmt.Errorf("%s %v: no answer after %d attempts", method, params["commandId"], maxAttempts)
		}
		cut := s.startCut()
		err := s.c.Call(ctx, method, params, &res)
		wasCut := cut()
		if wasCut && err == nil {
			s.c.Close() // the answer came first; the connection is closed all the same
			s.c = nil
		}
		var we *wire.Error
		switch {
		case err == nil:
			return ack{method: method, as: s.as, params: params, result: res}, nil
		case errors.As(err, &we) && we.Code == wire.CodeInternal && s.failStop:
			s.gens.failStops.Add(1)
			s.c.Close()
			s.c, s.min = nil, s.gen+1
			// NB: bounded: an internal answer from an engine that did not fail is a bug, not something to wait out.
			wait, cancel := context.WithTimeout(ctx, cmp.Or(s.inDoubt, startTimeout))
			_, err := s.gens.await(wait, s.min)
			cancel()
			if err != nil && s.inDoubt > 0 && ctx.Err() == nil {
				s.min = s.gen // no restart: the crewd still runs, send it again there
			} else if err != nil {
				return ack{}, fmt.Errorf("%s %v answered internal, and crewd did not exit and restart: %w", method, params["commandId"], err)
			}
		case errors.As(err, &we) && answeredUnavailable(we, params):
			// A node of a cluster forwarded the command and no writer answered (a failover): it may have been
			// decided, and a retry with its commandId learns the outcome once a writer serves, as a runtime would.
			s.gens.unavailable.Add(1)
			select {
			case <-ctx.Done():
				return ack{}, ctx.Err()
			case <-time.After(unavailableBackoff):
			}
		case errors.As(err, &we) && !answeredClose(we, params):
			return ack{method: method, as: s.as, params: params, err: we}, nil
		case errors.Is(err, client.ErrClosed) || errors.As(err, &we):
			// The connection closed before an answer (the client saw it close, or crewd answered close as it
			// closed it): the outcome is unknown, so the command is sent again with its commandId.
			s.gens.lost.Add(1)
			s.c.Close()
			s.c, s.min = nil, s.gen+1
			if gen, ready, _ := s.gens.state(); wasCut || (gen == s.gen && ready) {
				s.min = s.gen // no kill under way: the daemon still runs, dial it again at once
				if !wasCut {
					s.gens.closed.Add(1)
				}
			}
		default:
			return ack{}, err
		}
	}
}

// unavailableBackoff is how long a command answered unavailable waits before it is sent again: about the time a
// cluster takes to seat a writer, so a failover costs a few retries, not a thousand.
const unavailableBackoff = 200 * time.Millisecond

// answeredUnavailable says whether we is a cluster node's unavailable answer to a command with a commandId: the
// command's outcome is unknown (docs/protocol.md, "No writer"), so it is sent again with its commandId. Without one
// the answer stays: no retry can make the command safe.
func answeredUnavailable(we *wire.Error, params map[string]any) bool {
	_, retryable := params["commandId"]
	return we.Code == wire.CodeUnavailable && retryable
}

// answeredClose says whether we is crewd's close answer (the connection closed while the request waited) to a
// command with a commandId. For a command that says nothing of its outcome: it may have been decided, or not, so the
// answer is lost, not final, and the command is retried with its commandId as a runtime would. A read answered close
// (or a command without a commandId, which no retry can make safe) keeps that answer: the caller records it as what
// it is (the jepsen model reads a wait answered close as saying nothing; jepsen.do records a write so as unknown).
func answeredClose(we *wire.Error, params map[string]any) bool {
	_, retryable := params["commandId"]
	return we.Code == wire.CodeClose && retryable
}

// startCut closes the connection after the delay s.cut picks, if any; the returned func stops that and reports
// whether the connection was closed.
func (s *session) startCut() func() bool {
	if s.cut == nil {
		return func() bool { return false }
	}
	after := s.cut()
	if after <= 0 {
		return func() bool { return false }
	}
	c := s.c
	timer := time.AfterFunc(after, func() { c.Close() })
	return func() bool { return !timer.Stop() }
}

func (s *session) close() {
	if s.c != nil {
		s.c.Close()
	}
}

// TestKillNineTorture: 64 goroutines submit delegate.request and delegate.settle with commandIds while crewd is
// SIGKILLed at random moments and restarted. Afterwards: every acknowledged command, retried with its commandId,
// gets the same answer; every command in the log is whole; nothing is left in flight; a token issued before a kill
// works after it; and the store verifies.
func TestKillNineTorture(t *testing.T) {
	rounds := tortureRounds(t)
	// A round takes well under a second on two cores; five seconds each keeps the deadline from ending a long
	// CREWLOG_TORTURE_ROUNDS run that is only slow.
	ctx := testContext(t, 10*time.Minute+time.Duration(rounds)*5*time.Second)
	d := newDaemon(t, "--max-slots", strconv.Itoa(tortureWorkers), "--max-frame", strconv.Itoa(wire.MaxFrameCeiling))
	t.Cleanup(d.cleanup)
	d.start()

	crews := make([]*crew, tortureWorkers)
	for i := range crews {
		crews[i] = newCrew(ctx, t, d, "W")
	}
	gens := newGenerations()

	var (
		log    = newAckLog()
		record = log.record
		stop   atomic.Bool
		wg     sync.WaitGroup
		failed = make(chan error, tortureWorkers)
	)
	for i, crew := range crews {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &session{d: d, gens: gens, as: crew.workers["W"]}
			o := &session{d: d, gens: gens, as: crew.orch}
			defer w.close()
			defer o.close()
			for n := 0; !stop.Load(); n++ {
				id := fmt.Sprintf("w%02d-%d", i, n)
				a, err := w.call(ctx, "delegate.request", delegateParams(id))
				if err != nil {
					failed <- err
					return
				}
				record(a)
				if a.err != nil {
					continue
				}
				var adm admitted
				if err := json.Unmarshal(a.result, &adm); err != nil || adm.GrandchildTaskRef == "" {
					failed <- fmt.Errorf("delegate.request %s: unexpected answer %s", id, a.result)
					return
				}
				s, err := o.call(ctx, "delegate.settle", map[string]any{
					"subId": adm.GrandchildTaskRef, "outcome": "ok", "text": "result of " + id, "commandId": "s-" + id,
				})
				if err != nil {
					failed <- err
					return
				}
				record(s)
			}
		}()
	}

	// Tokens issued just before a kill, checked just after it.
	crew := crews[0]
	orch := &session{d: d, gens: gens, as: crew.orch}
	defer orch.close()
	start := time.Now()
	for round := range rounds {
		// Kill only once the load is flowing in this generation, then at a random moment of it.
		log.awaitProgress(ctx, t, failed, round, tortureWorkers)
		task := fmt.Sprintf("K%02d", round)
		a, err := orch.call(ctx, "task.create", map[string]any{
			"taskId": task, "role": "explorer", "agent": "agent", "title": task, "cwd": "/repo", "commandId": "create-" + task,
		})
		require.NoError(t, err)
		require.Nil(t, a.err)
		a, err = orch.call(ctx, "credential.issue", map[string]any{"taskId": task, "commandId": "issue-" + task})
		require.NoError(t, err)
		require.Nil(t, a.err, "credential.issue %s", task)
		var cred credential
		require.NoError(t, json.Unmarshal(a.result, &cred))

		<-time.After(time.Duration(rand.IntN(20)) * time.Millisecond) // the kill moment, not a synchronisation
		gens.down()
		d.kill()
		d.start()
		gens.up()

		k := d.mustDial(ctx, client.Hello{RunID: crew.runID, TaskID: task, Token: cred.Token})
		require.NoError(t, k.Call(ctx, wire.MethodPing, nil, nil), "a token issued before the kill works after it")
		k.Close()
	}
	stop.Store(true)
	wg.Wait()
	close(failed)
	for err := range failed {
		require.NoError(t, err)
	}
	acks := log.acks
	t.Logf("%d rounds, %d acknowledged commands, %d answers lost to a kill and retried, in %v",
		rounds, len(acks), gens.lost.Load(), time.Since(start).Round(time.Millisecond))
	require.Positive(t, gens.lost.Load(), "no command was in flight at any kill")

	checkReplays(ctx, t, d, acks)
	for _, crew := range crews {
		checkNothingInFlight(ctx, t, d, crew, acks)
	}
	checkNoSlotHeld(ctx, t, d, crews[0])
	d.stop()
	checkStore(t, d, acks)
}

// checkReplays sends every acknowledged command again with its commandId: the answer must be the recorded one.
func checkReplays(ctx context.Context, t *testing.T, d *daemon, acks []ack) {
	byIdentity := map[client.Hello][]ack{}
	for _, a := range acks {
		byIdentity[a.as] = append(byIdentity[a.as], a)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(byIdentity))
	for as, list := range byIdentity {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// NB: every identity dials at once, on a machine that may be loaded: more than the default 5 s.
			c, err := client.Dial(ctx, d.socket, as, &client.Options{DialTimeout: startTimeout})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for _, a := range list {
				var res json.RawMessage
				err := c.Call(ctx, a.method, a.params, &res)
				var we *wire.Error
				switch {
				case a.err != nil && !errors.As(err, &we):
					errs <- fmt.Errorf("%s %v: was %v, replay gave %v", a.method, a.params["commandId"], a.err, err)
				case a.err != nil && *we != *a.err:
					errs <- fmt.Errorf("%s %v: was %v, replay gave %v", a.method, a.params["commandId"], a.err, we)
				case a.err == nil && err != nil:
					errs <- fmt.Errorf("%s %v: was %s, replay gave %v", a.method, a.params["commandId"], a.result, err)
				case a.err == nil && !jsonEqual(a.result, res):
					errs <- fmt.Errorf("%s %v: was %s, replay gave %s", a.method, a.params["commandId"], a.result, res)
				default:
					continue
				}
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// eachPage hands each page of a query's answer to c (pages of 1,000, the most a query gives) to each, in order.
func eachPage(ctx context.Context, t *testing.T, c *client.Client, method string, each func(page json.RawMessage)) {
	t.Helper()
	params := map[string]any{"limit": 1000}
	for {
		var page json.RawMessage
		require.NoError(t, c.Call(ctx, method, params, &page))
		each(page)
		var next struct {
			NextCursor string `json:"nextCursor"`
		}
		require.NoError(t, json.Unmarshal(page, &next))
		if next.NextCursor == "" {
			return
		}
		params["cursor"] = next.NextCursor
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// checkNothingInFlight: every admitted delegation of crew's run was settled (each goroutine retried its settle
// until answered), so the state has them all completed, and no other.
func checkNothingInFlight(ctx context.Context, t *testing.T, d *daemon, crew *crew, acks []ack) {
	orch, err := client.Dial(ctx, d.socket, crew.orch, &client.Options{MaxFrame: wire.MaxFrameCeiling})
	require.NoError(t, err)
	defer orch.Close()
	// NB: every page: a run holds more delegations than one page (100 by default) once the rounds are many.
	status := map[string]string{}
	eachPage(ctx, t, orch, "query.delegations", func(raw json.RawMessage) {
		var page struct {
			Delegations []delegation `json:"delegations"`
		}
		require.NoError(t, json.Unmarshal(raw, &page))
		for _, dl := range page.Delegations {
			status[dl.SubID] = dl.Status
		}
	})
	admittedIDs := 0
	for _, a := range acks {
		if a.method != "delegate.request" || a.err != nil || a.as.RunID != crew.runID {
			continue
		}
		var adm admitted
		require.NoError(t, json.Unmarshal(a.result, &adm))
		require.Equal(t, "completed", status[adm.GrandchildTaskRef], "delegation %s of %v", adm.GrandchildTaskRef, a.params["commandId"])
		admittedIDs++
	}
	require.Len(t, status, admittedIDs, "every delegation in the state was acknowledged")
}

// checkNoSlotHeld: the daemon-wide slot pool is empty once everything settled.
func checkNoSlotHeld(ctx context.Context, t *testing.T, d *daemon, crew *crew) {
	orch := d.mustDial(ctx, crew.orch)
	var slots struct {
		Held int `json:"held"`
	}
	require.NoError(t, orch.Call(ctx, "query.slots", nil, &slots))
	require.Zero(t, slots.Held)
}

// checkStore opens the stopped daemon's store: it verifies, and every command's events are whole — a
// delegate.request is requested+admitted(+reserved) or requested+rejected, a settle delivers and terminates —
// and each of them was acknowledged.
func checkStore(t *testing.T, d *daemon, acks []ack) {
	l, err := eventlog.Open(filepath.Join(d.data, "store"), &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	rep, err := l.Verify(nil)
	require.NoError(t, err)
	t.Logf("store verified: head %d, %d commands", rep.Head, rep.Commands)

	byCommand := map[string][]string{}
	it := l.Read(1)
	for it.Next() {
		ev := it.Event()
		if ev.CommandID != "" {
			byCommand[ev.CommandID] = append(byCommand[ev.CommandID], ev.Type)
		}
	}
	require.NoError(t, it.Err())
	require.NoError(t, it.Close())

	acked := map[string]bool{}
	for _, a := range acks {
		acked[a.params["commandId"].(string)] = true
	}
	whole := [][]string{
		{events.TypeDelegateRequested, events.TypeDelegateAdmitted},
		{events.TypeDelegateRequested, events.TypeDelegateAdmitted, events.TypeBudgetReserved},
		{events.TypeDelegateRequested, events.TypeDelegateRejected},
	}
	for id, types := range byCommand {
		switch {
		case strings.HasPrefix(id, "w"):
			require.True(t, slices.ContainsFunc(whole, func(w []string) bool { return slices.Equal(w, types) }),
				"command %s has events %v", id, types)
			require.True(t, acked[id], "command %s is in the log but was never acknowledged", id)
		case strings.HasPrefix(id, "s-"):
			require.Contains(t, types, events.TypeMailboxAppended, "settle %s", id)
			require.Equal(t, events.TypeDelegateCompleted, types[len(types)-1], "settle %s has events %v", id, types)
			require.True(t, acked[id], "command %s is in the log but was never acknowledged", id)
		}
	}
}
