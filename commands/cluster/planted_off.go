//go:build !crewlog_plantedfollower

package cluster

import "github.com/crewlog/crewlog/commands"

// answerBeforeCopied is false in every real build: a follower answers a
// forwarded command once its own copy holds the command's events.
// planted_on.go turns it on for the linearizability checker's self-test only.
const answerBeforeCopied = false

func delegation(commands.Request) bool { return false }
