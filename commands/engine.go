package commands

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Engine errors.
var (
	// ErrClosed is returned by Submit after Close.
	ErrClosed = errors.New("commands: engine closed")
	// ErrFailed is returned by Submit after a commit error: the engine fails
	// stop, and the daemon must restart (rebuilding from the log).
	ErrFailed = errors.New("commands: engine failed after a commit error; restart to recover")
	// ErrNoSpace is returned by Submit while Options.Space reports too little
	// free space. The command was not decided and nothing was recorded, so
	// the same command id may be retried once space is back.
	ErrNoSpace = errors.New("commands: too little free disk space; retry later")
	// ErrRemote wraps the error another engine answered a forwarded
	// request with (forward.go).
	ErrRemote = errors.New("commands: the writer failed the forwarded request")
	// ErrNotWriter is the answer of an engine that may not decide (a
	// cluster node that is not the writer) to a request forwarded to it,
	// given before anything was decided: the request may go to the writer
	// again, with or without a command id.
	ErrNotWriter = errors.New("commands: this engine is not the writer; nothing was decided")
	// ErrWriterBusy is the answer of a cluster's writer to a request forwarded to it while it holds as many forwarded
	// requests as it may (its engine's queue's worth, QueueCap), given before anything was decided: the request may
	// go to the writer again, with or without a command id, as a request waits for room in the queue of one crewd.
	ErrWriterBusy = errors.New("commands: the writer holds as many forwarded requests as it may; nothing was decided")
	// ErrResultTooLarge is the answer to a request whose accepted result
	// would exceed its Request.MaxResultBytes: nothing was applied or recorded,
	// so the same command id may be sent again by a caller with more room.
	ErrResultTooLarge = errors.New("commands: the result is larger than the caller can carry; nothing was recorded")
	// ErrUnavailable is wrapped by a Forwarder's errors when no writer
	// answered a request (a cluster without a writer), or when this engine
	// stopped before it learned the answer: the command may have been
	// decided, and a retry with the same command id learns its outcome
	// (one sent without a command id is in doubt).
	ErrUnavailable = errors.New("commands: no writer answered; retry with the same command id")
)

// SpaceGuard is asked before every command is queued, and before every
// other write the engine makes (a snapshot, a view or a summary of a cold
// run). CheckSpace returns an error while the store's disk is too full to
// take more writes; it must be cheap (it runs on the caller's goroutine for
// every Submit) and safe for concurrent use.
type SpaceGuard interface {
	CheckSpace() error
}

// SpaceForGuard is a SpaceGuard that also answers for a write of a known size: CheckSpaceFor returns an error unless
// the free space less size stays at or above the minimum. A background write whose size is known before it is made
// (the snapshot, measured once encoded) asks it, so that a write which starts above the minimum does not itself
// take the reserve the log needs; a guard without it is asked CheckSpace. It may read the disk (it is asked once
// per such write, not per command) and must be safe for concurrent use.
type SpaceForGuard interface {
	SpaceGuard
	CheckSpaceFor(size uint64) error
}

