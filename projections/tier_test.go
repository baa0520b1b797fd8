package projections

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cold runs' cache keeps at most its size in runs and
// coldCacheEvents in their events, dropping the least recently used first,
// but always the run read last, however large.
func TestColdCacheIsBoundedInRunsAndEvents(t *testing.T) {
	c := NewColdStore(nil, 3)
	run := func(id string, evs int64) *runState {
		r := newRunState(Run{RunID: id})
		r.run.Usage.Events = evs
		return r
	}
	ids := func() []string {
		var out []string
		for _, e := range c.cache {
			out = append(out, e.id)
		}
		return out
	}
	for i := 0; i < 4; i++ {
		c.keep(fmt.Sprint(i), 1, run(fmt.Sprint(i), 10))
	}
	require.Equal(t, []string{"1", "2", "3"}, ids(), "at most 3 runs")
	require.NotNil(t, c.cached("1", 1), "a hit makes 1 the most recent")
	require.Nil(t, c.cached("1", 2), "another position is a miss")
	c.keep("4", 1, run("4", coldCacheEvents-15))
	require.Equal(t, []string{"1", "4"}, ids(), "the least recent go first when the events pass the bound")
	require.EqualValues(t, coldCacheEvents-5, c.events)
	c.keep("big", 1, run("big", 2*coldCacheEvents))
	require.Equal(t, []string{"big"}, ids(), "the run read last stays, however large")
	c.keep("big", 2, run("big", 10))
	require.Equal(t, []string{"big"}, ids())
	require.EqualValues(t, 10, c.events, "a run kept again replaces its older copy")
}
