package audit_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestNewerBuildsEventIsNotDamage: an event of a type, or a schema version of a type, that this build does not
// know, in a record whose checksum and chain hold, was written by a newer build. Verify and replay --explain stop
// there with an error that says so and names it, not as corruption (which sends the operator to a backup that holds
// the same event), and never with an answer past it.
func TestNewerBuildsEventIsNotDamage(t *testing.T) {
	for _, c := range []struct {
		name, typ string
		version   uint16
	}{
		{"unknown type", "run.archived", 1},
		{"newer schema version", events.TypeRunRunning, events.SchemaVersion(events.TypeRunRunning) + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			pos := audittest.Newer(t, dir, c.typ, c.version)
			l, err := audit.Open(dir)
			require.NoError(t, err)
			defer l.Close()

			_, err = audit.Verify(l, nil)
			require.ErrorIs(t, err, projections.ErrNewerEvent)
			require.NotErrorIs(t, err, eventlog.ErrCorrupt)
			require.ErrorContains(t, err, c.typ)
			var ne *projections.NewerEventError
			require.ErrorAs(t, err, &ne)
			require.Equal(t, pos, ne.Position)

			_, err = audit.Replay(l, audit.ReplayOptions{Explain: true})
			require.ErrorIs(t, err, projections.ErrNewerEvent)
			require.NotErrorIs(t, err, eventlog.ErrCorrupt)

			// Up to the position before it, nothing is unknown.
			res, err := audit.Replay(l, audit.ReplayOptions{To: pos - 1, Explain: true})
			require.NoError(t, err)
			require.Zero(t, res.Drift())

			// Nor up to a time before it: the replay stops at the event's time, which its record gives, and never
			// decodes its payload.
			before, err := l.Event(pos - 1)
			require.NoError(t, err)
			at := time.Unix(0, before.Time)
			res, err = audit.Replay(l, audit.ReplayOptions{At: &at, Explain: true})
			require.NoError(t, err)
			require.Equal(t, pos-1, res.State.Position)
		})
	}
}

// TestNewerBuildsEventsWithoutACommandID: two events this build cannot decode, each written by a command sent
// without a command id, are two decisions as far as a stop is concerned (such events are grouped by their command id
// alone, and they share none): a replay that explains decisions may stop between them, and fails on the newer event
// it folds, not with a refusal to stop inside a decision that no record says exists.
func TestNewerBuildsEventsWithoutACommandID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	head := audittest.Scenario(t, dir)
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	for range 2 {
		_, err = l.Append(eventlog.Write{Events: []eventlog.Event{{
			Stream: audittest.RunBudget, Type: "task.renamed", SchemaVersion: 1,
			Time: audittest.Epoch.Add(time.Hour).UnixNano(), ActorRole: events.RoleOrchestrator, Payload: []byte{0x80},
		}}})
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	l, err = audit.Open(dir)
	require.NoError(t, err)
	defer l.Close()

	_, err = audit.Replay(l, audit.ReplayOptions{To: head + 1, Explain: true})
	require.NotErrorIs(t, err, audit.ErrInsideDecision)
	require.ErrorIs(t, err, projections.ErrNewerEvent)
}
