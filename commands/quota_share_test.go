package commands

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// WorkerQuotaShare answers by the rule the quota check decides by: a worker's limit is carved from each quota short
// of the reserve, unless the quota is too small to split; the orchestrator's and the admin's is the quota.
func TestWorkerQuotaShare(t *testing.T) {
	worker := events.Actor{Role: events.RoleWorker, TaskID: "W"}
	orchestrator := events.Actor{Role: events.RoleOrchestrator}
	cfg := projections.Config{QuotaEvents: 1000, QuotaBytes: 1, QuotaMsgsPerMin: 4, QuotaReserve: 50}
	for _, c := range []struct {
		name        string
		cfg         projections.Config
		actor       events.Actor
		quota       string
		want, limit int64
		carved      bool
	}{
		{"a worker's events", cfg, worker, events.QuotaEvents, 1000, 500, true},
		{"a worker's message rate", cfg, worker, events.QuotaMsgRate, 4, 2, true},
		{"too small to split", cfg, worker, events.QuotaBytes, 1, 1, false},
		{"the orchestrator's", cfg, orchestrator, events.QuotaEvents, 1000, 1000, false},
		{"the admin's", cfg, events.Actor{Role: events.RoleAdmin}, events.QuotaMsgRate, 4, 4, false},
		{"no reserve", projections.Config{QuotaEvents: 1000}, worker, events.QuotaEvents, 1000, 1000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			quota, limit, carved := WorkerQuotaShare(c.cfg, c.actor, c.quota)
			require.Equal(t, []any{c.want, c.limit, c.carved}, []any{quota, limit, carved})
		})
	}
}
