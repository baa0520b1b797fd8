package commands

import (
	"context"
	"strings"
	"sync"
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

// pipeFixture is an engine whose test hooks a test sets while it runs: as
// commands are decided and at pointDecided, when the group is handed off
// (writer goroutine), at every commit point (either goroutine) and in the
// log's BeforeSync (whoever waits for the sync).
type pipeFixture struct {
	*engineFixture
	queued chan struct{} // one per Submit that reached the queue

	mu sync.Mutex
	pipeHooks
}

func openPipe(t *testing.T, fs vfs.FS, committer func(*eventlog.Log) Committer) *pipeFixture {
	t.Helper()
	p := &pipeFixture{queued: make(chan struct{}, 64)}
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs, BeforeSync: func() {
		if fn := p.get().beforeSync; fn != nil {
			fn()
		}
	}})
	require.NoError(t, err)
	hooks := &testHooks{
		queued: func() {
			select {
			case p.queued <- struct{}{}:
			default: // a test that does not count them
			}
		},
		decidedCommands: func(ps []*pending) {
			if h := p.get(); h.decided != nil {
				h.decided(ps)
			}
		},
		commit: func(point commitPoint, group []*pending) error {
			h := p.get()
			if point == pointDecided && h.handOff != nil {
				h.handOff(group)
			}
			if h.at != nil {
				h.at(point, group)
			}
			return nil
		},
		lingerClock: func(sync, since time.Duration) (time.Duration, time.Duration) {
			if h := p.get(); h.lingerClock != nil {
				return h.lingerClock(sync, since)
			}
			return sync, since
		},
		lingerEnd: func(wait time.Duration) <-chan time.Time {
			if h := p.get(); h.lingerEnd != nil {
				return h.lingerEnd(wait)
			}
			return nil
		},
		pipelineFull: func() {
			if h := p.get(); h.full != nil {
				h.full()
			}
		},
	}
	o := Options{Clock: newTestClock().Now, NewID: counterIDs(), ExpiryInterval: -1, hooks: hooks}
	if committer != nil {
		o.Committer = committer(l)
	}
	e, err := Open(l, o)
	require.NoError(t, err)
	p.engineFixture = &engineFixture{t: t, fs: fs, log: l, eng: e}
	t.Cleanup(p.close)
	return p
}

type pipeHooks struct {
	decided    func(ps []*pending)    // commands just decided into the open group
	handOff    func(group []*pending) // pointDecided: the group is closed
	at         func(point commitPoint, group []*pending)
	beforeSync func()
	// lingerClock: the writer considers a linger after a sync it measured
	// (the linger reads the durations returned); lingerEnd: it lingers for
	// wait, until the channel returned (nil: its own timer).
	lingerClock func(sync, since time.Duration) (time.Duration, time.Duration)
	lingerEnd   func(wait time.Duration) <-chan time.Time
	full        func() // the writer waits for a flight: the pipeline is full
}

func (p *pipeFixture) get() pipeHooks {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pipeHooks
}

func (p *pipeFixture) set(h pipeHooks) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pipeHooks = h
}

// async submits r on a goroutine of its own and waits until it is queued, or answered without it (an engine that
// failed stop refuses it before its queue).
func (p *pipeFixture) async(r Request) <-chan answer {
	for len(p.queued) > 0 {
		<-p.queued
	}
	ch := make(chan answer, 1)
	go func() {
		reply, err := p.eng.Submit(context.Background(), r)
		ch <- answer{reply, err}
	}()
	select {
	case <-p.queued:
	case a := <-ch:
		ch <- a
	}
	return ch
}

// holdUntil waits for ch. NB: the bound only turns a build that cannot
// overlap (the awaited decision never comes while the sync is held) into a
// failing assertion instead of a hung test; it times nothing.
func holdUntil(ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
	}
}

// holdFirstSync is a beforeSync hook that closes syncing at the first sync
// and holds that sync until release is closed.
func holdFirstSync(syncing chan struct{}, release <-chan struct{}) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			close(syncing)
			holdUntil(release)
		})
	}
}

