package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

func TestEngineAdmitsAndPublishes(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("R", 100000)
	r, err := f.eng.Submit(context.Background(),
		Request{Principal: events.WorkerPrincipal("R", "02_exec"), CommandID: "c1", Actor: worker("02_exec"),
			Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "find X",
				BudgetTokens: ptr(int64(20000))}})
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	require.JSONEq(t, `{"ok":true,"grandchildTaskRef":"gc-00000001","childDepth":2,"timeoutSec":900}`,
		string(r.Result))

	// The answer comes after the publish: the effects are visible at once.
	f.eng.Read(func(s *projections.State) {
		require.Equal(t, r.Position, s.Position)
		a, ok := s.Account("R", "02_exec")
		require.True(t, ok)
		require.EqualValues(t, 100000, a.TokensGranted)
		require.EqualValues(t, 20000, a.TokensSpent)
		require.Equal(t, 1, s.SlotsHeld())
	})
	head, _ := f.log.Head()
	require.Equal(t, head, r.Position)
}

func TestEngineIdempotentCommandIDAcrossRestart(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	f := openEngine(t, fs, clock, nil)
	f.seedRun("R", 0)
	req := Request{Principal: events.WorkerPrincipal("R", "02_exec"), CommandID: "retry-me", Actor: worker("02_exec"),
		Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p"}}
	first, err := f.eng.Submit(context.Background(), req)
	require.NoError(t, err)
	require.False(t, first.Replayed)

	again, err := f.eng.Submit(context.Background(), req)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.JSONEq(t, string(first.Result), string(again.Result), "the same grandchildTaskRef")
	require.Equal(t, first.Position, again.Position)

	denied := Request{Principal: events.WorkerPrincipal("R", "02_exec"), CommandID: "denied",
		Actor: worker("02_exec"), Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p",
			Role: ptr("reviewer")}}
	d1, err := f.eng.Submit(context.Background(), denied)
	require.NoError(t, err)
	require.Equal(t, "role-denied", d1.Rejected.Reason)

	f.close()
	f = openEngine(t, fs, clock, nil)
	again, err = f.eng.Submit(context.Background(), req)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.JSONEq(t, string(first.Result), string(again.Result))
	d2, err := f.eng.Submit(context.Background(), denied)
	require.NoError(t, err)
	require.True(t, d2.Replayed)
	require.Equal(t, d1.Rejected, d2.Rejected, "the same code, reason and message")
	f.eng.Read(func(s *projections.State) {
		require.Len(t, s.Delegations("R"), 1, "the retry never caused a second admission")
	})
}

