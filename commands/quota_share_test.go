package commands

import (
	"math"
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

// One worker's share of the message rate is a percent of the workers' part, at least 1; it applies to workers only,
// and 0 or 100 is no share of its own. The config refuses a percent outside 0..100.
func TestWorkerMsgLimit(t *testing.T) {
	worker := events.Actor{Role: events.RoleWorker, TaskID: "W"}
	for _, c := range []struct {
		name   string
		actor  events.Actor
		share  int
		most   int64
		limit  int64
		sender string
	}{
		{"half", worker, 50, 6, 3, "W"},
		{"at least one", worker, 1, 6, 1, "W"},
		{"rounded down", worker, 50, 5, 2, "W"},
		{"no share", worker, 0, 6, 0, ""},
		{"the whole part", worker, 100, 6, 0, ""},
		{"the orchestrator", events.Actor{Role: events.RoleOrchestrator}, 50, 8, 0, ""},
		{"the admin", events.Actor{Role: events.RoleAdmin}, 50, 8, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := &Env{Config: projections.Config{QuotaWorkerMsgShare: c.share}, Actor: c.actor}
			limit, sender := workerMsgLimit(env, c.most)
			require.Equal(t, []any{c.limit, c.sender}, []any{limit, sender})
		})
	}
	requireShareBounded(t, "quotaWorkerMsgShare", func(c *projections.Config, share int) {
		c.QuotaWorkerMsgShare = share
	})
}

// One worker's share of the events and the bytes quotas is a percent of the workers' part, at least 1, without
// overflow for a part near 2^63; it applies to workers of a task only, and 0 or 100 is no share of its own. The
// config refuses a percent outside 0..100.
func TestWorkerShareLimit(t *testing.T) {
	worker := events.Actor{Role: events.RoleWorker, TaskID: "W"}
	share := func(actor events.Actor, pct int) *Env {
		return &Env{Config: projections.Config{QuotaWorkerShare: pct}, Actor: actor}
	}
	for _, c := range []struct {
		name        string
		env         *Env
		part, limit int64
	}{
		{"half", share(worker, 50), 30, 15},
		{"at least one", share(worker, 1), 30, 1},
		{"rounded down", share(worker, 50), 15, 7},
		{"a part near 2^63", share(worker, 99), math.MaxInt64, math.MaxInt64/100*99 + math.MaxInt64%100*99/100},
		{"no share", share(worker, 0), 30, 0},
		{"the whole part", share(worker, 100), 30, 0},
		{"a worker of no task", share(events.Actor{Role: events.RoleWorker}, 50), 30, 0},
		{"the orchestrator", share(events.Actor{Role: events.RoleOrchestrator}, 50), 30, 0},
		{"the admin", share(events.Actor{Role: events.RoleAdmin}, 50), 30, 0},
	} {
		t.Run(c.name, func(t *testing.T) { require.Equal(t, c.limit, workerShareLimit(c.env, c.part)) })
	}
	requireShareBounded(t, "quotaWorkerShare", func(c *projections.Config, share int) { c.QuotaWorkerShare = share })
}

// requireShareBounded requires the config to take a share (set by set) of 0..100 percent and refuse one outside,
// naming the knob.
func requireShareBounded(t *testing.T, knob string, set func(c *projections.Config, share int)) {
	t.Helper()
	cfg := projections.DefaultConfig()
	for share, bad := range map[int]bool{-1: true, 0: false, 100: false, 101: true} {
		set(&cfg, share)
		if err := ValidateConfig(cfg); bad {
			require.ErrorContains(t, err, knob+" ", share)
		} else {
			require.NoError(t, err, share)
		}
	}
}