// createRun is the admin's run.create of run ID (id in upper case) with
// command id id.
func createRun(adm events.Principal, id string) Request {
	return as(adm, id, &RunCreate{RunID: strings.ToUpper(id), Team: "t", Goal: "g", Cwd: "/w"})
}

// first returns the pending of group with command id id (nil if none).
func first(group []*pending, id string) *pending {
	for _, p := range group {
		if p.req.CommandID == id {
			return p
		}
	}
	return nil
}

// createRunsAcrossAHeldSync submits the admin's runs a, then b once a's sync is held (syncing is closed), then c
// once next is closed, and requires each to be accepted.
func (p *pipeFixture) createRunsAcrossAHeldSync(adm events.Principal, syncing, next <-chan struct{}) {
	p.t.Helper()
	aCh := p.async(createRun(adm, "a"))
	<-syncing
	bCh := p.async(createRun(adm, "b"))
	<-next
	cCh := p.async(createRun(adm, "c"))
	for _, ch := range []<-chan answer{aCh, bCh, cCh} {
		a := <-ch
		require.NoError(p.t, a.err)
		require.Nil(p.t, a.r.Rejected)
	}
}

// commandIDs are the command ids of group's commands, in order.
func commandIDs(group []*pending) []string {
	var ids []string
	for _, q := range group {
		ids = append(ids, q.req.CommandID)
	}
	return ids
}

// What a test saw when the writer decided the group after the one held in
// its sync.
type sawAtDecision struct {
	heldAnswered  bool   // the held group's command was answered
	published     uint64 // Engine.Head
	logHead       uint64 // the log's durable head
	outcomeErr    error  // the log's lookup of the held command's outcome
	heldVisible   bool   // the held command's run is in the published state
	changedClosed bool   // Changed, taken before the held group, was closed
}

// The writer decides the next group while the group before it waits for
// its sync, and nothing of the held group is visible or answered before it
// is durable: not its answer, not the published state, Head, Changed, the
// log's head or its outcome.
func TestPipelineDecidesTheNextGroupWhileOneSyncs(t *testing.T) {
	p := openPipe(t, vfs.NewMem(), nil)
	p.seedRunAs("S")
	adm := events.AdminPrincipal()
	before := p.eng.Head()
	changed := p.eng.Changed()

	var (
		held    *pending
		saw     sawAtDecision
		decided = make(chan struct{})
		syncing = make(chan struct{})
		once    sync.Once
	)
	p.set(pipeHooks{
		decided: func(group []*pending) {
			if q := first(group, "a"); q != nil {
				held = q
			}
			if first(group, "b") != nil {
				saw.heldAnswered = closed(held.done)
				saw.published = p.eng.Head()
				saw.logHead, _ = p.log.Head()
				_, saw.outcomeErr = p.log.Outcome(adm.Key(), "a")
				p.eng.Read(func(s *projections.State) { _, saw.heldVisible = s.Run("A") })
				saw.changedClosed = closed(changed)
				close(decided)
			}
		},
		beforeSync: func() {
			once.Do(func() {
				close(syncing)
				holdUntil(decided)
			})
		},
	})
	aCh := p.async(as(adm, "a", &RunCreate{RunID: "A", Team: "t", Goal: "g", Cwd: "/w"}))
	<-syncing
	bCh := p.async(as(adm, "b", &RunCreate{RunID: "B", Team: "t", Goal: "g", Cwd: "/w"}))
	a, b := <-aCh, <-bCh
	require.NoError(t, a.err)
	require.NoError(t, b.err)

	require.True(t, closed(decided), "the next group was decided")
	require.False(t, saw.heldAnswered, "the next group is decided while the one before syncs")
	require.Equal(t, before, saw.published, "Head does not show a group before it is durable")
	require.Equal(t, before, saw.logHead, "the log's readers do not see it either")
	require.ErrorIs(t, saw.outcomeErr, eventlog.ErrNotFound, "nor its outcome")
	require.False(t, saw.heldVisible, "nor the published state")
	require.False(t, saw.changedClosed, "Changed is not closed for it")

	require.Less(t, a.r.Position, b.r.Position, "positions follow the order of decision")
	require.Equal(t, b.r.Position, p.eng.Head())
	p.eng.Read(func(s *projections.State) {
		_, okA := s.Run("A")
		_, okB := s.Run("B")
		require.True(t, okA && okB)
	})
	_, err := p.log.Verify(&eventlog.VerifyOptions{Principal: appendEventPrincipal})
	require.NoError(t, err)
}

