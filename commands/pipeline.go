package commands

import (
	"fmt"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The write path is a pipeline of two stages, so that deciding a group
// overlaps the fsync of the one before it:
//
//  1. The writer (engine.go run and fill, group.go decide and handOff)
//     decides a group against its working copy of the state, which already
//     holds the effects of the groups still in flight, and hands the group
//     to the log (Stage: its positions, versions and hashes are assigned, in
//     order, at the hand-off). It does not wait for the sync: it opens the
//     next group and decides each request as it arrives while that sync
//     runs, and hands the group off once the sync has returned — so a group
//     holds what arrived during one sync, as when the writer waited for each
//     sync, and its decisions overlap the sync.
//  2. The publisher (land, below) takes the groups in hand-off order,
//     waits for each to be durable, folds it into the published copy of the
//     state and then answers its commands. A group that appends nothing
//     has nothing to wait for; with a Committer that is a HeadConfirmer
//     (commit.go: the replicated backend, whose writer may have been
//     deposed unawares) the publisher first asks it to confirm that the
//     log holds nothing the writer has not applied, once per group.
//
// The linger. Left alone, that rule splits the clients into two groups
// that take turns: a full group A syncs; the few commands that arrive
// meanwhile (those of clients answered by the group before A) are the open
// group B; A's sync returns, B goes to the log at once, nearly empty, and
// only then does the publisher answer A, whose clients send their next
// commands while B syncs — into group C, as large as A. Groups alternate
// between nearly full and nearly empty, and each client is answered once
// every two syncs. Where a sync is cheap beside deciding (a local WAL
// fsync) that costs little, and the writer's decisions overlapping the
// sync are worth more than larger groups. Where it is long (a replicated
// log: three WAL fsyncs and route round trips a group, whatever its size)
// the nearly empty group costs nearly as much as a full one.
//
// So with a log that says its syncs are long (LongSyncer, commit.go: the
// replicated backend), when a sync returns and the open group holds fewer commands than the
// group just synced had callers (commands whose caller waits for the
// answer before it sends more: every Submit but the engine's own, a
// SubmitAll batch's last), the writer keeps it open — deciding what
// arrives — until it holds that many or a bound passes (lingerFor): the
// callers answered in a moment join it instead of the group after it. The
// bound is the sync just measured (from its hand-off to its return),
// capped by maxLinger and counted from the sync's return, so a writer
// that takes the signal up only after an idle spell lingers less or not
// at all; and there is no linger unless that sync took longer than the
// writer took to decide its group (the pipeline waited for the log, not
// the log for the writer). Those callers would otherwise wait for the nearly empty group's
// whole sync before their own group was even handed off, so a linger no
// longer than one sync never holds them longer; the few commands already
// in the open group wait at most that long more, and the log is spared one
// sync. A lone client never lingers: its open group holds its one command,
// as many as the group synced had callers. The engine's own log, an
// EarlyStager that stages early and a Committer that cannot stage never
// linger. (Measured on the engine's own log, the linger made its groups
// twice as large and the rate lower: there the writer's decisions are what
// bound the rate, and a linger stops them overlapping the fsync.)
//
// With an EarlyStager that stages early (the JetStream log, optionally) the
// writer hands each group off as soon as it is decided; groups then hold
// what queued while the pipeline was full, and two are in the log's hands
// at once.
//
// So nobody — a client, a reader of the published state, Head, Changed, a
// reader of the log (bounded by its durable head), an outcome lookup —
// sees a group before it and every group before it are durable. A failure
// anywhere fails the engine; from then on the publisher publishes nothing
// more and answers every command of every group in flight with the failure
// (ErrFailed), durable or not, as a crash would have left them unanswered.

// pipelineDepth is how many groups may be handed to the log and not yet
// published at once. Two: one whose WAL fsync is in flight, and one the
// writer decides meanwhile and hands to the log, where Pebble's commit
// pipeline syncs it with the next fsync. A deeper pipeline would not sync
// more often — the disk does one fsync at a time, and everything queued
// while two groups are in flight goes into the next group anyway — so it
// would only split the queue into smaller groups, and hold more undurable
// state for a failure to throw away.
const pipelineDepth = 2

// maxLinger caps the linger (lingerFor): a sync that stalls must not teach
// the writer to hold the next group as long. It is about a replicated
// sync on a loaded machine, several times the clients' turnaround.
const maxLinger = 5 * time.Millisecond

// lingerFor is how long the writer may keep the open group waiting for the
// callers of a group whose sync took sync and whose commands the writer
// took decide to decide, and whether it lingers at all: only when the sync
// was the longer, and never longer than it (or maxLinger).
func lingerFor(sync, decide time.Duration) (bound time.Duration, long bool) {
	return min(sync, maxLinger), sync > decide
}

// linger returns the channel that ends the open group f's linger, or nil
// when f goes to the log now (writer only, once the sync before it
// returned, at syncedAt: the publisher's time, not the writer's, which may
// take the signal up only after an idle spell). The sync is measured from
// its hand-off to syncedAt, and the linger ends at syncedAt plus its
// bound: one already past is none.
func (e *Engine) linger(f *flight, syncedAt time.Time) <-chan time.Time {
	if !e.mayLinger || len(f.group) >= e.handedCallers {
		return nil
	}
	sync, since := syncedAt.Sub(e.handedAt), time.Since(syncedAt)
	h := e.opts.hooks
	if h != nil && h.lingerClock != nil {
		sync, since = h.lingerClock(sync, since)
	}
	bound, long := lingerFor(sync, e.handedDecide)
	if !long || since >= bound {
		return nil
	}
	wait := bound - since
	if h != nil && h.lingerEnd != nil {
		if end := h.lingerEnd(wait); end != nil {
			return end
		}
	}
	if e.lingerTimer == nil {
		e.lingerTimer = time.NewTimer(wait)
	} else {
		e.lingerTimer.Reset(wait)
	}
	return e.lingerTimer.C
}

// handedOff notes what the linger needs of f, just handed to the log
// (writer only, when it may linger).
func (e *Engine) handedOff(f *flight) {
	if !e.mayLinger {
		return
	}
	if f.staged != nil {
		e.handedAt, e.handedDecide, e.handedCallers = f.stagedAt, e.openDecide, 0
		for _, p := range f.group {
			if p.caller {
				e.handedCallers++
			}
		}
	}
	e.openDecide = 0
}

// flight is one group on its way through the pipeline, with the buffers
// the writer fills for it; the engine owns pipelineDepth of them (fewer
// for a Committer that cannot stage), so a flight is also the permit to
// hand a group to the log.
type flight struct {
	group   []*pending // nil for a flight that only makes runs cold
	staged  StagedCommit
	first   uint64 // the position the writer gave the group's first event
	next    uint64 // the position after the group
	faulted []projections.Thawed
	applied []events.Event
	evicted []string
	// madeCold is how many of evicted count towards the next snapshot (projections.State.EvictAllCounted).
	madeCold int
	// unrecorded are the group's commands with a command id that are not
	// recorded; the writer forgets them when it hands the group off.
	unrecorded []*pending
	// firsts are the group's commands the writer entered in Engine.seen;
	// it forgets them when it takes the flight again, once their outcomes
	// are the log's to answer.
	firsts []*pending
	// eventless is, per principal the group records an outcome with no
	// event of, its count of them with the group's (eventless.go).
	eventless map[string]uint64
	// eventlessRuns is the same per run, the principals' runs' tallies.
	eventlessRuns map[string]uint64

	started, stagedAt time.Time
	stageTook         time.Duration // the writer's Stage call (Stats.Staging)

	writes    []eventlog.Write
	logEvents []eventlog.Event // the writes' events, one slab
	payloads  []byte           // their payloads, encoded one after another
}

// maxKeptPayloads bounds the payload buffer a flight keeps between groups
// (a group of large messages should not pin its room for ever).
const maxKeptPayloads = 1 << 20

// acquire takes a free flight for the writer, waiting while pipelineDepth
// groups are in flight, and makes it empty.
func (e *Engine) acquire() *flight {
	var f *flight
	select {
	case f = <-e.free:
	default:
		if h := e.opts.hooks; h != nil && h.pipelineFull != nil {
			h.pipelineFull()
		}
		f = <-e.free
	}
	for _, p := range f.firsts {
		e.forget(p)
	}
	clear(f.firsts)
	clear(f.eventless)
	clear(f.eventlessRuns)
	clear(f.unrecorded)
	f.unrecorded = f.unrecorded[:0]
	clear(f.group)
	clear(f.faulted)
	clear(f.applied)
	clear(f.writes)
	clear(f.logEvents)
	f.group, f.faulted, f.applied, f.writes, f.logEvents = f.group[:0], f.faulted[:0], f.applied[:0], f.writes[:0],
		f.logEvents[:0]
	f.staged, f.evicted, f.madeCold, f.firsts = nil, nil, 0, f.firsts[:0]
	if cap(f.payloads) > maxKeptPayloads {
		f.payloads = nil
	}
	f.payloads = f.payloads[:0]
	f.first, f.next = e.next, e.next
	return f
}

// forget removes p from Engine.seen, unless another command holds its slot
// there by now.
func (e *Engine) forget(p *pending) {
	if e.seen[p.slot] == p {
		delete(e.seen, p.slot)
	}
}

// settle waits until every group handed to the log is published, and
// returns every flight: the working and the published copies then hold the
// same, durable, state. The writer settles before it makes runs cold (the
// log must hold every event of a cold run: it is read back from there) and
// before it folds events another writer committed.
func (e *Engine) settle() []*flight {
	fs := make([]*flight, e.depth)
	for i := range fs {
		fs[i] = e.acquire()
	}
	return fs
}

// release gives flights the writer holds back.
func (e *Engine) release(fs ...*flight) {
	for _, f := range fs {
		e.free <- f
	}
}

// publishLoop is the publisher: it lands every flight in hand-off order
// until the writer closes flights.
func (e *Engine) publishLoop() {
	defer close(e.landed)
	for f := range e.flights {
		e.land(f)
		e.free <- f
	}
}

// land waits for f's group to be durable, publishes it and answers it; or,
// once the engine has failed, answers it with the failure.
func (e *Engine) land(f *flight) {
	var err error
	var appendTook time.Duration
	if f.staged != nil {
		// NB: waited for even after a failure, to release the log's hold.
		var first uint64
		first, err = f.staged.Wait()
		syncedAt := time.Now()
		appendTook = syncedAt.Sub(f.stagedAt)
		if !e.early {
			e.synced <- syncedAt // the writer may hand the next group off
		}
		if err == nil {
			err = e.hook(pointDurable, f.group)
		}
		if err == nil && len(f.applied) > 0 && first != f.first {
			err = fmt.Errorf("commands: log assigned position %d, the engine expected %d (another writer?)",
				first, f.first)
		}
	} else if len(f.group) > 0 && e.confirmer != nil && e.failure() == nil {
		// NB: a group that appends nothing meets no fence; its answers wait until the log is known to hold
		// nothing this writer lacks (HeadConfirmer).
		err = e.confirmer.ConfirmHead()
	}
	if err != nil {
		e.fail(err)
	}
	if ferr := e.failure(); ferr != nil {
		e.landFailed(f, ferr)
		return
	}
	// The log assigned stream versions; carry them into the events the
	// published copy folds.
	k := 0
	for _, wr := range f.writes {
		for i := range wr.Events {
			f.applied[k].StreamVersion = wr.Events[i].StreamVersion
			k++
		}
	}
	if f.staged != nil {
		e.stats.groups.Add(1)
		e.stats.sizes[groupSizeClass(len(f.group))].Add(1)
		e.stats.appending.Add(int64(appendTook))
		e.stats.staging.Add(int64(f.stageTook))
	}
	e.stats.commands.Add(uint64(len(f.group)))
	e.stats.events.Add(uint64(len(f.applied)))
	if err := e.publish(f); err != nil {
		e.landFailed(f, e.fail(err))
		return
	}
	if len(f.group) > 0 {
		e.report(f, appendTook, false)
	}
}

// landFailed answers f's group with the engine's failure ferr and tells the observer its commands were errors.
func (e *Engine) landFailed(f *flight, ferr error) {
	answerFailed(f.group, ferr)
	if len(f.group) > 0 {
		e.report(f, 0, true)
	}
}

// publish folds f into the published copy (the same cold runs faulted in,
// the same events applied, the same runs made cold as in the working
// copy), tells the followers, and answers f's group. It returns an error
// only from a test hook, before anyone is answered.
func (e *Engine) publish(f *flight) error {
	if v := e.pub; len(f.faulted) > 0 || len(f.applied) > 0 || len(f.evicted) > 0 {
		v.mu.Lock()
		for _, t := range f.faulted {
			v.s.ThawFrom(t)
		}
		for _, ev := range f.applied {
			projections.Apply(v.s, ev)
		}
		for _, id := range f.evicted {
			v.s.Evict(id)
		}
		v.mu.Unlock()
		e.runs.forget(f.evicted)
	}
	e.coldSinceSnap += f.madeCold
	e.publishTaps(f.applied) // NB: before the wake, so that a reader woken for the group finds it
	if f.group != nil {
		ch := make(chan struct{})
		close(*e.changed.Swap(&ch))
		e.runs.publish(f.applied)
		if err := e.hook(pointPublished, f.group); err != nil {
			return err
		}
		for _, p := range f.group {
			if p.follow != nil {
				// NB: the command it follows is in this group or an
				// earlier one, answered already.
				p.reply, p.err = p.follow.reply, p.follow.err
				p.reply.Replayed, p.reply.Value = true, nil
			}
			if !p.early {
				close(p.done)
			}
		}
	}
	e.maybeSnapshot()
	return nil
}

// fail records err as the engine's failure, if it is the first, and returns
// the error every unanswered command is answered with.
func (e *Engine) fail(err error) error {
	if e.failed.CompareAndSwap(nil, &err) {
		close(e.stopped)
		e.opts.Logger.Error("engine failed stop: a commit or its log failed", "err", err)
	}
	return e.failure()
}

// answerFailed answers group with ferr (but the commands answered early by
// a planted-bug build, which must not be answered twice).
func answerFailed(group []*pending, ferr error) {
	for _, p := range group {
		if !p.early {
			p.reply, p.err = Reply{}, ferr
			close(p.done)
		}
	}
}
