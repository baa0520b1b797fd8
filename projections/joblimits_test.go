package projections

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJobLimitsLeftZeroAreTheDispatchers: a job knob left 0 — as in the default config, and in every log written
// before jobs existed — is pi-task-dispatcher's value (16 MiB a proxied payload, 8 MiB a grant, 32 calls in flight,
// 4,096 request ids a job, 4,096 revoked roots a run); a knob set is the limit in force, the others keeping theirs.
func TestJobLimitsLeftZeroAreTheDispatchers(t *testing.T) {
	dispatchers := JobLimits{PayloadBytes: 16 << 20, ManifestBytes: 8 << 20, MaxInFlight: 32, MaxRequests: 4096,
		RevokedRoots: 4096}
	for _, tc := range []struct {
		name   string
		config Config
		want   func(JobLimits) JobLimits
	}{
		{"zero", Config{}, func(l JobLimits) JobLimits { return l }},
		{"default", DefaultConfig(), func(l JobLimits) JobLimits { return l }},
		{"payload", Config{ProxyPayloadBytes: 100}, func(l JobLimits) JobLimits { l.PayloadBytes = 100; return l }},
		{"manifest", Config{ProxyManifestBytes: 200}, func(l JobLimits) JobLimits { l.ManifestBytes = 200; return l }},
		{"in flight", Config{ProxyMaxInFlight: 3}, func(l JobLimits) JobLimits { l.MaxInFlight = 3; return l }},
		{"requests", Config{ProxyMaxRequests: 40}, func(l JobLimits) JobLimits { l.MaxRequests = 40; return l }},
		{"roots", Config{RevokedRootLimit: 5}, func(l JobLimits) JobLimits { l.RevokedRoots = 5; return l }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want(dispatchers), tc.config.JobLimits())
		})
	}
}
