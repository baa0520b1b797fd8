package projections

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A fold at load makes the ended runs cold as it goes even where event times go back in log order: an import of
// another runtime's history keeps its source's times, earlier than the events crewd recorded before it, and a log
// written before crewd's time never went back holds a step back of the wall clock. The fold counted its passes by
// event time alone, so after the later event it made no run cold until the log's times came back past it, and held
// every run of the history hot meanwhile.
func TestLoadMakesRunsColdWhereTimesGoBack(t *testing.T) {
	evs := realisticHistory(20_000)
	ahead := evs[len(evs)-1].Time + int64(24*time.Hour) // crewd's engine.configured, before the import
	evs[0].Time = ahead
	l := appendHistory(t, evs)

	var runs int
	for _, ev := range evs {
		if ev.StreamVersion == 1 && ev.Stream != evs[0].Stream {
			runs++
		}
	}
	s, _, err := LoadTiered(l, Tiering{Retention: time.Minute, MaxRetained: 10})
	require.NoError(t, err)
	require.Less(t, s.HotRuns(), runs/4, "of %d runs, those past the retention at the log's latest time went cold",
		runs)
}