// A retry of a command whose group is still in flight is answered with
// that command's outcome, only once it is durable, and is never decided a
// second time; another request under the same id is refused. Both are
// decided while the first's group waits for its sync, when the log does not
// serve its outcome yet.
func TestPipelineRetryOfACommandInFlight(t *testing.T) {
	p := openPipe(t, vfs.NewMem(), nil)
	p.seedRunAs("S")
	adm := events.AdminPrincipal()
	create := func() Command { return &RunCreate{RunID: "X", Team: "t", Goal: "g", Cwd: "/w"} }

	var (
		orig, retry              *pending
		retryDecided             = make(chan struct{})
		entered, bothQueued      = make(chan struct{}), make(chan struct{})
		origAnsweredAtDecision   bool
		outcomeAtDecision        error
		origAnsweredAtPublishing bool
		once                     sync.Once
	)
	p.set(pipeHooks{
		handOff: func(group []*pending) {
			if orig != nil && first(group, "x") == orig {
				close(entered)
				<-bothQueued // the retries queue while the writer holds this group
			}
		},
		decided: func(group []*pending) {
			q := first(group, "x")
			switch {
			case q == nil:
			case orig == nil:
				orig = q
			case retry == nil:
				retry = q
				origAnsweredAtDecision = closed(orig.done)
				_, outcomeAtDecision = p.log.Outcome(adm.Key(), "x")
				close(retryDecided)
			}
		},
		at: func(point commitPoint, group []*pending) {
			if point == pointPublished && retry != nil && first(group, "x") == retry {
				origAnsweredAtPublishing = closed(orig.done)
			}
		},
		beforeSync: func() { once.Do(func() { holdUntil(retryDecided) }) },
	})
	origCh := p.async(as(adm, "x", create()))
	<-entered
	for len(p.queued) > 0 {
		<-p.queued
	}
	var wg sync.WaitGroup
	got := make([]answer, 2)
	for i, c := range []Command{create(), &RunCreate{RunID: "Y", Team: "t", Goal: "g", Cwd: "/w"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.eng.Submit(context.Background(), as(adm, "x", c))
			got[i] = answer{r, err}
		}()
		<-p.queued
	}
	close(bothQueued)
	wg.Wait()
	o := <-origCh
	require.NoError(t, o.err)
	again, reused := got[0], got[1]
	require.NoError(t, again.err, "a retry in flight is not decided twice (the log would refuse the id and fail)")
	require.NoError(t, reused.err)

	require.False(t, origAnsweredAtDecision, "the retry was decided while the first's group was in flight")
	require.ErrorIs(t, outcomeAtDecision, eventlog.ErrNotFound, "when the log did not serve its outcome yet")
	require.True(t, origAnsweredAtPublishing, "the retry is answered only after the first is durable and answered")
	require.True(t, again.r.Replayed)
	require.JSONEq(t, string(o.r.Result), string(again.r.Result))
	require.Equal(t, o.r.Position, again.r.Position)
	require.Equal(t, reusedID(), reused.r.Rejected, "another request under the same id is refused")
	require.NoError(t, p.eng.Err())
	p.eng.Read(func(s *projections.State) {
		_, okY := s.Run("Y")
		require.False(t, okY, "the refused request changed nothing")
	})
	recorded, err := p.log.Outcome(adm.Key(), "x")
	require.NoError(t, err)
	require.Equal(t, o.r.Position, recorded.First+recorded.Count-1)
	created := 0
	it := p.log.ReadStream("X", 1)
	for it.Next() {
		if it.Event().Type == events.TypeRunCreated {
			created++
		}
	}
	require.NoError(t, it.Close())
	require.Equal(t, 1, created, "decided once")
}