// Options configure an Engine. Zero fields mean defaults.
type Options struct {
	// Clock is the wall clock (default time.Now) the engine's time follows, never back (engine_time.go). Its
	// readings are recorded in events, so replay does not need it.
	Clock func() time.Time
	// NewID mints ids (default random UUIDs).
	NewID func() string
	// Config, when set, is put in force at start (engine.configured is
	// recorded if it differs from the one in the log).
	Config *projections.Config
	// MaxGroup bounds the commands decided and committed together
	// (default 1024).
	MaxGroup int
	// SnapshotEvery is the fewest events between two snapshots (default
	// DefaultSnapshotEvery; negative disables): the next is due after
	// max(SnapshotEvery, k × the last snapshot's records) events, or once
	// runs went cold (snapshot.go).
	SnapshotEvery int64
	// ExpiryInterval is the engine clock's tick, which times out overdue
	// delegations (default 1 s; negative disables the ticker: call Tick).
	ExpiryInterval time.Duration
	// Logger (default discard).
	Logger *slog.Logger
	// Retention is how long a run that ended (completed, failed,
	// cancelled) stays in memory after its last event before it goes cold:
	// read back from the log when asked for (tier.go). Default
	// DefaultRetention; negative means no retention (cold at once).
	Retention time.Duration
	// NoViews turns off the views of cold runs: a run that goes cold is
	// then re-folded from its events by every query that reads it back
	// after it left the cache (the choice of tests and benchmarks comparing
	// the two). It does not touch the index of summaries, which is written
	// either way (projections' runindex.go): the index is what keeps the
	// memory of the runs that ended bounded and what the runs list pages,
	// so turning it off with the views would make a daemon without views
	// grow with history and the comparison measure more than the views.
	NoViews bool
	// ColdCache is how many cold runs read back from the log stay decoded
	// (default projections.DefaultColdCache).
	ColdCache int
	// Space, when set, refuses commands with ErrNoSpace before they reach
	// the writer, so a full disk is met before Pebble fails (which would
	// stop the engine).
	Space SpaceGuard
	// Observer, when set, is told about every group and snapshot (metrics).
	Observer Observer
	// Committer, when set, makes each group durable instead of the log's
	// Append (commit.go); it must append the group to the engine's log.
	Committer Committer
	// Forwarder, when set, is offered every request first (a follower
	// forwards it to the writer: commit.go) but one its caller refused
	// (Request.Refused), which a follower answers from its own copy and
	// the writer decides (WriterForwarder).
	Forwarder Forwarder

	hooks *testHooks // crash points for tests; nil in production
}

// Request is one command submitted to the engine.
type Request struct {
	// Principal is whose CommandID it is: the caller's authenticated
	// identity (events.AdminPrincipal, OrchestratorPrincipal of its run,
	// WorkerPrincipal of its task), or events.EnginePrincipal for the
	// engine's own commands. Required with a CommandID.
	Principal events.Principal
	// CommandID is the caller's idempotency key, scoped to Principal: a
	// request whose (principal, id) was already decided for the same
	// request is answered with the recorded outcome, forever; for another
	// request it is refused bad-params, and nothing is recorded.
	CommandID string
	Actor     events.Actor
	Command   Command
	// MaxResultBytes, when > 0, is the most bytes of result JSON the caller can
	// carry to its client (the broker: a frame, less its envelope and the
	// request's id). A command whose result would be larger is answered
	// ErrResultTooLarge before anything is applied or recorded, so a caller
	// that could not deliver the answer never commits a change its client
	// does not hear of (a run whose orchestrator token is lost with its
	// answer, say). A recorded outcome answering a retry is not measured:
	// it commits nothing.
	MaxResultBytes int
	// Credential, when set, is the secret the request authenticated with:
	// the writer checks it against the state it decides the request on,
	// and answers a *CredentialEndedError, deciding and recording nothing,
	// when it has ended (revoked, or a worker's task or run over). A
	// request forwarded to another crewd's writer carries it, by its
	// digest, beside the request's bytes (EncodeCredential), and is checked
	// there, against the writer's state, not the follower's copy; a writer
	// of the build before forwarded credentials reads the bytes alone
	// (forward.go says why).
	Credential *Credential
	// Refused, when set, is the caller's refusal of the request, measured against the published state before it
	// was submitted (the broker's: a worker's message some mailbox it reaches could not read back). The writer
	// answers it, deciding and recording nothing, unless the request's CommandID has an outcome, which answers it as
	// it answers any retry: what the caller measures may have changed since the outcome was recorded (a mailbox
	// created since), and a retry must not be told otherwise than the first attempt was. A follower of a cluster
	// looks the outcome up in its own copy instead, since a forwarded request does not carry the refusal
	// (WriterForwarder).
	Refused error
}

// Reply is the engine's answer to a request. Exactly one of Result and
// Rejected is set.
type Reply struct {
	Result json.RawMessage
	// Value is what Result encodes, before it was encoded (a
	// *DelegateResult for delegate.request, the result struct or map its
	// decision returned for the others), for a caller in the same process
	// that would otherwise decode the JSON it was just encoded from. It is
	// nil on a rejection and on every replay (a recorded outcome keeps only
	// the JSON), so no two callers hold the same one.
	Value    any
	Rejected *RejectedError
	// Position is the last position the command wrote (0 when none).
	Position uint64
	// Replayed is set when the answer is the recorded outcome of an earlier
	// attempt with the same command id.
	Replayed bool
}

