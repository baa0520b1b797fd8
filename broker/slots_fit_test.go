package broker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/projections"
)

// TestSlotsPastHoldersTooManyForAFrame: query.slots lists every holder of the pool, up to 64 (maxSlots), and is no
// page: 64 sub ids of crewlog's own (gc- and a UUID, 39 chars), or 20 of an import's of 62, outgrow a frame of 1 KiB,
// and query.slots answered oversize-frame for as long as they held their slots, the admin reading neither the pool
// nor the holders crewctl cancel --free names. The answer lists the first holders that fit, subIdsOmitted true (each
// run's query.delegations lists its own), held and capacity as they are; one that fits is sent whole.
func TestSlotsPastHoldersTooManyForAFrame(t *testing.T) {
	for _, frame := range []int{wire.MaxFrameFloor, 0} {
		t.Run(fmt.Sprint(frame), func(t *testing.T) {
			cfg := projections.DefaultConfig()
			cfg.MaxSlots, cfg.SlotShare = 64, 64
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}, config: &cfg})
			a := f.dial()
			a.helloAdmin()
			const run, at = "team_x", int64(1796040000000)
			evs := importedParent("p")
			var subs []any
			for i := range 20 {
				sub := fmt.Sprintf("%02d", i) + strings.Repeat("s", 60)
				subs = append(subs, sub)
				evs = append(evs, importedAdmission("p", sub, at))
			}
			importEach(t, a, run, at, evs)

			slots := a.ok("query.slots", nil)
			require.LessOrEqual(t, a.rd.FrameBytes(), cmp.Or(frame, wire.DefaultMaxFrame))
			require.EqualValues(t, 20, slots["held"])
			require.EqualValues(t, 64, slots["capacity"])
			listed := slots["subIds"].([]any)
			if frame == 0 {
				require.Equal(t, subs, listed, "a pool that fits is sent whole")
				require.NotContains(t, slots, "subIdsOmitted")
				return
			}
			require.Equal(t, true, slots["subIdsOmitted"], "holders are left out, and it says so")
			require.NotEmpty(t, listed)
			require.Less(t, len(listed), len(subs))
			require.True(t, slices.Equal(subs[:len(listed)], listed), "the first holders, in order: %v", listed)
		})
	}
}