// A failed fsync of a group while the writer decides the next one: neither
// is answered as a success, nothing of either is published, the engine
// fails stop, and the store reopens to a consistent prefix whose answers
// (the retries' replays) match what the log holds. NB: Pebble syncs a's group
// in the background as it is handed off, and the log learns of the failure
// from its WAL's file at once (wal_failure.go): the writer may then take the
// log's failure before b and fail stop, b answered undecided; the held wait
// for a's sync is let go at the engine's failure too.
func TestPipelineFailedSyncFailsTheGroupsInFlight(t *testing.T) {
	mem := vfs.NewCrashableMem()
	toggle := walFaults(errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo)
	p := openPipe(t, errorfs.Wrap(mem, toggle), nil)
	p.seedRunAs("S")
	adm := events.AdminPrincipal()
	before := p.eng.Head()
	viewBefore := snapshotOf(t, p.eng)
	reqA := as(adm, "a", &RunCreate{RunID: "A", Team: "t", Goal: "g", Cwd: "/w"})
	reqB := as(adm, "b", &RunCreate{RunID: "B", Team: "t", Goal: "g", Cwd: "/w"})

	var (
		held         *pending
		heldAnswered bool
		entered      = make(chan struct{})
		bQueued      = make(chan struct{})
		decided      = make(chan struct{})
		release      = make(chan struct{})
		once         sync.Once
	)
	p.set(pipeHooks{
		handOff: func(group []*pending) {
			if q := first(group, "a"); q != nil {
				held = q
				toggle.On() // the fsync that makes this group durable fails
				close(entered)
				<-bQueued
			}
		},
		decided: func(group []*pending) {
			if first(group, "b") != nil {
				heldAnswered = closed(held.done)
				close(decided)
			}
		},
		beforeSync: func() { once.Do(func() { holdUntil(release) }) },
	})
	go func() {
		select {
		case <-decided:
		case <-p.eng.Failed():
		}
		close(release)
	}()
	aCh := p.async(reqA)
	<-entered
	bCh := p.async(reqB)
	close(bQueued)
	a, b := <-aCh, <-bCh

	if closed(decided) {
		require.False(t, heldAnswered, "the second group was decided while the first synced")
	}
	require.ErrorIs(t, a.err, ErrFailed, "the group whose sync failed is answered with the failure")
	require.ErrorIs(t, b.err, ErrFailed, "and so is the group decided after it")
	require.ErrorIs(t, p.eng.Err(), ErrFailed)
	require.True(t, closed(p.eng.Failed()))
	require.Equal(t, before, p.eng.Head(), "nothing undurable is published")
	p.eng.Read(func(s *projections.State) {
		_, okA := s.Run("A")
		_, okB := s.Run("B")
		require.False(t, okA || okB)
	})
	require.Equal(t, viewBefore, snapshotOf(t, p.eng),
		"the published state is the one before the failed groups, byte for byte")
	_, err := p.eng.Submit(context.Background(),
		as(adm, "c", &RunCreate{RunID: "C", Team: "t", Goal: "g", Cwd: "/w"}))
	require.ErrorIs(t, err, ErrFailed)
	toggle.Off()
	p.eng.Close()
	_ = p.log.Close()
	p.eng = nil

	// A crash keeps what was synced (neither group); a restart without one
	// may find what Pebble wrote and never synced. Either way: a prefix,
	// and the retries learn exactly what it holds.
	for name, fs := range map[string]vfs.FS{"crash": mem.CrashClone(vfs.CrashCloneCfg{}), "restart": mem} {
		t.Run(name, func(t *testing.T) {
			l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
			require.NoError(t, err)
			defer l.Close()
			_, err = l.Verify(&eventlog.VerifyOptions{Principal: appendEventPrincipal})
			require.NoError(t, err)
			head, _ := l.Head()
			if name == "crash" {
				require.Equal(t, before, head, "nothing after the failed sync is durable")
			}
			_, errA := l.Outcome(adm.Key(), "a")
			_, errB := l.Outcome(adm.Key(), "b")
			hasA, hasB := errA == nil, errB == nil
			require.False(t, hasB && !hasA, "a prefix: the later group only with the earlier")
			e, err := Open(l, Options{Clock: newTestClock().Now, NewID: counterIDs(), ExpiryInterval: -1})
			require.NoError(t, err)
			defer e.Close()
			ra, err := e.Submit(context.Background(), reqA)
			require.NoError(t, err)
			rb, err := e.Submit(context.Background(), reqB)
			require.NoError(t, err)
			require.Equal(t, hasA, ra.Replayed, "the retry of a answers what the log holds")
			require.Equal(t, hasB, rb.Replayed, "the retry of b answers what the log holds")
			require.Nil(t, ra.Rejected)
			require.Nil(t, rb.Rejected)
		})
	}
}

