package commands

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// steppedClock is a wall clock a test steps, beside the monotonic clock that only time passing moves: pass moves
// both, step the wall clock alone, as an NTP correction or a host's clock set back does.
type steppedClock struct {
	wall    *testClock
	elapsed atomic.Int64
}

func (c *steppedClock) pass(d time.Duration)   { c.wall.Advance(d); c.elapsed.Add(int64(d)) }
func (c *steppedClock) step(d time.Duration)   { c.wall.Advance(d) }
func (c *steppedClock) Elapsed() time.Duration { return time.Duration(c.elapsed.Load()) }

// openStepped opens an engine on fs (a new log, or the one a closed engine left there) on c's two clocks.
func openStepped(t *testing.T, fs vfs.FS, c *steppedClock, cfg *projections.Config) *engineFixture {
	t.Helper()
	return openEngineWith(t, fs, c.wall, Options{Config: cfg, hooks: &testHooks{elapsed: c.Elapsed}})
}

// steppedRun opens an engine with cfg on a new log and a stepped clock, with run R's task 02_exec running, and
// returns them and the task's worker.
func steppedRun(t *testing.T, cfg *projections.Config) (*engineFixture, *steppedClock, events.Principal) {
	t.Helper()
	c := &steppedClock{wall: newTestClock()}
	f := openStepped(t, vfs.NewMem(), c, cfg)
	f.seedRunAs("R")
	return f, c, events.WorkerPrincipal("R", "02_exec")
}

// backSteps are the two ways the wall clock comes to be behind the log's newest time: it steps back while crewd
// runs, or crewd restarts on a host whose clock is behind.
var backSteps = []struct {
	name string
	back func(t *testing.T, f *engineFixture, c *steppedClock, cfg *projections.Config) *engineFixture
}{
	{"a step back between two commands", func(t *testing.T, f *engineFixture, c *steppedClock,
		_ *projections.Config) *engineFixture {
		c.step(-time.Hour)
		return f
	}},
	{"a restart on a clock behind the log", func(t *testing.T, f *engineFixture, c *steppedClock,
		cfg *projections.Config) *engineFixture {
		f.close()
		c.step(-time.Hour)
		return openStepped(t, f.fs, c, cfg)
	}},
}

// The times the engine records never go back in log order, whichever way the wall clock came to be behind the
// log: a replay "at" a time, explain and state?at= read the log's times as ordered.
func TestEngineTimesNeverGoBack(t *testing.T) {
	for _, b := range backSteps {
		t.Run(b.name, func(t *testing.T) {
			f, c, wk := steppedRun(t, nil)
			f = b.back(t, f, c, nil)
			c.pass(time.Second)
			f.submit(as(wk, "", &MessageSend{RunID: "R", FromTask: "02_exec", To: []string{ToParent}, Body: "after"}))

			it := f.log.Read(1)
			defer it.Close()
			var last int64
			for it.Next() {
				ev := it.Event()
				require.GreaterOrEqual(t, ev.Time, last, "event %d (%s) is dated before the one before it",
					ev.Position, ev.Type)
				last = ev.Time
			}
			require.NoError(t, it.Close())
		})
	}
}

// A deadline comes as long after it was set as it was meant to, whichever way the wall clock came to be behind
// the log: an hour's step back does not keep a delegation holding its slot of the daemon-wide pool for an hour
// more.
func TestEngineDeadlinesComeThroughAStepBack(t *testing.T) {
	for _, b := range backSteps {
		t.Run(b.name, func(t *testing.T) {
			f, c, wk := steppedRun(t, nil)
			sub := f.delegate(wk, 60)
			f = b.back(t, f, c, nil)
			// NB: 16 ms of the monotonic clock are 15 of the engine's while the wall clock is behind (catchUpPace).
			c.pass(time.Duration(60+projections.DefaultConfig().SettleGraceSec)*time.Second*16/15 -
				16*time.Millisecond)
			require.Zero(t, f.eng.Tick(context.Background()), "not due 15 ms short of deadline + grace")
			c.pass(16 * time.Millisecond)
			require.Equal(t, 1, f.eng.Tick(context.Background()), "due at deadline + grace")
			f.eng.Read(func(s *projections.State) {
				d, _ := s.Delegation("R", sub)
				require.Equal(t, projections.DelegationTimedOut, d.Status)
				require.Zero(t, s.SlotsHeld())
			})
		})
	}
}

// A run's message rate refills a minute after its last messages, even when they were dated by a wall clock that
// stepped forwards and then back: the messages dated half an hour ahead do not hold the run's rate full for that
// half hour.
func TestEngineMessageRateRefillsAfterAStepBack(t *testing.T) {
	cfg := projections.DefaultConfig()
	cfg.QuotaMsgsPerMin, cfg.QuotaReserve = 3, 0
	f, c, wk := steppedRun(t, &cfg)
	send := func() *RejectedError {
		return f.submit(as(wk, "", &MessageSend{RunID: "R", FromTask: "02_exec", To: []string{ToParent},
			Body: "m"})).Rejected
	}

	c.step(30 * time.Minute)
	for range 3 {
		require.Nil(t, send())
	}
	rej := send()
	require.NotNil(t, rej)
	require.Equal(t, CodeRateLimit, rej.Code, "the rate is full")

	c.step(-30 * time.Minute)
	c.pass(events.QuotaWindowSec * time.Second * 16 / 15) // a minute of the engine's time (catchUpPace)
	require.Nil(t, send(), "the window passed")
}