// Engine is crewlog's single writer (DESIGN.md): commands queue, one
// goroutine decides a group of them against the working state (each sees
// the effects of those before it) and hands all their events to the log as
// one synced append; a second goroutine waits for the append to be durable,
// publishes the group and answers (pipeline.go), while the writer decides
// the next group.
//
// Concurrency: Submit and Read are safe from any goroutine. Errors: a commit
// error makes the engine fail stop (ErrFailed); rejections are answers, not
// errors.
type Engine struct {
	log  *eventlog.Log
	opts Options
	in   chan *pending
	sync chan chan error // CatchUp requests (follow.go)
	quit chan struct{}
	done chan struct{}

	pub  *view              // the published copy: the durable groups, folded by the publisher
	work *projections.State // the writer's copy: the groups decided so far, in flight included
	next uint64             // the next position the log will assign (writer only)

	// The pipeline (pipeline.go): the writer sends each group it hands to
	// the log to flights; the publisher lands them in order and gives each
	// flight back to free. depth flights exist.
	stager  stager
	checker WriteChecker // the Committer's, if it is one
	// confirmer is the Committer's, if it is one: the publisher asks it before answering a group that appends
	// nothing.
	confirmer HeadConfirmer
	depth     int
	flights   chan *flight
	free      chan *flight
	landed    chan struct{} // closed when the publisher has landed the last flight
	// synced carries, per staged group whose sync returned, the time it
	// returned; the
	// writer counts the groups staged and not yet synced in unsynced, and
	// keeps the next group open while one is; with early (an EarlyStager)
	// it hands each group off at once, and neither is kept.
	synced   chan time.Time
	unsynced int
	early    bool
	// What the writer knows of the last group it handed to the log and of
	// the open one, for the linger (pipeline.go): when the last was handed
	// off, how many of its commands' callers wait for their answer before
	// they send more, and the writer's time spent deciding each.
	mayLinger     bool // the writer may linger (pipeline.go): stagerFor says when
	handedAt      time.Time
	handedCallers int
	handedDecide  time.Duration
	openDecide    time.Duration
	lingerTimer   *time.Timer
	// seen holds the command ids of the groups in flight (writer only), so
	// that a retry of one is answered as it, not decided twice.
	seen map[string]*pending

	failed    atomic.Pointer[error]
	stopped   chan struct{} // closed when the engine fails stop
	stuck     chan struct{} // closed when it failed stop without its writer, held inside its log (stopWithLog)
	closeOnce sync.Once
	wg        sync.WaitGroup

	changed atomic.Pointer[chan struct{}] // closed and replaced at every publish
	runs    runNotifier                   // per-run channels, closed at a publish of that run's events
	tapSet                                // readers of every published event (tap.go)
	stats   struct {
		groups, commands, events atomic.Uint64
		sizes                    [GroupSizeClasses]atomic.Uint64
		appending, staging       atomic.Int64 // nanoseconds (Stats.Appending, Stats.Staging)
	}
	snapping atomic.Bool // the publisher's, as lastSnap and coldSinceSnap
	// savingViews is set while the views of cold runs are being written
	// (tier.go).
	savingViews atomic.Bool
	viewsMu     sync.Mutex // held by a pass writing views
	// missingViewsWait is how many eviction passes go by before the next pass of the missing views, after one
	// failed (tier.go); missingViewsBackoff how many the last failure set, touched by one pass at a time
	// (savingViews).
	missingViewsWait    atomic.Int64
	missingViewsBackoff int64
	cold                *projections.ColdStore // shared by both copies
	lastSnap            uint64
	// lastSnapRecords is the last saved snapshot's size in records, set by
	// the goroutine that saved it and read by the publisher.
	lastSnapRecords atomic.Int64
	loadInfo        projections.LoadInfo
	rep             GroupReport // reused by report (publisher only)
	// coldSinceSnap counts the runs made cold since the last snapshot.
	coldSinceSnap int
	// nextEvict is when the writer next looks for runs to make cold;
	// lastNow the clock reading of the writer's last decision (writer only).
	nextEvict time.Time
	lastNow   time.Time
	// times is the engine's time, read for every decision and tick (engine_time.go).
	times *engineTime
}

