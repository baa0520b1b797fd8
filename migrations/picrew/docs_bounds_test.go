package picrew

import (
	"fmt"
	"math/bits"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// TestPicrewDocStatesTheBounds: the numbers docs/picrew.md gives for the import and the follower, each made here
// from the constant the code enforces (their tests hold the code to the constants), are in the page, so the page and
// the code cannot drift apart unnoticed: each test of a bound reads its constant, and held whatever value it had.
func TestPicrewDocStatesTheBounds(t *testing.T) {
	doc, err := os.ReadFile("../../docs/picrew.md")
	require.NoError(t, err)
	page := strings.Join(strings.Fields(string(doc)), " ")
	mib := func(n int) string { return fmt.Sprintf("%d MiB", n>>20) }
	// The page writes a count of thousands with a comma (2,048), and two numbers in words: the passes between two
	// looks at a dormant run, held to its constant here, and the default checkpoint interval, ten seconds, which
	// TestFollowCheckpointsAtTheDefaultInterval holds the follower to.
	count := func(n int) string {
		if n >= 1000 {
			return fmt.Sprintf("%d,%03d", n/1000, n%1000)
		}
		return fmt.Sprint(n)
	}
	require.Equal(t, 10, dormantEvery, "the page says ten passes")
	for _, says := range []string{
		fmt.Sprintf("it is cut at %s bytes", count(maxReason)),
		fmt.Sprintf("A file is reported at most %d times in one pass", maxReportsPerFile),
		fmt.Sprintf("it keeps the last %s it made or met again at least, %s at most", count(maxReported/2),
			count(maxReported)),
		fmt.Sprintf("per line (%s, `maxLine`)", mib(maxLine)),
		fmt.Sprintf("per whole file (%s)", mib(maxWholeFile)),
		fmt.Sprintf("per count of files (%s of each kind", count(maxRunFiles)),
		fmt.Sprintf("reads at most %s of a file a pass and holds at most %s writes, or %s of lines, of a run waiting "+
			"for crewd", mib(maxTailRead), count(maxPending), mib(maxPendingBytes)),
		fmt.Sprintf("at most %d of them a run (each holds one of the user's inotify watches)", maxTaskWatches),
		fmt.Sprintf("the first %d of each kind of directory", maxStrayReports),
		"such a run is looked at every ten passes",
		"at most one every ten seconds per file",
		fmt.Sprintf("and %s of them (pi-crew's own bound) are kept", count(maxDeliveryStates)),
		fmt.Sprintf("`import.append` takes at most %d writes of at most %d events each per call (the follower sends "+
			"%d, and at most half the frame cap in bytes", broker.MaxImportWrites, commands.MaxImportEvents, sendBatch),
		fmt.Sprintf("the default %d KiB for `crewctl import picrew --follow`", 2*DefaultMaxBatchBytes>>10),
		fmt.Sprintf("taken as absent (pi-crew's default, %d s)", defaultTimeoutSec),
		// The bounds of what a file may record, shared with crewlog's own commands.
		fmt.Sprintf("a delegation's `timeoutSec` above %s", count(events.MaxTimeoutSec)),
		fmt.Sprintf("more than %s s after the time it is recorded at", count(events.MaxAskTimeoutSec)),
		fmt.Sprintf("`budgetTotal` outside 0..2^%d", bits.Len64(uint64(events.MaxBudgetTotal))-1),
		fmt.Sprintf("outside 0..%d (crewlog's own `task.create` refuses it", events.MaxDepth),
		fmt.Sprintf("above 2^%d (the bound of a usage counter)", bits.Len64(uint64(events.MaxUsageTokens))-1),
		fmt.Sprintf("listing more than %s tasks, or an id that is not 1..%d chars", count(events.MaxDependsOn),
			events.MaxIDChars),
		fmt.Sprintf("(none, or more than %d chars)", events.MaxQuestionIDChars),
	} {
		require.True(t, strings.Contains(page, says), "docs/picrew.md says %q", says)
	}
}
