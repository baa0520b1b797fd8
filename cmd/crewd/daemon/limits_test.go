package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
)

var defaultLimits = Limits{
	MaxConns: 4096, ReservedConns: 256, MaxConnsPerCredential: 64, MaxConnsPerRun: 1024, MaxPendingPerProcess: 128, IdleTimeout: 30 * time.Minute,
	MaxWaitsPerConn: 16, MaxWaitsPerCredential: 64, MaxSubscriptionsPerCredential: 16, MaxReadsPerCredential: 2,
	OutboundBytes: 4 << 20, GlobalOutboundBytes: 256 << 20, RatePerCredential: 5000, BurstPerCredential: 5000,
}

// TestLimitDefaultsAreTheBrokers: crewd's defaults are the broker's own, so a daemon without flags behaves as
// documented in docs/protocol.md.
func TestLimitDefaultsAreTheBrokers(t *testing.T) {
	c, err := Load(nil, homeEnv)
	require.NoError(t, err)
	require.Equal(t, defaultLimits, c.Limits)
	var o broker.Options
	c.Limits.apply(&o)
	require.Equal(t, broker.DefaultMaxConns, o.MaxConns)
	require.Equal(t, broker.DefaultIdleTimeout, o.IdleTimeout)
	require.Equal(t, int64(broker.DefaultGlobalOutboundBytes), o.GlobalOutboundBytes)
	require.Equal(t, broker.DefaultRatePerCredential, o.RatePerCredential)
}

func TestLimitFlags(t *testing.T) {
	c, err := Load([]string{"--max-conns", "100", "--reserved-conns", "0", "--max-conns-per-credential", "5",
		"--max-conns-per-run", "50", "--max-pending-per-process", "7", "--idle-timeout", "0s", "--max-waits-per-conn", "2", "--max-waits-per-credential", "3",
		"--max-subscriptions-per-credential", "4", "--max-reads-per-credential", "3", "--outbound-bytes", "65536", "--global-outbound-bytes", "1048576",
		"--rate-per-credential", "0", "--burst-per-credential", "7"}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, Limits{MaxConns: 100, MaxConnsPerCredential: 5, MaxConnsPerRun: 50, MaxPendingPerProcess: 7, MaxWaitsPerConn: 2,
		MaxWaitsPerCredential: 3, MaxSubscriptionsPerCredential: 4, MaxReadsPerCredential: 3, OutboundBytes: 65536, GlobalOutboundBytes: 1 << 20,
		BurstPerCredential: 7}, c.Limits)
	var o broker.Options
	c.Limits.apply(&o)
	require.Equal(t, 7, o.MaxPendingPerPeer)
	require.Equal(t, -1, o.ReservedConns, "0 reserved is none, not the broker's default")
	require.Equal(t, time.Duration(-1), o.IdleTimeout, "0s is never, not the broker's default")
	require.Equal(t, -1, o.RatePerCredential, "rate 0 is no pacing, not the broker's default")

	_, err = Load([]string{"--max-conns", "10", "--reserved-conns", "10", "--idle-timeout", "soon", "--max-waits-per-conn", "0"}, homeEnv)
	require.ErrorContains(t, err, "reserved-conns: 10 must be below max-conns 10")
	require.ErrorContains(t, err, `idle-timeout: "soon" is not a duration`)
	require.ErrorContains(t, err, "max-waits-per-conn: 0 is outside 1..")
}