// After a step back the engine's time moves at 15/16 of the monotonic clock's pace, so the wall clock meets it after
// sixteen times the step, and it is the wall clock's from then on.
func TestEngineTimeCatchesUpWithTheWallClock(t *testing.T) {
	c := &steppedClock{wall: newTestClock()}
	et := newEngineTime(c.wall.Now, c.Elapsed)
	start := et.now()
	c.step(-time.Minute)
	require.Equal(t, start, et.now(), "not back with the wall clock")
	c.pass(8 * time.Minute)
	require.Equal(t, start.Add(7*time.Minute+30*time.Second), et.now(), "15/16 of the 8 minutes passed")
	c.pass(8 * time.Minute)
	require.Equal(t, c.wall.Now(), et.now(), "met sixteen minutes after a minute's step")
	c.pass(time.Second)
	require.Equal(t, c.wall.Now(), et.now(), "the wall clock's again")
}

// A wall clock further behind the engine's time than maxHold (an hour) is followed as it reads: most likely one set
// right after a wrong step forwards, which holding would keep in every event's date for sixteen times the step.
func TestEngineTimeFollowsAWallClockFarBehind(t *testing.T) {
	c := &steppedClock{wall: newTestClock()}
	et := newEngineTime(c.wall.Now, c.Elapsed)
	c.step(24 * time.Hour)
	ahead := et.now()
	c.step(-24 * time.Hour)
	require.Equal(t, ahead.Add(-24*time.Hour), et.now(), "a day's step back is followed")
	c.pass(time.Second)
	require.Equal(t, c.wall.Now(), et.now(), "and the wall clock's from then on")

	c.step(-time.Hour)
	held := et.now()
	require.Equal(t, c.wall.Now().Add(time.Hour), held, "a step back of an hour (maxHold) is held")
	c.step(-time.Second)
	require.Equal(t, c.wall.Now(), et.now(), "a wall clock more than an hour behind is followed")
}

// A follower that caught up on another writer's groups dates what it decides next no earlier than them, though its
// own wall clock is behind the writer's: it may become the writer.
func TestEngineTimeFollowsTheGroupsCaughtUp(t *testing.T) {
	own, copyLog := writerAndCopy(t)
	ahead, behind := newTestClock(), &steppedClock{wall: newTestClock()}
	ahead.Advance(time.Hour)
	w, err := Open(own, Options{Clock: ahead.Now, NewID: counterIDs(), ExpiryInterval: -1,
		Committer: &copyingCommitter{own: own, copy: copyLog}})
	require.NoError(t, err)
	defer w.Close()
	f, err := Open(copyLog, Options{Clock: behind.wall.Now, NewID: counterIDs(), ExpiryInterval: -1,
		hooks: &testHooks{elapsed: behind.Elapsed}})
	require.NoError(t, err)
	defer f.Close()

	(&engineFixture{t: t, eng: w, clock: ahead}).seedRun("r1", 0)
	require.NoError(t, f.CatchUp(context.Background()))
	ff := &engineFixture{t: t, eng: f, log: copyLog, clock: behind.wall}
	ff.do(&RunCreate{RunID: "r2", Team: "t", Goal: "g", Cwd: "/w"})
	head, _ := copyLog.Head()
	newest, err := copyLog.Event(head)
	require.NoError(t, err)
	require.Equal(t, ahead.Now().UnixNano(), newest.Time, "dated at the writer's newest time, not an hour before it")
}

// An ended run goes cold its retention after its end, though the wall clock stepped back in between: the step
// does not hold off the eviction passes (and the bound on the ended runs kept in memory) for its length.
func TestEngineRetentionPassesThroughAStepBack(t *testing.T) {
	c := &steppedClock{wall: newTestClock()}
	f := openEngineWith(t, vfs.NewMem(), c.wall, Options{Retention: time.Second, SnapshotEvery: -1,
		hooks: &testHooks{elapsed: c.Elapsed}})
	f.seedRunAs("R")
	f.do(&RunTransition{RunID: "R", To: "completed"})
	c.step(-time.Hour)
	c.pass(3 * time.Second)
	f.seedRunAs("LATER") // its commit runs an eviction pass
	f.eng.Read(func(s *projections.State) { require.True(t, s.IsCold("R"), "the ended run went cold") })
}

// peek is the time now would give, without taking it.
func (c *engineTime) peek() time.Time {
	w, at := c.wall().Round(0), c.elapsed()
	c.mu.Lock()
	defer c.mu.Unlock()
	t, _ := c.next(w, at)
	return t
}
