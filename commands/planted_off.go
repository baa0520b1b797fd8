//go:build !crewlog_plantedbug

package commands

// answerBeforeCommit is false in every real build: an answer waits for its
// group's sync and publication. planted_on.go turns it on for the
// linearizability checker's self-test only.
const answerBeforeCommit = false

func answerEarly([]*pending) {}
