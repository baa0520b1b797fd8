package commands

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/projections"
)

// TestJobLimitsAreBounded: a job knob a config sets is 0 (the dispatcher's value) up to 64 MiB a payload or a grant,
// 1,024 calls in flight, 65,536 request ids a job and 65,536 revoked roots a run; one past, or a negative one, is
// refused by name with its range, so a config cannot promise what the log could not hold.
func TestJobLimitsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int64
		set  func(c *projections.Config, v int64)
	}{
		{"proxyPayloadBytes", 64 << 20, func(c *projections.Config, v int64) { c.ProxyPayloadBytes = v }},
		{"proxyManifestBytes", 64 << 20, func(c *projections.Config, v int64) { c.ProxyManifestBytes = v }},
		{"proxyMaxInFlight", 1024, func(c *projections.Config, v int64) { c.ProxyMaxInFlight = int(v) }},
		{"proxyMaxRequests", 65536, func(c *projections.Config, v int64) { c.ProxyMaxRequests = int(v) }},
		{"revokedRootLimit", 65536, func(c *projections.Config, v int64) { c.RevokedRootLimit = int(v) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with := func(v int64) error {
				c := projections.DefaultConfig()
				tc.set(&c, v)
				return ValidateConfig(c)
			}
			for _, v := range []int64{0, 1, tc.max} {
				require.NoError(t, with(v), "%s %d", tc.name, v)
			}
			for _, v := range []int64{-1, tc.max + 1} {
				err := with(v)
				require.Error(t, err, "%s %d", tc.name, v)
				require.Contains(t, err.Error(), fmt.Sprintf("%s %d is outside 0..%d", tc.name, v, tc.max))
			}
		})
	}
}
