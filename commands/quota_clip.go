package commands

import (
	"fmt"
	"unicode/utf8"

	"github.com/crewlog/crewlog/projections"
)

// ClipStatusBytes is how much of each status text a wind-down keeps once
// its decision would take its run past its bytes quota: a line saying what
// happened, cut at a char boundary.
//
// A wind-down is never refused by a quota (quota.go), and it may carry
// MaxStatusTextChars of text in each of its fields. Each one is bounded by
// what the run holds (a task ends once per round, and the measured step
// that brings it round again is refused past the quota), but a run holds as
// many tasks as its quotas let it create, a dozen bytes each: ending every
// one of them with the longest texts took a run thousands of times past its
// bytes quota, onto the disk every run shares. Past the quota each text
// keeps at most ClipStatusBytes and a mark of what was cut, so a wind-down
// then adds its ids and at most that much per field.
const ClipStatusBytes = 256

// statusTexter is a wind-down that carries a caller's status text: a run's
// summary and reason, a task's error, reason and execution cwd, a
// delegation's cancel reason.
type statusTexter interface {
	Command
	// clippedTo is a copy of the command whose status texts longer than n
	// bytes are cut and marked (clipTexts), or nil when none is.
	clippedTo(n int) Command
}

// clipPastQuota re-decides a wind-down whose decision would take its run
// past the bytes quota, with its status texts clipped to ClipStatusBytes.
// It is never refused for that: clipped or not, the run can finish. A
// measured command is left to withQuota, which refuses it past the quota.
func clipPastQuota(s *projections.State, cmd Command, env *Env, d Decision, err error) (Decision, error) {
	c, ok := cmd.(statusTexter)
	if !ok || err != nil || len(d.Events) == 0 || env.Config.QuotaBytes <= 0 || measured(s, cmd, d, err) {
		return d, err
	}
	runID := d.Events[0].Stream
	run, ok := s.Run(runID)
	if !ok || !pastBytesQuota(run.Usage, growthOf(runID, d.Events), env) {
		return d, err
	}
	short := c.clippedTo(ClipStatusBytes)
	if short == nil {
		return d, err
	}
	d, err = short.decide(s, env)
	d.Events = endWorkerLeases(s, env, d.Events)
	return d, err
}

// clipTexts cuts each text longer than n bytes to its longest prefix of
// at most n bytes that ends at a char boundary, followed by a mark of
// what was cut, and reports whether any was. A text the mark would not
// make shorter is left as it is.
func clipTexts(n int, texts ...*string) bool {
	clipped := false
	for _, text := range texts {
		if len(*text) <= n {
			continue
		}
		cut := n
		for cut > 0 && !utf8.RuneStart((*text)[cut]) {
			cut--
		}
		short := fmt.Sprintf("%s… [clipped: %d chars sent; the run's bytes quota is spent]",
			(*text)[:cut], utf8.RuneCountInString(*text))
		if len(short) < len(*text) {
			*text, clipped = short, true
		}
	}
	return clipped
}