type pending struct {
	req       Request
	principal string // req.Principal.Key(), when req has a CommandID
	slot      string // principal and command id, unambiguously (the duplicate check of the groups in flight)
	fp        []byte // fingerprint(req.Command), when req has a CommandID: a slice of fpBuf
	fpBuf     [fingerprintLen]byte
	cutFP     []byte // cutFingerprint(req.Command), when req has a CommandID: nil but for a settle whose text was cut
	reply     Reply
	err       error
	done      chan struct{}
	follow    *pending // the same principal's command id earlier in flight, same request: answer as it
	early     bool     // answered before the commit (planted_on.go, test builds only)
	refused   bool     // answered its caller's refusal (Request.Refused), nothing decided
	// caller is set when a caller waits for this command's answer before
	// it sends more: a Submit's command (not the engine's own) and a
	// SubmitAll batch's last. The linger counts them (pipeline.go).
	caller bool
}

// Open rebuilds the state from l (newest valid snapshot + tail) and starts
// the writer. The engine does not own l: close the engine, then the log.
func Open(l *eventlog.Log, opts Options) (*Engine, error) {
	KeepRunTallies(l)
	o := opts
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.NewID == nil {
		o.NewID = newUUIDSource().NewString
	}
	if o.MaxGroup <= 0 {
		o.MaxGroup = 1024
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = DefaultSnapshotEvery
	}
	if o.ExpiryInterval == 0 {
		o.ExpiryInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Config != nil {
		if err := ValidateConfig(*o.Config); err != nil {
			return nil, fmt.Errorf("commands: engine config: %w", err)
		}
	}
	times, err := openEngineTime(l, o)
	if err != nil {
		return nil, err
	}
	s, info, err := projections.LoadTiered(l, projections.Tiering{
		Retention: time.Duration(o.retention()) * time.Millisecond, MaxRetained: MaxRetainedRuns, Cache: o.ColdCache,
		SaveViews: !o.NoViews, Index: true,
	})
	if err != nil {
		return nil, fmt.Errorf("commands: rebuild state: %w", err)
	}
	s.ColdStore().ReportIndexErrors(func(inMemory int, err error) {
		o.Logger.Error("summaries of finished runs not written to the index; they are answered from memory and "+
			"written at the next eviction pass", "inMemory", inMemory, "err", err)
	})
	s.ColdStore().ReportErrors(func(run string, err error) {
		o.Logger.Error("a cold run could not be read back from the log; its requests are refused until it can be",
			"run", run, "err", err)
	})
	if info.IndexRebuilt != nil {
		o.Logger.Warn("the index of finished runs' summaries did not hold the runs it should; it was rebuilt "+
			"from the log", "why", info.IndexRebuilt)
	}
	if info.SnapshotPosition > 0 || s.Position > 0 {
		o.Logger.Info("state rebuilt", "snapshot", info.SnapshotPosition, "replayed", info.Replayed,
			"snapshotError", errString(info.SnapshotError), "hotRuns", s.HotRuns(), "coldRuns", s.ColdRuns(),
			"summariesIndexed", info.Indexed, "summariesInMemory", s.ColdInMemory())
	}
	head, _ := l.Head()
	e := &Engine{
		log: l, opts: o, in: make(chan *pending, 4*o.MaxGroup), sync: make(chan chan error),
		quit: make(chan struct{}), done: make(chan struct{}), stopped: make(chan struct{}),
		stuck: make(chan struct{}),
		next:  head + 1, lastSnap: info.SnapshotPosition, loadInfo: info, coldSinceSnap: info.Evicted,
		seen: make(map[string]*pending), landed: make(chan struct{}),
		cold: s.ColdStore(), times: times,
	}
	e.lastSnapRecords.Store(info.SnapshotRecords)
	// NB: no view of a cold run, nor summary, is written while the disk is below its minimum, whatever writes it: an
	// eviction pass, a read back of a cold run (a query), a pass of the missing views.
	e.cold.HoldWritesWhile(e.CheckSpace)
	e.stager, e.depth, e.early, e.mayLinger = stagerFor(o.Committer, l)
	e.checker, _ = o.Committer.(WriteChecker)
	e.confirmer, _ = o.Committer.(HeadConfirmer)
	e.flights, e.free, e.synced = make(chan *flight, e.depth), make(chan *flight, e.depth),
		make(chan time.Time, e.depth)
	for range e.depth {
		e.free <- &flight{eventless: make(map[string]uint64), eventlessRuns: make(map[string]uint64)}
	}
	e.pub = &view{s: s}
	e.work = s.Clone()
	ch := make(chan struct{})
	e.changed.Store(&ch)
	go e.publishLoop()
	go e.run()
	e.wg.Add(1)
	go e.stopWithLog()
	if o.Config != nil {
		r, err := e.Submit(context.Background(),
			Request{Actor: events.Actor{Role: events.RoleEngine}, Command: &Configure{Config: *o.Config}})
		if err == nil && r.Rejected != nil {
			err = r.Rejected
		}
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("commands: put config in force: %w", err)
		}
	}
	if o.ExpiryInterval > 0 {
		e.wg.Add(1)
		go e.clock()
	}
	e.maybeSaveViews() // the runs the rebuild made cold
	if info.Indexed > 0 && o.SnapshotEvery >= 0 && e.snapping.CompareAndSwap(false, true) {
		// The snapshot read listed the cold runs whose summaries are now
		// in the index: a new one, without them, so that the next start
		// does not decode them again.
		e.saveInBackground()
	}
	return e, nil
}

