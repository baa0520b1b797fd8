package daemon

import (
	"errors"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/commands/cluster"
	"github.com/crewlog/crewlog/eventlog/natslog"
)

// failureLine is the line crewd logs when it must exit for its supervisor to restart it, and what its /readyz answers
// meanwhile, worded from why: err, the engine's Err or, in a cluster, the node's, and cause, the error that made the
// engine fail stop, if it did (commands.Engine.Cause).
//
// NB: "the engine stopped after a commit error" was logged for every failure, a cluster node's that lost its lease or
// whose copy diverged too, and sent the operator to the disk of a crewd that had committed nothing amiss.
func failureLine(err, cause error) string {
	const then = "; answering reads, then exiting so a supervisor restarts crewd"
	engine := errors.Is(err, commands.ErrFailed)
	switch {
	case engine && errors.Is(cause, natslog.ErrFenced):
		return "this crewd was no longer the writer: another writer appended to the stream (its commit was fenced)" + then
	case errors.Is(err, natslog.ErrLeaseLost), engine && errors.Is(cause, commands.ErrNotWriter):
		return "this crewd lost the writer lease" + then
	case errors.Is(err, cluster.ErrLeaseNotRenewed):
		return "this crewd could not renew the writer lease in time, and gave it up" + then
	case errors.Is(err, cluster.ErrPromoteStalled):
		return "this crewd took the writer lease but its promotion made no progress, and gave it up" + then
	case errors.Is(err, natslog.ErrDiverged), engine && errors.Is(cause, natslog.ErrDiverged):
		return "this crewd's copy of the stream does not follow the stream (diverged)" + then
	case engine:
		return "the engine stopped after a commit error" + then
	}
	return "this crewd's cluster node stopped" + then
}
