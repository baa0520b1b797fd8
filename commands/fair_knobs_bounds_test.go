package commands

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/projections"
)

// The fair-slot and reserve knobs are taken up to their bounds and refused one past them, by name (validateFairness):
// a slotShare up to the largest pool (MaxMaxSlots), a slot wait up to a day (MaxSlotWaitSec), a quota reserve up to
// half (MaxQuotaReserve).
func TestFairnessKnobsAreBounded(t *testing.T) {
	for _, c := range []struct {
		name string // the knob as the refusal names it, and the value
		set  func(c *projections.Config)
		bad  bool
	}{
		{"slotShare 0", func(c *projections.Config) { c.SlotShare = 0 }, false},
		{"slotShare 64", func(c *projections.Config) { c.SlotShare = MaxMaxSlots }, false},
		{"slotShare 65", func(c *projections.Config) { c.SlotShare = MaxMaxSlots + 1 }, true},
		{"slotShare -1", func(c *projections.Config) { c.SlotShare = -1 }, true},
		{"slot wait 86400", func(c *projections.Config) { c.SlotWaitSec = MaxSlotWaitSec }, false},
		{"slot wait 86401", func(c *projections.Config) { c.SlotWaitSec = MaxSlotWaitSec + 1 }, true},
		{"quotaReserve 50", func(c *projections.Config) { c.QuotaReserve = MaxQuotaReserve }, false},
		{"quotaReserve 51", func(c *projections.Config) { c.QuotaReserve = MaxQuotaReserve + 1 }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := projections.DefaultConfig()
			c.set(&cfg)
			err := ValidateConfig(cfg)
			if !c.bad {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.name)
		})
	}
}
