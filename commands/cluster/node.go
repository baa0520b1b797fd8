package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/projections"
)

// Errors of a node.
var (
	// ErrNotWriter is returned by the node's Committer when a group reaches
	// it while the node is not the writer (it lost the lease during the
	// group): the engine fails stop, and so does the node. A node that is
	// not the writer answers a forwarded request with it too, before
	// deciding anything (commands.ErrNotWriter).
	ErrNotWriter = commands.ErrNotWriter
	// ErrNoWriter is returned to a forwarded request when no writer
	// answered before its context ended.
	ErrNoWriter error = unavailable("cluster: no writer answered; retry with the same command id")
	// ErrStopped is returned to a forwarded request whose answer came
	// while this crewd was failing: the command may be committed; retry
	// with the same command id on another crewd to learn its outcome. A
	// request submitted once the node failed is answered it too, and sent
	// nowhere.
	ErrStopped error = unavailable("cluster: this crewd stopped; retry with the same command id")
	// ErrPromoteStalled is why a node that took the lease failed when its
	// promotion made no progress for the stall bound (promoteStallFor): it
	// gives the lease up.
	ErrPromoteStalled = errors.New("cluster: promotion made no progress; giving the lease up")
	// ErrLeaseNotRenewed is why a writer failed whose renewals of the lease
	// went unanswered for three quarters of its TTL (keepLease): another
	// node may take it soon, and this one stops first.
	ErrLeaseNotRenewed = errors.New("cluster: the writer lease was not renewed in time")
)

// unavailable is an error of a forwarded request whose outcome this node
// did not learn: it is commands.ErrUnavailable too, which the broker
// answers with a code that says to retry with the same command id.
type unavailable string

func (e unavailable) Error() string { return string(e) }

func (unavailable) Is(target error) bool { return target == commands.ErrUnavailable }

// Options configure a Node.
type Options struct {
	// Name is this crewd's name in the cluster, unique (the lease holder).
	Name string
	// Conn is the NATS connection (the node does not own it).
	Conn *nats.Conn
	// Log names the stream and its replication.
	Log natslog.Config
	// LeaseTTL is how long the writer lease outlives its last renewal
	// (default 2 s): a dead writer is replaced after about that long. It
	// is renewed every LeaseTTL/4. Every node of a log must have the same:
	// Start refuses one whose TTL is not the lease bucket's
	// (natslog.ErrLeaseTTL).
	LeaseTTL time.Duration
	// Engine are the engine's options; the node sets Committer, Forwarder
	// and ExpiryInterval (the node ticks the clock while it writes), and
	// puts Config in force whenever it becomes the writer.
	Engine commands.Options
	// ExpiryInterval is the engine clock's tick while writing (default 1 s).
	ExpiryInterval time.Duration
	// ForwardTimeout bounds one forwarded request when the caller's context
	// has no deadline (default 15 s: a failover and then some).
	ForwardTimeout time.Duration
	// EarlyStaging makes the writer publish each group as soon as it has
	// decided it, while the group before is replicated
	// (commands.EarlyStager), instead of once that group is acknowledged;
	// either way the writer decides a group while the one before is in
	// flight (commands.StagingCommitter). Early, two batches ride the
	// stream's Raft pipeline at once, which shortens a group's wait where
	// the NATS servers have cores of their own; but groups hold half as
	// many commands, so where the servers share the writer's cores (one
	// machine, a benchmark) it costs CPU per command and gains nothing
	// (docs/benchmarks.md). Off by default.
	EarlyStaging bool
	Logger       *slog.Logger

	// beforePromote, set by tests, runs when the node holds the lease and
	// before it copies the stream to become the writer; ctx ends when the
	// promotion is given up (promoteStall).
	beforePromote func(ctx context.Context)
	// promoteStall, set by tests, replaces promoteStallFor's bound.
	promoteStall time.Duration
	// duringPromotionFold, set by tests, runs while a promoting node folds what it copied, before its engine's fold;
	// ctx ends when the promotion is given up. A test that blocks in it makes the fold as long as a large backlog's.
	duringPromotionFold func(ctx context.Context)
	// beforeRenew, set by tests, runs before each renewal of the lease the node holds; ctx ends when the node
	// stops. A test that blocks in it holds the renewals back, as a paused machine would: the lease expires, and
	// another node may take it while this one still writes.
	beforeRenew func(ctx context.Context)
	// beforeFold, set by tests, runs while the node follows, each time it
	// has copied groups and before its engine folds them; ctx ends when the
	// node stops following. A test that blocks in it holds the follower's
	// state (what its broker checks a credential against) behind the stream.
	beforeFold func(ctx context.Context)
	// beforeCopyWait, set by tests, runs when the answer to a forwarded request waits for this node's copy to hold
	// position pos (waitCopied), once, before it waits: a test then knows the answer is in hand and held back.
	beforeCopyWait func(pos uint64)
	// unreceived, set by tests, runs when an attempt of a forwarded request found no node serving the commands subject
	// (no responders), before the request is sent again: a test then knows the follower waits for a writer.
	unreceived func()
	// attemptTimeout, set by tests, replaces the bound of one attempt of a forwarded request that may be sent again
	// (defaultAttemptTimeout).
	attemptTimeout time.Duration
	// warnEvery, set by tests, replaces defaultWarnEvery, the bound of the warnings about what peers send
	// (warnBound).
	warnEvery time.Duration
	// beforeSubmit, set by tests, runs when the writer has taken a forwarded request and before its engine decides
	// it; ctx ends when the node stops. A test that blocks in it holds the writer's forwarded requests in flight.
	beforeSubmit func(ctx context.Context)
}

