package audit_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/events"
)

// TestTimelineReadsWhatReplayGave: Timeline, read up to where a replay stopped, gives the entries the replay gave its
// Timeline option, in order, for every run selection and stop; up to 0 it reads nothing, and an error of its callback
// ends the read and is returned.
func TestTimelineReadsWhatReplayGave(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	head := audittest.Scenario(t, dir)
	l, err := audit.Open(dir)
	require.NoError(t, err)
	defer l.Close()

	at := audittest.Epoch.Add(10 * time.Second)
	for _, c := range []struct {
		run string
		to  uint64
		at  *time.Time
	}{
		{"", 0, nil}, {"", 15, nil}, {audittest.RunUnlimited, 0, nil}, {audittest.RunBudget, 0, &at},
		{"", 0, new(time.Time)},
	} {
		t.Run(fmt.Sprintf("%s to %d at %v", c.run, c.to, c.at), func(t *testing.T) {
			var replayed, read []audit.Entry
			res, err := audit.Replay(l, audit.ReplayOptions{Run: c.run, To: c.to, At: c.at,
				Timeline: func(e audit.Entry) { replayed = append(replayed, e) }})
			require.NoError(t, err)
			require.NoError(t, audit.Timeline(l, c.run, res.State.Position, func(e audit.Entry) error {
				read = append(read, e)
				return nil
			}))
			require.Equal(t, replayed, read)
			if c.at != nil && c.at.IsZero() {
				require.Empty(t, read, "a replay that stopped before the first event")
			} else {
				require.NotEmpty(t, read)
			}
		})
	}

	stop := errors.New("enough")
	n := 0
	err = audit.Timeline(l, "", head, func(audit.Entry) error {
		n++
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, n)
}

// TestReplayHandsDecisionsOn: with a Decision option, Replay hands on the decisions it kept in Result.Decisions, in
// the same order, keeps none, and counts their drift.
func TestReplayHandsDecisionsOn(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t testing.TB, dir string)
		drift int
	}{
		{"scenario", func(t testing.TB, dir string) { audittest.Scenario(t, dir) }, 0},
		{"drift", audittest.Drift, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			c.store(t, dir)
			l, err := audit.Open(dir)
			require.NoError(t, err)
			defer l.Close()
			kept, err := audit.Replay(l, audit.ReplayOptions{Explain: true})
			require.NoError(t, err)
			require.NotEmpty(t, kept.Decisions)
			var handed []audit.Decision
			res, err := audit.Replay(l, audit.ReplayOptions{Explain: true,
				Decision: func(d audit.Decision) { handed = append(handed, d) }})
			require.NoError(t, err)
			require.Equal(t, kept.Decisions, handed)
			require.Empty(t, res.Decisions)
			require.Equal(t, c.drift, kept.Drift())
			require.Equal(t, c.drift, res.Drift())
		})
	}
}

// TestARunSelectionKeepsTheEngineStream: a replay of one run still shows the engine's config changes, in its
// timeline and among its explained decisions (they change every run's policy), and no event of another run.
func TestARunSelectionKeepsTheEngineStream(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	audittest.Scenario(t, dir)
	l, err := audit.Open(dir)
	require.NoError(t, err)
	defer l.Close()

	var entries []audit.Entry
	res, err := audit.Replay(l, audit.ReplayOptions{Run: audittest.RunBudget, Explain: true,
		Timeline: func(e audit.Entry) { entries = append(entries, e) }})
	require.NoError(t, err)
	configured := 0
	for _, e := range entries {
		require.Contains(t, []string{audittest.RunBudget, events.EngineStream}, e.Run, "at %d", e.Position)
		if e.Type == events.TypeEngineConfigured {
			configured++
		}
	}
	require.Positive(t, configured, "the timeline of one run holds the config changes")
	require.True(t, slices.ContainsFunc(res.Decisions, func(d audit.Decision) bool {
		return d.Command == "engine.configure"
	}), "the config change is explained with the run's decisions")
}
