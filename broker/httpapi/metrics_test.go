package httpapi

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/commands"
)

// A scrape reads the last snapshot's position, size and time as one: a snapshot saved while it is collected shows
// either the snapshot before it or itself, never the position of one with the size of the other.
func TestMetricsSnapshotGaugesDoNotTear(t *testing.T) {
	m := NewMetrics()
	newFixture(t, Options{Metrics: m})
	m.Snapshotted(1, 1, time.Now())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(2); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m.Snapshotted(i, int(i), time.Now())
		}
	}()
	defer func() {
		close(stop)
		brokertest.AwaitGroup(t, &wg, guard, "end of the snapshots")
	}()
	for range 2000 {
		families, err := m.reg.Gather()
		require.NoError(t, err)
		var pos, size float64
		for _, f := range families {
			switch f.GetName() {
			case "crewlog_snapshot_position":
				pos = f.GetMetric()[0].GetGauge().GetValue()
			case "crewlog_snapshot_bytes":
				size = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		require.Equal(t, pos, size, "the position of one snapshot and the size of another")
	}
}

// TestBudgetSeriesAreBoundedInRuns: the budget series are labelled by run, so a scrape holds those of at most
// maxRunSeries runs not ended, however many runs workers create: the label's values stay a bounded set.
func TestBudgetSeriesAreBoundedInRuns(t *testing.T) {
	f := newFixture(t, Options{Metrics: NewMetrics()})
	reqs := make([]commands.Request, maxRunSeries+1)
	for i := range reqs {
		reqs[i] = commands.Request{Actor: audittest.Admin, Command: &commands.RunCreate{RunID: fmt.Sprintf("many-%05d", i),
			Team: "many", Goal: "wait", Cwd: "/srv/many"}}
	}
	f.admitAll(reqs)
	text := metricsText(t, f)
	for _, series := range []string{"crewlog_budget_tokens_granted{", "crewlog_budget_tokens_spent{"} {
		require.Equal(t, maxRunSeries, strings.Count(text, "\n"+series), series)
	}
}