// Node is one crewd of a cluster sharing one JetStream stream (doc.go).
//
// Concurrency: all methods are safe for concurrent use. Errors: a node
// that must not go on (fenced, lease lost while writing, a copy error)
// closes Failed; its owner closes it and starts a new one on the same
// local log, as a supervisor restarts a crewd.
type Node struct {
	o      Options
	local  *eventlog.Log
	js     jetstream.JetStream
	jl     *natslog.Log
	lease  *natslog.Lease
	eng    *commands.Engine
	config *projections.Config // put in force on becoming the writer
	writer atomic.Bool
	leased atomic.Bool // this node took the lease (it may hold it still)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	failOnce sync.Once
	failed   chan struct{}
	err      atomic.Pointer[error]

	sub         atomic.Pointer[nats.Subscription] // the writer's command subscription
	lostAnswers atomic.Uint64                     // forwarded requests answered no one (lostAnswer)
	peerWarns   *warnBound                        // the warnings about what peers send, bounded
	forwards    *forwardSlots                     // the forwarded requests the writer holds, bounded
	elected     atomic.Int64                      // unix ns when this node became the writer
	electedCh   chan struct{}                     // closed then
}

// Start copies the stream into local (a copy of it, or empty), opens the
// engine on it, and starts following and campaigning.
func Start(ctx context.Context, local *eventlog.Log, o Options) (*Node, error) {
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 2 * time.Second
	}
	if o.ExpiryInterval == 0 {
		o.ExpiryInterval = time.Second
	}
	if o.ForwardTimeout == 0 {
		o.ForwardTimeout = 15 * time.Second
	}
	if o.attemptTimeout == 0 {
		o.attemptTimeout = defaultAttemptTimeout
	}
	if o.warnEvery == 0 {
		o.warnEvery = defaultWarnEvery
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(o.Conn)
	if err != nil {
		return nil, fmt.Errorf("cluster: jetstream: %w", err)
	}
	n := &Node{o: o, local: local, js: js, failed: make(chan struct{}), electedCh: make(chan struct{}),
		peerWarns: newWarnBound(o.warnEvery)}
	// NB: before the copy catches up: what it copies now counts in its runs' tallies too.
	commands.KeepRunTallies(local)
	if n.jl, err = natslog.Open(ctx, js, local, o.Log); err != nil {
		return nil, err
	}
	if _, err := n.jl.CatchUp(ctx); err != nil {
		return nil, err
	}
	if n.lease, err = natslog.OpenLease(ctx, js, o.Log, o.Name, o.LeaseTTL); err != nil {
		return nil, err
	}
	eo := o.Engine
	// NB: the engine config is put in force by whoever becomes the writer
	// (promote), not at Open: a follower's Open would forward it to a
	// writer that may not exist yet, and could not campaign meanwhile.
	if eo.Config != nil {
		if err := commands.ValidateConfig(*eo.Config); err != nil {
			return nil, fmt.Errorf("cluster: engine config: %w", err)
		}
		n.config, eo.Config = eo.Config, nil
	}
	eo.Committer, eo.Forwarder, eo.ExpiryInterval = n, n, -1
	if eo.Logger == nil {
		eo.Logger = o.Logger
	}
	if n.eng, err = commands.Open(local, eo); err != nil {
		return nil, err
	}
	n.forwards = newForwardSlots(n.eng.QueueCap(), maxForwardedBytes)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(2)
	go n.campaign()
	go n.watchEngine()
	return n, nil
}

// Engine is the node's engine: queries, subscriptions and the dashboard
// read it on any node; commands submitted to a follower's are forwarded.
func (n *Node) Engine() *commands.Engine { return n.eng }

