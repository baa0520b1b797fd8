package projections

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// A fold makes the ended runs cold as it goes: a pass once a second of event time (evictEvery), and at least one
// every 4,096 events whatever their times say (evictEveryEvents). A run that ended at the start of the log stays hot
// up to the event before the pass and is cold from the pass on.
func TestAFoldPassesOverTheEndedRunsEverySecondAndEvery4096Events(t *testing.T) {
	for _, tc := range []struct {
		name   string
		step   time.Duration // the event time between two events
		passAt uint64        // the position of the first pass after the one at position 1
	}{
		{"a second of event time", time.Millisecond, 1001},
		{"4,096 events at one time", 0, 4097},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			const ended, open = "team_20261001000000_00000000000000e1", "team_20261001000000_00000000000000e2"
			evs := []events.Event{
				{Stream: events.EngineStream, Type: events.TypeEngineConfigured, Payload: &events.EngineConfigured{}},
				{Stream: ended, Type: events.TypeRunCreated, Payload: &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}},
				{Stream: ended, Type: events.TypeRunRunning, Payload: &events.RunRunning{}},
				{Stream: ended, Type: events.TypeRunCompleted, Payload: &events.RunCompleted{}},
				{Stream: open, Type: events.TypeRunCreated, Payload: &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}},
			}
			for uint64(len(evs)) < tc.passAt+10 {
				evs = append(evs, events.Event{Stream: open, Type: events.TypeRunRunning, Payload: &events.RunRunning{}})
			}
			for i := range evs {
				evs[i].SchemaVersion = events.SchemaVersion(evs[i].Type)
				evs[i].Time = start + int64(i)*int64(tc.step)
			}
			l := appendHistory(t, evs)
			for _, to := range []uint64{tc.passAt - 1, tc.passAt} {
				s := New()
				_, err := replay(s, l, to, Tiering{Retention: 0})
				require.NoError(t, err)
				require.Equal(t, to, s.Position)
				_, hot := s.runs[ended]
				require.Equal(t, to < tc.passAt, hot, "the ended run is hot at position %d", to)
				_, openHot := s.runs[open]
				require.True(t, openHot, "the run that has not ended stays hot")
			}
		})
	}
}
