//go:build crewlog_plantedfollower

package cluster

import "github.com/crewlog/crewlog/commands"

// answerBeforeCopied plants a known bug, in test builds tagged
// crewlog_plantedfollower only: a follower answers a forwarded command with
// the writer's reply at once, before its own copy holds the command's events,
// so a client reading on that crewd right after the answer may not see its
// own write. The linearizability checker of integration/ must flag such a
// build (TestJepsenClusterCatchesEarlyFollower).
const answerBeforeCopied = true

// delegation says whether r is an admission or a settlement: the commands
// answered early, as commands/planted_on.go does on the writer.
func delegation(r commands.Request) bool {
	switch r.Command.(type) {
	case *commands.DelegateRequest, *commands.DelegateSettle:
		return true
	}
	return false
}