// Writer reports whether this node is the writer now. NB: it makes the node a commands.WriterForwarder: its engine
// decides a request its caller refused while it writes, and answers it from its copy while it follows.
func (n *Node) Writer() bool { return n.writer.Load() }

var _ commands.WriterForwarder = (*Node)(nil)

// ElectedAt is when this node last became the writer (zero if never).
func (n *Node) ElectedAt() time.Time {
	if ns := n.elected.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Elected is closed when this node becomes the writer.
func (n *Node) Elected() <-chan struct{} { return n.electedCh }

// Sequence is the stream sequence the node's local copy holds.
func (n *Node) Sequence() uint64 { return n.jl.Sequence() }

// Failed is closed when the node stopped itself; Err says why.
func (n *Node) Failed() <-chan struct{} { return n.failed }

// Err is why the node failed, or nil.
func (n *Node) Err() error {
	if p := n.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (n *Node) fail(err error) {
	n.failOnce.Do(func() {
		n.err.Store(&err)
		n.writer.Store(false)
		n.o.Logger.Error("cluster node stopped; restart it", "node", n.o.Name, "err", err)
		close(n.failed)
		n.cancel()
		n.stopServing()
	})
}

// stopServing ends the writer's command subscription, if it has one: the server sends it no more requests, and the
// requests already delivered to it are answered (ErrNotWriter, once the node failed), not dropped.
//
// NB: at once when the node fails, not at Close: its owner closes it only after answering reads for a while, and a
// failed writer in the commands subject's queue group would meanwhile draw requests from the next writer, each
// answered "not the writer" and sent again.
func (n *Node) stopServing() {
	if sub := n.sub.Load(); sub != nil {
		_ = sub.Drain()
	}
}

// Close stops the node and its engine (not the local log nor the
// connection). A node that took the lease gives it up (if it still holds
// it: the delete expects its last revision), so a successor need not wait
// for it to expire — a writer, or a node that failed while it promoted
// and could not give it up as it failed (giveUpLeaseOnFailure).
func (n *Node) Close() error {
	n.writer.Store(false)
	n.cancel()
	n.wg.Wait()
	// NB: once the campaign ended: a promotion that subscribed meanwhile has stored its subscription by then.
	n.stopServing()
	err := n.eng.Close()
	if n.leased.Load() && !n.o.Conn.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = n.lease.Release(ctx)
		cancel()
	}
	return err
}

// watchEngine fails the node when the engine fails stop (a fenced or
// in-doubt commit).
func (n *Node) watchEngine() {
	defer n.wg.Done()
	select {
	case <-n.eng.Failed():
		n.fail(n.eng.Err())
	case <-n.ctx.Done():
	}
}

// Commit implements commands.Committer: only the writer commits.
func (n *Node) Commit(ws []eventlog.Write) (uint64, error) {
	if !n.writer.Load() {
		return 0, ErrNotWriter
	}
	return n.jl.Commit(ws)
}

// Stage implements commands.StagingCommitter: the writer publishes a group
// while the one before awaits its acknowledgement (natslog.Log.Stage), so
// the engine runs its pipeline on the stream as on its own log.
func (n *Node) Stage(ws []eventlog.Write) (commands.StagedCommit, error) {
	if !n.writer.Load() {
		return nil, ErrNotWriter
	}
	s, err := n.jl.Stage(ws)
	if err != nil {
		return nil, err // NB: not a nil *Staged in a non-nil interface
	}
	return s, nil
}

// ConfirmHead implements commands.HeadConfirmer: a group that appends nothing is answered only once the stream is
// known to end where the writer's copy does (natslog.Log.ConfirmHead) — a writer whose lease another node took, and
// that has not learnt it yet, fails stop instead of answering from a state behind the new writer's.
func (n *Node) ConfirmHead() error {
	if !n.writer.Load() {
		return ErrNotWriter
	}
	return n.jl.ConfirmHead()
}

// CheckWrite implements commands.WriteChecker: a write no batch of the
// stream can carry is refused before it is decided (natslog.Log.CheckWrite).
func (n *Node) CheckWrite(w *eventlog.Write) error { return n.jl.CheckWrite(w) }

// StagesEarly implements commands.EarlyStager (Options.EarlyStaging).
func (n *Node) StagesEarly() bool { return n.o.EarlyStaging }

// SyncsLong implements commands.LongSyncer: a group's sync is a round trip
// to the stream's replicas, each with its WAL fsync, so the writer lingers
// for the callers a sync answers rather than hand the stream a nearly empty
// group.
func (n *Node) SyncsLong() bool { return true }
