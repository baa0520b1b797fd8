package commands

import (
	"context"

	"github.com/crewlog/crewlog/eventlog"
)

// Committer makes a decided group durable: the seam between the single
// writer and the log it commits to. The engine calls it once per group,
// from its writer goroutine, with the group's writes in order.
//
// Commit must behave as eventlog.Log.Append on the engine's own log: on
// success the writes are durable, appended to that log (so Outcome, Read
// and Head see them), with positions, stream versions and hashes assigned
// in place, and it returns the first position. An error means the group is
// not known to be durable: the engine fails stop.
//
// The default is the engine's log itself. A replicated backend commits the
// group to its replicated log first and then appends it to the engine's
// log, which stays every node's materialised copy (see DESIGN.md).
type Committer interface {
	Commit(ws []eventlog.Write) (first uint64, err error)
}

// Forwarder sends a request to the engine that may decide it, when this
// one may not (a follower in a cluster). Forward reports handled=false
// when this engine is the one to decide; otherwise the answer (or error)
// is the other engine's.
type Forwarder interface {
	Forward(ctx context.Context, r Request) (reply Reply, handled bool, err error)
}

// WriterForwarder is a Forwarder that says whether its engine is the one to decide now (a cluster's node). A request
// its caller refused (Request.Refused) is never forwarded, since the refusal does not travel with it: an engine with
// a Forwarder answers it from its own log's outcome of the request's id (a follower's copy). While Writer reports
// true the engine decides it instead, as one crewd does (the groups in flight, a credential that ended, the barrier
// of a group that appends nothing: HeadConfirmer). NB: the writer's log alone would answer a retry whose first
// attempt is still in flight with the refusal, and a writer deposed without knowing it would answer from a state
// behind the new writer's.
type WriterForwarder interface {
	Forwarder
	Writer() bool
}

// StagingCommitter is a Committer that commits a group in two steps, so
// that the writer decides the next group while this one syncs (the
// pipeline, pipeline.go). Stage hands the group to the log and returns
// without waiting for durability: positions, stream versions and hashes
// are assigned in place, in the order of the Stage calls, and a group
// staged later is durable only if every group staged before it is. Wait
// returns once the group is durable and visible to the log's readers, with
// its first position. The engine calls Wait exactly once per successful
// Stage, in Stage order, from another goroutine than the writer. An error
// from either means the group is not known to be durable: the engine fails
// stop.
//
// The engine's own log is one (eventlog.Log.Stage), and so is the
// replicated backend (commands/cluster, natslog.Log.Stage). A Committer
// that is not one is committed one group at a time: the writer decides the
// next group only once the last one is published, as without a pipeline.
type StagingCommitter interface {
	Committer
	Stage(ws []eventlog.Write) (StagedCommit, error)
}

// EarlyStager is a StagingCommitter to which the writer hands each group
// as soon as it is decided, while the group before still awaits its Wait,
// instead of keeping the group open until that Wait returned (pipeline.go).
// That suits a log whose commit is a round trip to replicas, which carry
// the next group in the same replication pipeline, rather than one fsync
// that the next group joins anyway (the JetStream log: a group published
// while the one before is replicated is not delayed by it). The ordering
// and failure rules of StagingCommitter are unchanged.
type EarlyStager interface {
	StagingCommitter
	// StagesEarly reports whether groups are handed off early.
	StagesEarly() bool
}

// LongSyncer is a StagingCommitter whose sync is long beside the writer's
// decisions (a round trip to replicas, each with its WAL fsync, that costs
// nearly as much for one command as for a full group). When SyncsLong
// reports so, the writer keeps a nearly empty group open after the sync
// before it returned, for the callers that sync answers (the linger,
// pipeline.go). The engine's own log does not: its fsync is short, and the
// writer's decisions overlapping it are worth more than larger groups.
type LongSyncer interface {
	StagingCommitter
	SyncsLong() bool
}

// WriteChecker is a Committer whose log cannot take some writes the
// engine's own log takes (the JetStream log: an event larger than one of
// its messages). The engine asks it about each command's write before
// applying the command, and refuses a write it refuses (bad-params), as
// it refuses an event its own log would: the group's commit would fail,
// and the engine with it.
type WriteChecker interface {
	CheckWrite(w *eventlog.Write) error
}

// HeadConfirmer is a Committer whose log another writer may append to while this one still decides (a replicated
// log whose writer lost its lease and has not learnt it yet). A group that appends is fenced by the log; one that
// appends nothing (refusals, no-ops, recorded outcomes answered again) is not, and its answers, decided on this
// writer's state, would be behind the other writer's. So the publisher asks ConfirmHead once per such group, after
// the groups before it are published and before it answers any of its commands; an error fails the engine stop and
// answers the group with it, as a fenced commit does (pipeline.go). ConfirmHead returns nil once the log held nothing
// this writer has not applied at a moment after it was called.
type HeadConfirmer interface {
	ConfirmHead() error
}

// StagedCommit is a group handed to the log by StagingCommitter.Stage.
type StagedCommit interface {
	Wait() (first uint64, err error)
}

// logCommitter is the default Committer: the engine's own log.
type logCommitter struct{ l *eventlog.Log }

func (c logCommitter) Commit(ws []eventlog.Write) (uint64, error) { return c.l.Append(ws...) }

func (c logCommitter) Stage(ws []eventlog.Write) (StagedCommit, error) {
	s, err := c.l.Stage(ws...)
	if err != nil {
		return nil, err // NB: not a nil *Staged in a non-nil interface
	}
	return s, nil
}

// syncStager stages a group on a Committer that cannot split its commit:
// Stage commits it whole, so it is durable before the writer goes on.
type syncStager struct{ c Committer }

func (s syncStager) Stage(ws []eventlog.Write) (StagedCommit, error) {
	first, err := s.c.Commit(ws)
	if err != nil {
		return nil, err
	}
	return committed{first: first}, nil
}

// stager hands a group to the log (StagingCommitter without Commit).
type stager interface {
	Stage(ws []eventlog.Write) (StagedCommit, error)
}

// committed is a group whose commit was already waited for: its Wait
// returns that result at once.
type committed struct {
	first uint64
	err   error
}

func (c committed) Wait() (uint64, error) { return c.first, c.err }

// stagerFor returns how the engine stages its groups with Committer c (nil:
// the engine's log l), how many groups may be in flight at once, whether a
// group is handed off before the one before it synced, and whether the
// writer may linger (a LongSyncer that stages, and not early: pipeline.go).
func stagerFor(c Committer, l *eventlog.Log) (s stager, depth int, early, long bool) {
	if ls, ok := c.(LongSyncer); ok {
		long = ls.SyncsLong()
	}
	switch c := c.(type) {
	case nil:
		return logCommitter{l}, pipelineDepth, false, false
	case EarlyStager:
		early = c.StagesEarly()
		return c, pipelineDepth, early, long && !early
	case StagingCommitter:
		return c, pipelineDepth, false, long
	default:
		return syncStager{c}, 1, false, false
	}
}
