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

// logCommitter is the default Committer: the engine's own log.
type logCommitter struct{ l *eventlog.Log }

func (c logCommitter) Commit(ws []eventlog.Write) (uint64, error) { return c.l.Append(ws...) }

// committer returns the Committer in force.
func (e *Engine) committer() Committer {
	if e.opts.Committer != nil {
		return e.opts.Committer
	}
	return logCommitter{e.log}
}