// plainCommitter commits with the log's Append and cannot stage: the engine
// must not pipeline it.
type plainCommitter struct{ l *eventlog.Log }

func (c plainCommitter) Commit(ws []eventlog.Write) (uint64, error) { return c.l.Append(ws...) }

// With a Committer that cannot split its commit (the replicated backend),
// the writer decides a group only once every group before it is published.
func TestPipelineDepthOneForAPlainCommitter(t *testing.T) {
	p := openPipe(t, vfs.NewMem(), func(l *eventlog.Log) Committer { return plainCommitter{l} })
	p.seedRunAs("S")
	require.Equal(t, 1, p.eng.depth, "one group in flight at a time")
	var inFlight, overlaps atomic.Int64
	p.set(pipeHooks{at: func(point commitPoint, group []*pending) {
		switch point {
		case pointDecided:
			if inFlight.Add(1) > 1 {
				overlaps.Add(1)
			}
		case pointPublished:
			inFlight.Add(-1)
		}
	}})
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if _, err := p.eng.Submit(context.Background(), Request{Actor: orchestrator,
					Command: &TaskUsage{RunID: "S", TaskID: "02_exec", Input: int64(i)}}); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, overlaps.Load(), "a group was decided while another was in flight")
}

// While a group syncs, the next one stays open: requests that arrive during
// the sync are decided as they come and handed to the log together once
// the sync has returned, so groups are as large as when the writer waited
// for each sync.
func TestPipelineGroupStaysOpenWhileOneSyncs(t *testing.T) {
	p := openPipe(t, vfs.NewMem(), nil)
	p.seedRunAs("S")
	adm := events.AdminPrincipal()
	var (
		bDecided, cDecided = make(chan struct{}), make(chan struct{})
		syncing            = make(chan struct{})
		handedOff          [][]string // the command ids of each group after a's
	)
	p.set(pipeHooks{
		decided: func(ps []*pending) {
			if first(ps, "b") != nil {
				close(bDecided)
			}
			if first(ps, "c") != nil {
				close(cDecided)
			}
		},
		handOff: func(group []*pending) {
			if first(group, "b") != nil || first(group, "c") != nil {
				handedOff = append(handedOff, commandIDs(group))
			}
		},
		beforeSync: holdFirstSync(syncing, cDecided),
	})
	p.createRunsAcrossAHeldSync(adm, syncing, bDecided)
	require.Equal(t, [][]string{{"b", "c"}}, handedOff, "b and c, decided during a's sync, are one group")
}

