package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// docBound is a number a page of docs/ gives, in the page's words, and the code's.
type docBound struct {
	says      string // the page's words
	code, doc any    // the code's number, and the page's in the code's unit
}

// requireDocStates requires each bound's words in docs/page (its lines joined) and the page's number equal to the
// code's, so that the page and the code cannot drift apart unnoticed.
func requireDocStates(t *testing.T, page string, bounds []docBound) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", page))
	require.NoError(t, err)
	text := strings.Join(strings.Fields(string(doc)), " ")
	for _, b := range bounds {
		require.True(t, strings.Contains(text, b.says), "docs/%s says %q", page, b.says)
		require.EqualValues(t, b.doc, b.code, "docs/%s says %q", page, b.says)
	}
}

// TestReliabilityDocStatesCrewdsBounds: the numbers docs/reliability.md gives for crewd's failures — how long an
// engine that failed stop answers reads, how long crewd then waits for its store to close, how often the space guard
// reads the disk, and how docs/crewd.service restarts a crewd that exited non-zero — are the code's and the unit's.
// The tests of their behaviour set their own bounds (or cannot wait 10 s), so the numbers could change alone.
func TestReliabilityDocStatesCrewdsBounds(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "crewd.service")
	unit, limits := readUnitSection(t, path, "[Service]"), readUnitSection(t, path, "[Unit]")
	requireDocStates(t, "reliability.md", []docBound{
		{"`internal` to everything after, reads for 2 s), and crewd exits 1", failDrain, 2 * time.Second},
		{"waits at most 10 s for the engine and the store to close", failedStoreClose, 10 * time.Second},
		{"the space guard sees it at its next reading (at most every 100 ms)", spaceCheckInterval, 100 * time.Millisecond},
		{"which the supervisor restarts all the same (`Restart=on-failure`)", unit["Restart"], "on-failure"},
		{"docs/crewd.service restarts it after 5 s", unit["RestartSec"], "5s"},
		{"gives up after 10 failed starts in 10 minutes", limits["StartLimitBurst"], "10"},
		{"gives up after 10 failed starts in 10 minutes", limits["StartLimitIntervalSec"], "600"},
	})
}