// Stats counts the engine's work since Open.
type Stats struct {
	Groups   uint64 // committed groups (one synced append each)
	Commands uint64 // commands answered, replays of recorded outcomes included
	Events   uint64 // events appended
	// Sizes counts the committed groups by their number of commands n:
	// Sizes[bits.Len(n)], so Sizes[0] holds the groups of none, Sizes[1]
	// of 1, Sizes[2] of 2–3, Sizes[k] of 2^(k-1) to 2^k-1, and the last
	// class every larger group.
	Sizes [GroupSizeClasses]uint64
	// Appending is the time from each group's hand-off to the log to its
	// being durable, summed over the groups (GroupReport.Append's); Staging
	// the part of it the writer spent handing the groups over (encoding
	// their records and applying them to the store's memtable), during
	// which it decides nothing. Appending/Groups is a group's mean; the
	// rest of it is the sync, and the wait for the goroutines that make and
	// report it to run.
	Appending, Staging time.Duration
}

// GroupSizeClasses is how many size classes Stats.Sizes has: groups of up
// to 1023 commands in the classes by power of two, every group of 1024 or
// more (up to a MaxGroup above that) in the last.
const GroupSizeClasses = 12

// groupSizeClass is the class of Stats.Sizes a group of n commands counts in.
func groupSizeClass(n int) int {
	return min(bits.Len(uint(n)), GroupSizeClasses-1)
}

// Stats returns the counters; Commands/Groups is the mean group size.
func (e *Engine) Stats() Stats {
	s := Stats{Groups: e.stats.groups.Load(), Commands: e.stats.commands.Load(), Events: e.stats.events.Load(),
		Appending: time.Duration(e.stats.appending.Load()), Staging: time.Duration(e.stats.staging.Load())}
	for i := range s.Sizes {
		s.Sizes[i] = e.stats.sizes[i].Load()
	}
	return s
}

// PipelineDepth is how many groups the engine may hand to the log before
// the first of them is durable (pipeline.go): 2, or 1 with a Committer that
// cannot stage. One WAL sync may make that many groups durable together; an
// EarlyStager that stages early has that many in its hands at once.
func (e *Engine) PipelineDepth() int { return e.depth }

// LoadInfo tells how the state was rebuilt at Open.
func (e *Engine) LoadInfo() projections.LoadInfo { return e.loadInfo }