func TestEngineConcurrentDuplicateIDs(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("R", 0)
	type answer struct {
		r   Reply
		err error
	}
	results := make(chan answer, 2)
	for i := 0; i < 2; i++ {
		go func() {
			r, err := f.eng.Submit(context.Background(),
				Request{Principal: events.WorkerPrincipal("R", "02_exec"), CommandID: "same",
					Actor: worker("02_exec"), Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p"}})
			results <- answer{r, err}
		}()
	}
	a, b := <-results, <-results
	require.NoError(t, a.err)
	require.NoError(t, b.err)
	require.JSONEq(t, string(a.r.Result), string(b.r.Result))
	f.eng.Read(func(s *projections.State) { require.Len(t, s.Delegations("R"), 1) })
}

func TestEngineConfigRecordedOnlyOnChange(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = 5
	f := openEngine(t, fs, clock, &cfg)
	head1, _ := f.log.Head()
	require.EqualValues(t, 1, head1)
	f.close()
	f = openEngine(t, fs, clock, &cfg)
	head2, _ := f.log.Head()
	require.Equal(t, head1, head2, "the same config adds nothing")
	f.eng.Read(func(s *projections.State) { require.Equal(t, 5, s.Config().MaxSlots) })

	bad := cfg
	bad.MaxDepth = 11
	l, err := eventlog.Open("db2", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	_, err = Open(l, Options{Config: &bad})
	require.ErrorContains(t, err, "maxDepth")
}

func TestEngineExpiresOverdueDelegations(t *testing.T) {
	clock := newTestClock()
	f := openEngine(t, vfs.NewMem(), clock, nil)
	f.seedRun("R", 0)
	r, err := f.eng.Submit(context.Background(), Request{Actor: worker("02_exec"),
		Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p", TimeoutSec: ptr(5.0)}})
	require.NoError(t, err)
	var res DelegateResult
	require.NoError(t, json.Unmarshal(r.Result, &res))

	clock.Advance(34_000_000_000) // 5 s + 30 s grace not yet passed
	require.Zero(t, f.eng.Tick(context.Background()))
	clock.Advance(2_000_000_000)
	require.Equal(t, 1, f.eng.Tick(context.Background()))
	require.Zero(t, f.eng.Tick(context.Background()), "expired once")
	f.eng.Read(func(s *projections.State) {
		d, ok := s.Delegation("R", res.GrandchildTaskRef)
		require.True(t, ok)
		require.Equal(t, projections.DelegationTimedOut, d.Status)
		require.True(t, d.Expired)
		require.Zero(t, s.SlotsHeld())
		page, err := s.Mailbox("R", "02_exec", projections.MailboxFilter{})
		require.NoError(t, err)
		require.Len(t, page.Messages, 1)
		require.True(t, strings.Contains(page.Messages[0].Body, "(timed out)"))
	})
}

// A commit error fails the engine stop: the request is answered with an
// error, every later one too, and the published state never shows the
// failed group.
func TestEngineFailsStopOnCommitError(t *testing.T) {
	mem := vfs.NewMem()
	toggle := walFaults(errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileWrite)
	f := openEngine(t, errorfs.Wrap(mem, toggle), newTestClock(), nil)
	f.seedRun("R", 0)
	before := f.eng.Head()
	select {
	case <-f.eng.Failed():
		t.Fatal("Failed is closed before any commit failed")
	default:
	}
	require.NoError(t, f.eng.Err())
	toggle.On()
	_, err := f.eng.Submit(context.Background(), Request{Actor: worker("02_exec"),
		Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p"}})
	require.ErrorIs(t, err, ErrFailed)
	<-f.eng.Failed() // closed by the failed commit: a daemon waiting on it exits
	require.ErrorIs(t, f.eng.Err(), ErrFailed)
	toggle.Off()
	_, err = f.eng.Submit(context.Background(), Request{Actor: orchestrator,
		Command: &RunTransition{RunID: "R", To: "blocked"}})
	require.ErrorIs(t, err, ErrFailed)
	require.Equal(t, before, f.eng.Head())
	f.eng.Read(func(s *projections.State) { require.Zero(t, s.SlotsHeld()) })
}

func TestEngineSnapshotsAndRestartsFromThem(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), SnapshotEvery: 10, ExpiryInterval: -1})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	for i := 0; i < 5; i++ {
		f.seedRun(fmt.Sprintf("R%d", i), 1000)
	}
	var want *projections.State
	e.Read(func(s *projections.State) { want = whole(t, s) })
	require.NoError(t, e.Close()) // waits for the background snapshot
	require.NoError(t, l.Close())

	l, err = eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	snap, err := l.LatestSnapshot()
	require.NoError(t, err)
	require.NotZero(t, snap.Position)
	e, err = Open(l, Options{Clock: clock.Now, ExpiryInterval: -1})
	require.NoError(t, err)
	defer e.Close()
	require.Equal(t, snap.Position, e.LoadInfo().SnapshotPosition)
	e.Read(func(s *projections.State) { require.Equal(t, want, whole(t, s)) })

	full := projections.New()
	require.NoError(t, projections.Replay(full, l, 0))
	require.Equal(t, want, full, "snapshot + tail == fold from position 1")
}

// An event the log would refuse (here: a payload over the log's limit) is
// a rejected command, never a failed group: the engine keeps serving.
func TestEngineRefusesWhatTheLogWouldNot(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem(), MaxPayloadBytes: 1024})
	require.NoError(t, err)
	defer l.Close()
	e, err := Open(l, Options{Clock: newTestClock().Now, NewID: counterIDs(), ExpiryInterval: -1})
	require.NoError(t, err)
	defer e.Close()

	r, err := e.Submit(context.Background(), Request{Principal: events.AdminPrincipal(), CommandID: "big",
		Actor: admin, Command: &RunCreate{RunID: "R", Team: "t", Goal: strings.Repeat("g", 2000), Cwd: "/w"}})
	require.NoError(t, err)
	require.NotNil(t, r.Rejected)
	require.Equal(t, CodeBadParams, r.Rejected.Code)
	require.Contains(t, r.Rejected.Message, "payload")

	r, err = e.Submit(context.Background(), Request{Principal: events.AdminPrincipal(),
		CommandID: strings.Repeat("x", 300), Actor: admin,
		Command: &RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}})
	require.NoError(t, err)
	require.Equal(t, CodeBadParams, r.Rejected.Code, "an over-long command id is refused, not written")

	r, err = e.Submit(context.Background(), Request{Principal: events.AdminPrincipal(), CommandID: "small",
		Actor: admin, Command: &RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}})
	require.NoError(t, err)
	require.Nil(t, r.Rejected, "the engine still serves")
	again, err := e.Submit(context.Background(),
		Request{Principal: events.AdminPrincipal(), CommandID: "big", Actor: admin,
			Command: &RunCreate{RunID: "R", Team: "t", Goal: strings.Repeat("g", 2000), Cwd: "/w"}})
	require.NoError(t, err)
	require.True(t, again.Replayed, "the refusal was recorded under its command id")
	require.Equal(t, CodeBadParams, again.Rejected.Code)
}

// spaceGuard reports low space while low is set.
type spaceGuard struct{ low atomic.Bool }

var errLowSpace = errors.New("test: 1 MiB free, below the minimum")

func (g *spaceGuard) CheckSpace() error {
	if g.low.Load() {
		return errLowSpace
	}
	return nil
}

