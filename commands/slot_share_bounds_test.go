package commands

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// The bounds of the run's slot share (fair_slots.go) while another run waits: a run holding exactly its share is
// refused slot-share-exceeded, one holding fewer is admitted, and a slotShare of 0 is no rule at all. The waiting run
// is the one a recorded decision saw (projections.State.AssumePool), as a re-run of that decision sees it; the run
// asking holds one slot.
func TestSlotShareBounds(t *testing.T) {
	for _, c := range []struct {
		name   string
		share  string
		reason string // "" when admitted
	}{
		{"holding its share of 1", "1", events.ReasonSlotShareExceeded},
		{"holding fewer than its share of 2", "2", ""},
		{"no share", "0", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newScenarioWorld(t)
			require.NoError(t, w.config([]string{"nestingEnabled=true", "maxDepth=4", "maxSlots=4",
				"slotShare=" + c.share, "slotWaitSec=60"}))
			require.NoError(t, w.given(events.TypeRunCreated, "A", `{"team":"t","goal":"a","cwd":"/a"}`))
			require.NoError(t, w.given(events.TypeRunRunning, "A", `{}`))
			require.NoError(t, w.given(events.TypeTaskCreated, "A",
				`{"taskId":"a1","role":"executor","agent":"executor","title":"a","cwd":"/a","dependsOn":[]}`))
			require.NoError(t, w.given(events.TypeTaskStarted, "A", `{"taskId":"a1"}`))
			out, err := w.when(events.RoleWorker, "A", "a1", "delegate.request", []byte(`{"prompt":"1"}`))
			require.NoError(t, err)
			require.Nil(t, out.err, "nobody waits yet")

			s := w.s.Clone()
			s.AssumePool(s.SlotsHeld(), 1)
			_, err = Decide(s, &DelegateRequest{RunID: "A", TaskID: "a1", Prompt: "2"}, w.env(worker("a1")))
			if c.reason == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.reason)
		})
	}
}