// Submit queues a request and waits for its answer. The answer comes only
// after the command's events are durable and visible to Read. If ctx ends
// first, Submit returns ctx.Err() and the command may still be decided: retry
// with the same CommandID to learn its outcome.
func (e *Engine) Submit(ctx context.Context, r Request) (Reply, error) {
	if r.Command == nil {
		return Reply{}, fmt.Errorf("commands: request without a command")
	}
	if err := e.failure(); err != nil {
		return Reply{}, err
	}
	if fw := e.opts.Forwarder; fw != nil {
		if r.Refused != nil {
			if w, ok := fw.(WriterForwarder); !ok || !w.Writer() {
				return e.recordedOrRefused(r)
			}
		} else if rep, handled, err := fw.Forward(ctx, r); handled {
			return rep, err
		}
	}
	p, err := e.prepare(r)
	if err != nil {
		return Reply{}, err
	}
	p.caller = r.Actor.Role != events.RoleEngine
	if err := e.enqueue(ctx, p); err != nil {
		return Reply{}, err
	}
	return e.wait(ctx, p)
}

// SubmitAll queues rs in order, one after another with nothing of the
// caller's in between, and waits for every answer: the writer decides them
// in that order, usually in one group (one synced append), so a batch of
// dependent commands (an import's records) costs one commit, not one each.
// The answers are in the order of rs. A request refused before it is
// queued (a disk below its minimum, a failed engine) refuses the batch,
// none of it sent; one that cannot be queued (a closed engine, ctx ended)
// ends it: the requests before it are answered, the rest are not sent. With a
// Forwarder (a node of a cluster, its writer too) the requests are submitted
// one after the other, each answered before the next is sent, so the order
// holds.
func (e *Engine) SubmitAll(ctx context.Context, rs []Request) ([]Reply, error) {
	if e.opts.Forwarder != nil {
		out := make([]Reply, 0, len(rs))
		for _, r := range rs {
			rep, err := e.Submit(ctx, r)
			if err != nil {
				return out, err
			}
			out = append(out, rep)
		}
		return out, nil
	}
	// NB: every request is prepared before the first is queued, so that what prepare refuses (a disk below its
	// minimum, a failed engine) refuses the batch before any of it is decided, rather than after its first requests
	// were recorded under an answer that says the batch failed.
	prepared := make([]*pending, len(rs))
	for i, r := range rs {
		p, err := e.prepare(r)
		if err != nil {
			return nil, err
		}
		p.caller = i == len(rs)-1 && r.Actor.Role != events.RoleEngine
		prepared[i] = p
	}
	ps := make([]*pending, 0, len(rs))
	var qerr error
	for _, p := range prepared {
		if err := e.enqueue(ctx, p); err != nil {
			qerr = err
			break
		}
		ps = append(ps, p)
	}
	out := make([]Reply, len(ps))
	for i, p := range ps {
		r, err := e.wait(ctx, p)
		if err != nil {
			return out[:i], err
		}
		out[i] = r
	}
	return out, qerr
}

