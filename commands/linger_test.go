package commands

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// longCommitter is the engine's log as a LongSyncer, whose syncs the writer
// lingers after.
type longCommitter struct{ logCommitter }

func (longCommitter) SyncsLong() bool { return true }

func withLongSyncs(l *eventlog.Log) Committer { return longCommitter{logCommitter{l}} }

// lingerScene is the pipeline where a linger comes up: z's group syncs
// while a and c are decided into the next group, A; A syncs while b is
// decided alone into group B; then A's sync returns, and B holds one
// command where A had two callers.
type lingerScene struct {
	p         *pipeFixture
	adm       events.Principal
	aCh, cCh  <-chan answer
	bCh       <-chan answer
	lingering chan struct{} // closed when the writer lingers
	asked     atomic.Int32  // how often it considered a linger
	end       chan time.Time
	ownTimer  bool // the linger ends at the engine's own timer, not at end
	mu        sync.Mutex
	groups    [][]string // the command ids of each group handed off after z's
}

func openLingerScene(t *testing.T, committer func(*eventlog.Log) Committer, ownTimer bool) *lingerScene {
	p := openPipe(t, vfs.NewMem(), committer)
	p.seedRunAs("S")
	sc := &lingerScene{p: p, adm: events.AdminPrincipal(), lingering: make(chan struct{}),
		end: make(chan time.Time, 1), ownTimer: ownTimer}
	var (
		cDecided, bDecided = make(chan struct{}), make(chan struct{})
		zSyncing, aHanded  = make(chan struct{}), make(chan struct{})
		syncs              atomic.Int32
	)
	p.set(pipeHooks{
		decided: func(ps []*pending) {
			if first(ps, "c") != nil {
				close(cDecided)
			}
			if first(ps, "b") != nil {
				close(bDecided)
			}
		},
		handOff: func(group []*pending) {
			if first(group, "z") != nil {
				return
			}
			if first(group, "a") != nil {
				defer close(aHanded)
			}
			sc.mu.Lock()
			sc.groups = append(sc.groups, commandIDs(group))
			sc.mu.Unlock()
		},
		beforeSync: func() {
			switch syncs.Add(1) {
			case 1: // z's: held until a and c are decided
				close(zSyncing)
				holdUntil(cDecided)
			case 2: // A's: held until b is decided
				holdUntil(bDecided)
			}
		},
		// A's sync, as the linger reads it, took longer than maxLinger
		// and has just returned: what the machine's clock measured
		// would make the scene depend on how loaded the machine is.
		lingerClock: func(time.Duration, time.Duration) (time.Duration, time.Duration) {
			sc.asked.Add(1)
			return time.Second, 0
		},
		lingerEnd: func(time.Duration) <-chan time.Time {
			close(sc.lingering) // NB: a second linger panics the test
			if sc.ownTimer {
				return nil
			}
			return sc.end
		},
	})
	zCh := p.async(createRun(sc.adm, "z"))
	<-zSyncing
	sc.aCh = p.async(createRun(sc.adm, "a"))
	sc.cCh = p.async(createRun(sc.adm, "c"))
	require.NoError(t, (<-zCh).err)
	<-aHanded
	sc.bCh = p.async(createRun(sc.adm, "b")) // while A syncs
	return sc
}

func (sc *lingerScene) handedOff() [][]string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.groups
}

// requireAdmitted requires each answer to be an admission. NB: the bound
// only turns a writer that never hands the group off into a failing test
// instead of a hung one; it times nothing.
func requireAdmitted(t *testing.T, chs ...<-chan answer) {
	t.Helper()
	for _, ch := range chs {
		select {
		case a := <-ch:
			require.NoError(t, a.err)
			require.Nil(t, a.r.Rejected)
		case <-time.After(10 * time.Second):
			require.FailNow(t, "no answer: the group was never handed off")
		}
	}
}

// With a log whose syncs are long, the nearly empty group open when a sync
// returns waits for the callers that sync answers: a, answered, sends its
// next command into b's group instead of the one after it, and the group
// goes to the log once it holds as many commands as a and c's had callers.
func TestLingerMergesTheCallersOfTheGroupJustSynced(t *testing.T) {
	sc := openLingerScene(t, withLongSyncs, false)
	holdUntil(sc.lingering)
	require.True(t, closed(sc.lingering), "the writer lingers with b alone after a and c's sync")
	requireAdmitted(t, sc.aCh, sc.cCh)
	a2 := sc.p.async(createRun(sc.adm, "a2"))
	requireAdmitted(t, sc.bCh, a2)
	require.Equal(t, [][]string{{"a", "c"}, {"b", "a2"}}, sc.handedOff())
	require.EqualValues(t, 1, sc.asked.Load())
}