// At most pipelineDepth (two) groups are handed to the log and not yet published: with an EarlyStager, which is
// handed each group as soon as it is decided, a third command that arrives while the first group's sync is held is
// not even decided until that group is published, and the writer waits for room meanwhile.
func TestPipelineHoldsAtMostTwoGroupsInFlight(t *testing.T) {
	p := openPipe(t, vfs.NewMem(), func(l *eventlog.Log) Committer { return earlyCommitter{logCommitter{l}} })
	p.seedRunAs("S")
	require.True(t, p.eng.early)
	adm := events.AdminPrincipal()
	var (
		inFlight, most      atomic.Int64 // groups decided and not yet published; the most at a decision
		syncing, bHandedOff = make(chan struct{}), make(chan struct{})
		release             = make(chan struct{})
		releaseOnce, bOnce  sync.Once
		cDecidedWhileHeld   atomic.Bool
		aPublished          atomic.Bool
		letGo               = func() { releaseOnce.Do(func() { close(release) }) }
	)
	p.set(pipeHooks{
		at: func(point commitPoint, group []*pending) {
			switch point {
			case pointDecided:
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if first(group, "b") != nil {
					bOnce.Do(func() { close(bHandedOff) })
				}
				if first(group, "c") != nil {
					cDecidedWhileHeld.Store(!aPublished.Load())
					letGo()
				}
			case pointPublished:
				if first(group, "a") != nil {
					aPublished.Store(true)
				}
				inFlight.Add(-1)
			}
		},
		beforeSync: holdFirstSync(syncing, release),
		full:       letGo,
	})
	p.createRunsAcrossAHeldSync(adm, syncing, bHandedOff)
	require.False(t, cDecidedWhileHeld.Load(), "a third group was decided while the first was held in its sync")
	require.Equal(t, int64(2), most.Load(), "two groups were in flight at once, never more")
}

// earlyCommitter is the engine's log as an EarlyStager.
type earlyCommitter struct{ logCommitter }

func (earlyCommitter) StagesEarly() bool { return true }

// With an EarlyStager the writer hands a group to the log while the one
// before still syncs; a failed sync still fails both, and neither is
// answered as a success. NB: the log learns of the failed sync from its WAL's
// file at once (wal_failure.go), and b's group, staged after that, is refused
// before its hand-off (the engine fails stop at it): the held sync is then let
// go at the engine's failure, where it waited for b's hand-off until its bound.
func TestPipelineEarlyStagerHandsOffWhileOneSyncs(t *testing.T) {
	mem := vfs.NewMem()
	toggle := walFaults(errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo)
	p := openPipe(t, errorfs.Wrap(mem, toggle), func(l *eventlog.Log) Committer {
		return earlyCommitter{logCommitter{l}}
	})
	p.seedRunAs("S")
	require.True(t, p.eng.early)
	adm := events.AdminPrincipal()
	var (
		held                  *pending
		heldAnsweredAtHandOff = true
		syncing, bHandedOff   = make(chan struct{}), make(chan struct{})
		release               = make(chan struct{})
	)
	p.set(pipeHooks{
		handOff: func(group []*pending) {
			if q := first(group, "a"); q != nil {
				held = q
				toggle.On() // the fsync that makes a's group durable fails
			}
			if first(group, "b") != nil {
				heldAnsweredAtHandOff = closed(held.done)
				close(bHandedOff)
			}
		},
		beforeSync: holdFirstSync(syncing, release),
	})
	go func() {
		select {
		case <-bHandedOff:
		case <-p.eng.Failed():
		}
		close(release)
	}()
	aCh := p.async(createRun(adm, "a"))
	<-syncing
	bCh := p.async(createRun(adm, "b"))
	a, b := <-aCh, <-bCh
	if closed(bHandedOff) {
		require.False(t, heldAnsweredAtHandOff, "b's group was handed off while a's synced")
	}
	require.ErrorIs(t, a.err, ErrFailed)
	require.ErrorIs(t, b.err, ErrFailed, "the group handed off after the failed one fails too")
	p.eng.Read(func(s *projections.State) {
		_, okA := s.Run("A")
		_, okB := s.Run("B")
		require.False(t, okA || okB, "nothing of either is published")
	})
}