// CheckSpace is ErrNoSpace (wrapping the guard's reason) while Options.Space says the disk is below its minimum,
// else nil: checked before a command is decided, here or, on a node that forwards it, before it is sent.
func (e *Engine) CheckSpace() error {
	if e.opts.Space == nil {
		return nil
	}
	if err := e.opts.Space.CheckSpace(); err != nil {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return nil
}

// CheckSpaceFor is CheckSpace for a write of size bytes to the store's disk: ErrNoSpace unless Options.Space has room
// for it above its minimum (SpaceForGuard), or, a guard that cannot say, while the disk is below its minimum. Asked
// before a write the engine makes (a snapshot) or one made beside the log (a checkpoint of the store on its disk).
func (e *Engine) CheckSpaceFor(size uint64) error {
	g, ok := e.opts.Space.(SpaceForGuard)
	if !ok {
		return e.CheckSpace()
	}
	if err := g.CheckSpaceFor(size); err != nil {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return nil
}

// prepare checks r and computes what the writer needs of it.
func (e *Engine) prepare(r Request) (*pending, error) {
	if r.Command == nil {
		return nil, fmt.Errorf("commands: request without a command")
	}
	if err := e.failure(); err != nil {
		return nil, err
	}
	if err := e.CheckSpace(); err != nil {
		return nil, err
	}
	p := &pending{req: r, done: make(chan struct{})}
	if r.CommandID != "" {
		// NB: the slot is built in one allocation and the principal's key
		// is a slice of it: prepare runs for every command.
		var stack [160]byte
		key := r.Principal.AppendKey(stack[:0])
		if len(key) == 0 {
			return nil, fmt.Errorf("commands: %s: a command id needs a principal", r.Command.Kind())
		}
		if err := fingerprintInto(&p.fpBuf, r.Command); err != nil {
			return nil, err
		}
		p.fp = p.fpBuf[:]
		cutFP, err := cutFingerprint(r.Command)
		if err != nil {
			return nil, err
		}
		p.cutFP = cutFP
		var slot [160]byte
		b := binary.AppendUvarint(slot[:0], uint64(len(key)))
		at := len(b)
		p.slot = string(append(append(b, key...), r.CommandID...))
		p.principal = p.slot[at : at+len(key)]
	}
	return p, nil
}

// enqueue hands p to the writer.
func (e *Engine) enqueue(ctx context.Context, p *pending) error {
	select {
	case e.in <- p:
	case <-e.quit:
		return ErrClosed
	case <-e.stuck:
		return e.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
	if h := e.opts.hooks; h != nil && h.queued != nil {
		h.queued()
	}
	return nil
}

// wait waits for the writer's answer to p.
func (e *Engine) wait(ctx context.Context, p *pending) (Reply, error) {
	select {
	case <-p.done:
		return p.reply, p.err
	case <-e.done:
		// The writer stopped; it may have answered p just before.
		select {
		case <-p.done:
			return p.reply, p.err
		default:
			return Reply{}, ErrClosed
		}
	case <-e.stuck:
		// NB: the writer is held inside the log for good (stopWithLog) and answers nothing more: p's outcome is
		// unknown, as after a failed sync, and a retry with its command id after the restart learns it.
		select {
		case <-p.done:
			return p.reply, p.err
		default:
			return Reply{}, e.failure()
		}
	case <-ctx.Done():
		return Reply{}, ctx.Err()
	}
}

// QueueCap is how many requests the engine's queue holds before Submit waits for room: four groups' worth
// (Options.MaxGroup).
func (e *Engine) QueueCap() int { return cap(e.in) }

// Head is the last durable position the published state reflects.
func (e *Engine) Head() uint64 {
	var pos uint64
	e.Read(func(s *projections.State) { pos = s.Position })
	return pos
}

// Changed returns a channel that is closed at the next publish: a cheap way
// for followers (subscriptions) to wait for new durable events.
func (e *Engine) Changed() <-chan struct{} { return *e.changed.Load() }

// Close stops the writer after the group in progress and waits for the
// background goroutines. Requests still queued are answered ErrClosed. A
// snapshot that came due and was not taken (one was in flight) is saved
// before it returns (snapshotAtClose).
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		close(e.quit)
		<-e.done
		e.wg.Wait()
		e.snapshotAtClose()
	})
	return nil
}

// Failed returns a channel that is closed when a commit error has made the
// engine fail stop; Err then tells why. Reads keep working; every Submit
// answers ErrFailed. A daemon exits on it, so its supervisor restarts it.
func (e *Engine) Failed() <-chan struct{} { return e.stopped }

// Err returns the failure that stopped the engine (wrapping ErrFailed), or
// nil while it runs.
func (e *Engine) Err() error { return e.failure() }