// A linger is bounded: when it ends (here at the engine's own timer), the
// group goes to the log as it is, whether or not the callers came back.
func TestLingerEndsAtItsBound(t *testing.T) {
	sc := openLingerScene(t, withLongSyncs, true)
	holdUntil(sc.lingering)
	require.True(t, closed(sc.lingering), "the writer lingers with b alone after a and c's sync")
	requireAdmitted(t, sc.aCh, sc.cCh, sc.bCh)
	require.Equal(t, [][]string{{"a", "c"}, {"b"}}, sc.handedOff())
}

// The engine's own log never lingers: b goes to the log alone as soon as
// a and c's sync returns.
func TestLingerNotOnTheEnginesOwnLog(t *testing.T) {
	sc := openLingerScene(t, nil, false)
	requireAdmitted(t, sc.aCh, sc.cCh, sc.bCh)
	require.Equal(t, [][]string{{"a", "c"}, {"b"}}, sc.handedOff())
	require.Zero(t, sc.asked.Load(), "the writer never considered a linger")
}

// One client alone, one command at a time, never waits out a linger: its
// group holds its one command, as many as the group before had callers.
// So does a batch sent with SubmitAll after it: only its last command's
// caller waits.
func TestLingerNeverForALoneClient(t *testing.T) {
	p := openPipe(t, vfs.NewMem(), withLongSyncs)
	p.seedRunAs("S")
	var asked atomic.Int32
	p.set(pipeHooks{
		lingerClock: func(time.Duration, time.Duration) (time.Duration, time.Duration) {
			asked.Add(1)
			return time.Second, 0 // every sync long enough to linger after
		},
		lingerEnd: func(time.Duration) <-chan time.Time {
			return make(chan time.Time) // never ends: a linger would hang the client
		},
	})
	adm := events.AdminPrincipal()
	for _, id := range []string{"x1", "x2", "x3", "x4"} {
		requireAdmitted(t, p.async(createRun(adm, id)))
	}
	_, err := p.eng.SubmitAll(context.Background(), []Request{createRun(adm, "y1"), createRun(adm, "y2")})
	require.NoError(t, err)
	requireAdmitted(t, p.async(createRun(adm, "x5")))
	require.Zero(t, asked.Load())
}

// A linger is never longer than the sync it follows, nor than maxLinger, 5 ms.
func TestLingerForIsBoundedByTheSyncAndMaxLinger(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		sync, decide, bound time.Duration
		long                bool
	}{
		{3 * ms, ms, 3 * ms, true},
		{3 * ms, 4 * ms, 3 * ms, false},
		{3 * ms, 3 * ms, 3 * ms, false},
		{5 * ms, ms, 5 * ms, true},
		{6 * ms, ms, 5 * ms, true},
		{time.Second, ms, 5 * ms, true}, // maxLinger
	} {
		bound, long := lingerFor(c.sync, c.decide)
		require.Equal(t, c.bound, bound, "%+v", c)
		require.Equal(t, c.long, long, "%+v", c)
	}
}

// The sync a linger goes by ends when the sync returned, not when the
// writer takes the signal up: after a and c's sync the writer sits idle
// longer than any linger, and then b, alone, goes to the log at once.
// (Measured from when the writer took the signal up, the sync would
// include the idle spell, and b would wait out a whole maxLinger.)
func TestLingerNotAfterAnIdleSpell(t *testing.T) {
	p := openPipe(t, vfs.NewMem(), withLongSyncs)
	p.seedRunAs("S")
	adm := events.AdminPrincipal()
	var (
		cDecided, zSyncing = make(chan struct{}), make(chan struct{})
		mu                 sync.Mutex
		measured           []time.Duration // the syncs the writer measured
		lingered           atomic.Int32
	)
	p.set(pipeHooks{
		decided: func(ps []*pending) {
			if first(ps, "c") != nil {
				close(cDecided)
			}
		},
		beforeSync: holdFirstSync(zSyncing, cDecided),
		lingerClock: func(sync, since time.Duration) (time.Duration, time.Duration) {
			mu.Lock()
			measured = append(measured, sync, since)
			mu.Unlock()
			return sync, since
		},
		lingerEnd: func(time.Duration) <-chan time.Time {
			lingered.Add(1)
			end := make(chan time.Time, 1)
			end <- time.Time{} // ends at once: the test fails, not hangs
			return end
		},
	})
	zCh := p.async(createRun(adm, "z"))
	<-zSyncing
	aCh, cCh := p.async(createRun(adm, "a")), p.async(createRun(adm, "c"))
	requireAdmitted(t, zCh, aCh, cCh)
	// NB: not waiting for anything: the idle spell is the scene. a and c's
	// sync returned before they were answered.
	time.Sleep(maxLinger + time.Millisecond)
	requireAdmitted(t, p.async(createRun(adm, "b")))
	require.Zero(t, lingered.Load(), "b waited for callers after an idle spell")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, measured, 2, "the writer considered a linger once, for b")
	require.GreaterOrEqual(t, measured[1], maxLinger, "the sync returned before the idle spell")
}