// TestEngineRefusesWritesWhileSpaceIsLow: below the space threshold a command is refused with ErrNoSpace and
// nothing is decided or recorded, so retrying the same command id once space is back gets it decided then;
// reads keep working.
func TestEngineRefusesWritesWhileSpaceIsLow(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("R", 0)
	require.NoError(t, f.eng.Close()) // idempotent: the fixture's cleanup closes it again
	guard := &spaceGuard{}
	e, err := Open(f.log, Options{Clock: f.clock.Now, ExpiryInterval: -1, Space: guard})
	require.NoError(t, err)
	defer e.Close()

	before := e.Head()
	guard.low.Store(true)
	req := Request{Principal: events.OrchestratorPrincipal("R"), CommandID: "c-1", Actor: orchestrator,
		Command: &RunTransition{RunID: "R", To: "blocked"}}
	_, err = e.Submit(context.Background(), req)
	require.ErrorIs(t, err, ErrNoSpace)
	require.ErrorIs(t, err, errLowSpace)
	require.Equal(t, before, e.Head(), "nothing was written")
	e.Read(func(s *projections.State) { require.NotNil(t, s) }) // reads still answer
	select {
	case <-e.Failed():
		t.Fatal("low space must not fail the engine")
	default:
	}

	guard.low.Store(false)
	reply, err := e.Submit(context.Background(), req)
	require.NoError(t, err)
	require.Nil(t, reply.Rejected)
	require.False(t, reply.Replayed, "the refusal was not recorded as the command's outcome")
	require.Greater(t, e.Head(), before)
}

// The engine's own commands are refused like its clients' while the disk is below its free-space minimum: a tick
// expires nothing and writes nothing, though a delegation is overdue, and the first tick once space is back expires
// it. Why not let the expiries into the reserve: it is the log's alone, and the slot an expiry gives back serves no
// command while every command is refused.
func TestTheClockExpiresNothingWhileSpaceIsLow(t *testing.T) {
	clock, guard := newTestClock(), &spaceGuard{}
	f := openEngineWith(t, vfs.NewMem(), clock, Options{Space: guard})
	f.seedRun("R", 0)
	r, err := f.eng.Submit(context.Background(), Request{Actor: worker("02_exec"),
		Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p", TimeoutSec: ptr(5.0)}})
	require.NoError(t, err)
	require.Nil(t, r.Rejected)

	clock.Advance(time.Minute) // past 5 s + 30 s grace
	guard.low.Store(true)
	before := f.eng.Head()
	require.Zero(t, f.eng.Tick(context.Background()))
	require.Equal(t, before, f.eng.Head(), "an expiry was written while space was low")
	require.NoError(t, f.eng.Err())

	guard.low.Store(false)
	require.Equal(t, 1, f.eng.Tick(context.Background()), "the first tick once space is back")
}

// A result larger than its caller can carry is refused before anything is
// applied or recorded: the caller answers its client an error, and must not
// have committed a change (a run, a credential) its client never hears of.
// The same command id then succeeds with room for the answer, decided once.
func TestEngineRefusesAResultItsCallerCannotCarry(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	ctx := context.Background()
	req := func(room int) Request {
		return Request{Principal: events.AdminPrincipal(), CommandID: "create-1", Actor: admin, MaxResultBytes: room,
			Command: &RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}}
	}
	// The answer's size, from a twin engine that carries any.
	twin := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	want, err := twin.eng.Submit(ctx, req(0))
	require.NoError(t, err)
	require.Nil(t, want.Rejected)
	size := len(want.Result)

	before := f.eng.Head()
	for _, room := range []int{1, size - 1} {
		_, err := f.eng.Submit(ctx, req(room))
		require.ErrorIs(t, err, ErrResultTooLarge, "room %d", room)
		require.Equal(t, before, f.eng.Head(), "room %d: nothing was written", room)
		f.eng.Read(func(s *projections.State) {
			_, ok := s.Run("R")
			require.False(t, ok, "room %d: nothing was applied", room)
		})
		// Without a command id too.
		noID := req(room)
		noID.CommandID = ""
		_, err = f.eng.Submit(ctx, noID)
		require.ErrorIs(t, err, ErrResultTooLarge)
		require.Equal(t, before, f.eng.Head())
	}

	got, err := f.eng.Submit(ctx, req(size))
	require.NoError(t, err, "a result of exactly the room fits")
	require.Nil(t, got.Rejected)
	require.False(t, got.Replayed, "the refusals were not recorded as the command's outcome")
	require.JSONEq(t, string(want.Result), string(got.Result))

	// A retry is answered from the record, whatever its room: it commits nothing.
	again, err := f.eng.Submit(ctx, req(1))
	require.NoError(t, err)
	require.True(t, again.Replayed)

	// A rejection is an error frame, not a result: it is not measured.
	rej, err := f.eng.Submit(ctx, Request{Actor: admin, MaxResultBytes: 1,
		Command: &RunTransition{RunID: "nope", To: "running"}})
	require.NoError(t, err)
	require.NotNil(t, rej.Rejected)
}