// Cause is the error that made the engine fail stop, with its chain (the Committer's natslog.ErrFenced, say), or nil.
// NB: Err wraps ErrFailed alone, its cause in its text: a forwarded answer travels with the cause of its error
// (forward.go), and a commit error's chain may hold one that says nothing was decided (ErrNotWriter) where the groups
// that failed may be durable. Cause is for telling failures apart where nothing is decided on it: crewd's log line.
func (e *Engine) Cause() error {
	if p := e.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (e *Engine) failure() error {
	if p := e.failed.Load(); p != nil {
		return fmt.Errorf("%w: %v", ErrFailed, *p)
	}
	return nil
}

// run is the single writer.
func (e *Engine) run() {
	defer func() {
		// The groups in flight are landed before Close or a waiter learns
		// that the writer stopped.
		close(e.flights)
		<-e.landed
		close(e.done)
	}()
	// An idle writer still makes runs cold once their retention passed.
	var idle <-chan time.Time
	if e.opts.ExpiryInterval > 0 {
		t := time.NewTicker(evictPassEvery)
		defer t.Stop()
		idle = t.C
	}
	for {
		select {
		case <-e.quit:
			e.drain(ErrClosed)
			return
		case <-e.stopped: // the publisher failed
			e.failStop(nil)
			return
		case <-e.log.Failed():
			// NB: a write the writer did not make (a view, a summary) failed the log stop: the writer stops now,
			// not at its next append, so that crewd stops reporting itself ready and restarts.
			e.failStop(e.logFailure())
			return
		case <-idle:
			e.evictIfDue(e.times.now())
		case c := <-e.sync:
			err := e.catchUp()
			c <- err
			if err != nil {
				e.failStop(err)
				return
			}
		case p := <-e.in:
			// NB: the flight is taken after the first request, so that
			// what queues while the pipeline is full joins this group.
			f := e.acquire()
			f.started = time.Now()
			quit, err := e.fill(f, p)
			if err == nil {
				err = e.handOff(f)
			}
			if err != nil {
				// NB: the publisher answers the group with the failure, after the groups before it, as it
				// answers every group in flight, and tells the observer of it.
				e.fail(err)
				e.flights <- f
				e.failStop(nil)
				return
			}
			e.handedOff(f)
			if e.evictDue(e.lastNow) {
				e.evictWith(f, e.lastNow)
			}
			e.flights <- f
			if quit {
				e.drain(ErrClosed)
				return
			}
		}
	}
}

// fill decides p and what else is queued into f, and keeps f open —
// deciding every request as it arrives — while a group handed off before
// it waits for its sync: the group then holds what arrived during that
// sync, as a writer that waits for each sync would have taken it, and its
// decisions overlap the sync. Once the sync has returned it may keep f
// open a little longer, the linger (pipeline.go), for the callers that
// group answers to come back. It returns once nothing is syncing and the
// linger, if any, is over, or the group is full (and then waits for the
// sync), or at Close (quit).
func (e *Engine) fill(f *flight, p *pending) (quit bool, err error) {
	add := func(p *pending) error {
		from := len(f.group)
		f.group = append(f.group, p)
	more:
		for len(f.group) < e.opts.MaxGroup {
			select {
			case p := <-e.in:
				f.group = append(f.group, p)
			default:
				break more
			}
		}
		if !e.mayLinger {
			return e.decide(f, from)
		}
		began := time.Now()
		err := e.decide(f, from)
		e.openDecide += time.Since(began)
		return err
	}
	if err := add(p); err != nil {
		return false, err
	}
	var lingering <-chan time.Time // until the linger ends, once the sync returned
	for e.unsynced > 0 || lingering != nil && len(f.group) < e.handedCallers {
		in := e.in
		if len(f.group) >= e.opts.MaxGroup {
			in = nil // full: wait for the sync only
		}
		select {
		case at := <-e.synced:
			e.unsynced--
			if e.unsynced == 0 {
				lingering = e.linger(f, at)
			}
		case <-lingering:
			lingering = nil
		case p := <-in:
			if err := add(p); err != nil {
				return false, err
			}
		case <-e.stopped:
			return false, e.failure()
		case <-e.quit:
			return true, nil
		}
	}
	return false, nil
}

// failStop records err (nil: the failure recorded already) as the
// engine's failure, and then answers whatever still arrives until Close.
// The publisher answers the groups in flight.
func (e *Engine) failStop(err error) {
	if err != nil {
		e.fail(err)
	}
	ferr := e.failure()
	for {
		select {
		case p := <-e.in:
			p.err = ferr
			close(p.done)
		case c := <-e.sync:
			c <- ferr
		case <-e.quit:
			return
		}
	}
}

// drain answers every queued request with err.
func (e *Engine) drain(err error) {
	for {
		select {
		case p := <-e.in:
			p.err = err
			close(p.done)
		default:
			return
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
