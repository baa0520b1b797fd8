package daemon

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/commands"
)

var defaultLimits = Limits{
	MaxConns: 4096, ReservedConns: 256, MaxConnsPerCredential: 64, MaxConnsPerRun: 1024, MaxPendingPerProcess: 128, IdleTimeout: 30 * time.Minute,
	MaxWaitsPerConn: 16, MaxWaitsPerCredential: 64, MaxSubscriptionsPerCredential: 16, MaxReadsPerCredential: 2,
	OutboundBytes: 4 << 20, GlobalOutboundBytes: 256 << 20, OutboundBytesPerCredential: 16 << 20, RatePerCredential: 5000,
	BurstPerCredential: 5000, OutboundBytesPerRun: 64 << 20, RatePerRun: 20000, BurstPerRun: 20000,
	GlobalInboundBytes: 64 << 20, InboundBytesPerCredential: 4 << 20, InboundBytesPerRun: 16 << 20,
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
	require.Equal(t, int64(broker.DefaultGlobalInboundBytes), o.GlobalInboundBytes)
	require.Equal(t, broker.DefaultInboundBytesPerCredential(o.GlobalInboundBytes, c.MaxFrame),
		o.InboundBytesPerCredential)
	require.Equal(t, broker.DefaultInboundBytesPerRun(o.GlobalInboundBytes, o.InboundBytesPerCredential),
		o.InboundBytesPerRun)
	require.Equal(t, broker.DefaultOutboundBytesPerCredential(broker.DefaultGlobalOutboundBytes, broker.DefaultOutboundBytes),
		o.OutboundBytesPerCredential)
	require.Equal(t, broker.DefaultRatePerCredential, o.RatePerCredential)
	require.Equal(t, broker.DefaultOutboundBytesPerRun(o.GlobalOutboundBytes, o.OutboundBytesPerCredential), o.OutboundBytesPerRun)
	require.Equal(t, broker.DefaultRatePerRun(o.RatePerCredential), o.RatePerRun)
	require.Equal(t, broker.DefaultBurstPerRun(o.BurstPerCredential, o.RatePerRun), o.BurstPerRun)
}

func TestLimitFlags(t *testing.T) {
	c, err := Load([]string{"--max-conns", "100", "--reserved-conns", "0", "--max-conns-per-credential", "5",
		"--max-conns-per-run", "50", "--max-pending-per-process", "7", "--idle-timeout", "0s", "--max-waits-per-conn", "2", "--max-waits-per-credential", "3",
		"--max-subscriptions-per-credential", "4", "--max-reads-per-credential", "3", "--max-frame", "65536", "--outbound-bytes", "65536", "--global-outbound-bytes", "1048576",
		"--rate-per-credential", "0", "--burst-per-credential", "7"}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, Limits{MaxConns: 100, MaxConnsPerCredential: 5, MaxConnsPerRun: 50, MaxPendingPerProcess: 7, MaxWaitsPerConn: 2,
		MaxWaitsPerCredential: 3, MaxSubscriptionsPerCredential: 4, MaxReadsPerCredential: 3, OutboundBytes: 65536, GlobalOutboundBytes: 1 << 20,
		OutboundBytesPerCredential: 65536, BurstPerCredential: 7, OutboundBytesPerRun: 1 << 18, BurstPerRun: 28,
		GlobalInboundBytes: 64 << 20, InboundBytesPerCredential: 4 << 20, InboundBytesPerRun: 16 << 20}, c.Limits)
	var o broker.Options
	c.Limits.apply(&o)
	require.Equal(t, 7, o.MaxPendingPerPeer)
	require.Equal(t, -1, o.ReservedConns, "0 reserved is none, not the broker's default")
	require.Equal(t, time.Duration(-1), o.IdleTimeout, "0s is never, not the broker's default")
	require.Equal(t, -1, o.RatePerCredential, "rate 0 is no pacing, not the broker's default")
	require.Equal(t, -1, o.RatePerRun, "auto follows: no pacing per run either")

	c, err = Load([]string{"--idle-timeout", "100ms"}, homeEnv)
	require.NoError(t, err, "the shortest idle timeout")
	require.Equal(t, 100*time.Millisecond, c.Limits.IdleTimeout)

	_, err = Load([]string{"--max-conns", "10", "--reserved-conns", "10", "--idle-timeout", "soon", "--max-waits-per-conn", "0"}, homeEnv)
	require.ErrorContains(t, err, "reserved-conns: 10 must be below max-conns 10")
	require.ErrorContains(t, err, `idle-timeout: "soon" is not a duration`)
	require.ErrorContains(t, err, "max-waits-per-conn: 0 is outside 1..")
}

// TestGlobalInboundBytes: the bytes all connections' readers hold in lines longer than the read-ahead, by flag or
// config key, at least max-frame (a frame of the cap must be able to end), and anything else refused naming the
// setting.
func TestGlobalInboundBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"default", nil, 64 << 20},
		{"a flag", []string{"--global-inbound-bytes", "1048576"}, 1 << 20},
		{"a config key", []string{"--config", writeFile(t, "i.json", `{"global-inbound-bytes": 2097152}`)}, 2 << 20},
		{"one frame of a small cap", []string{"--max-frame", "65536", "--outbound-bytes", "65536",
			"--global-inbound-bytes", "65536"}, 65536},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, homeEnv)
			require.NoError(t, err)
			require.Equal(t, tc.want, c.Limits.GlobalInboundBytes)
			o := broker.Options{SocketPath: "/tmp/c.sock", ServerKey: make([]byte, broker.MinServerKeyLen),
				MaxFrame: c.MaxFrame}
			c.Limits.apply(&o)
			require.Equal(t, int64(tc.want), o.GlobalInboundBytes)
			require.NoError(t, o.Validate(), "the broker takes it")
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"zero", []string{"--global-inbound-bytes", "0"}, "--global-inbound-bytes: 0 is outside 1024.."},
		{"below a frame", []string{"--global-inbound-bytes", "262143"},
			"--global-inbound-bytes: 262143 must be at least max-frame 262144"},
		{"a config word", []string{"--config", writeFile(t, "iw.json", `{"global-inbound-bytes": "lots"}`)},
			"global-inbound-bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, homeEnv)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestInboundShares: one token's and one run's shares of the inbound budget, by flag or config key: auto (a
// sixteenth of the global budget, at least max-frame; a quarter, at least a token's) follows the settings given; a
// number is taken within max-frame..global-inbound-bytes (a run's: inbound-bytes-per-credential..), and anything
// else is refused naming the setting.
func TestInboundShares(t *testing.T) {
	type shares struct{ cred, run int }
	for _, tc := range []struct {
		name string
		args []string
		want shares
	}{
		{"default", nil, shares{4 << 20, 16 << 20}},
		{"auto follows the global budget", []string{"--global-inbound-bytes", "1073741824"}, shares{64 << 20, 256 << 20}},
		{"auto is at least max-frame", []string{"--global-inbound-bytes", "1048576"}, shares{256 << 10, 256 << 10}},
		{"auto is at least a larger max-frame", []string{"--max-frame", "1048576", "--outbound-bytes", "4194304",
			"--global-inbound-bytes", "2097152"}, shares{1 << 20, 1 << 20}},
		{"a run's auto is at least a token's", []string{"--inbound-bytes-per-credential", "33554432"},
			shares{32 << 20, 32 << 20}},
		{"auto by name", []string{"--inbound-bytes-per-credential", "auto", "--inbound-bytes-per-run", "auto"},
			shares{4 << 20, 16 << 20}},
		{"flags", []string{"--inbound-bytes-per-credential", "1048576", "--inbound-bytes-per-run", "2097152"},
			shares{1 << 20, 2 << 20}},
		{"the whole global budget", []string{"--inbound-bytes-per-credential", "67108864",
			"--inbound-bytes-per-run", "67108864"}, shares{64 << 20, 64 << 20}},
		{"config keys", []string{"--config", writeFile(t, "in.json",
			`{"inbound-bytes-per-credential": 2097152, "inbound-bytes-per-run": "auto"}`)}, shares{2 << 20, 16 << 20}},
		{"the flag over the file", []string{"--config", writeFile(t, "inf.json", `{"inbound-bytes-per-run": 8388608}`),
			"--inbound-bytes-per-run", "33554432"}, shares{4 << 20, 32 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, homeEnv)
			require.NoError(t, err)
			require.Equal(t, tc.want, shares{c.Limits.InboundBytesPerCredential, c.Limits.InboundBytesPerRun})
			o := broker.Options{SocketPath: "/tmp/c.sock", ServerKey: make([]byte, broker.MinServerKeyLen),
				MaxFrame: c.MaxFrame}
			c.Limits.apply(&o)
			require.Equal(t, int64(tc.want.cred), o.InboundBytesPerCredential)
			require.Equal(t, int64(tc.want.run), o.InboundBytesPerRun)
			require.NoError(t, o.Validate(), "the broker takes it")
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"zero", []string{"--inbound-bytes-per-credential", "0"},
			"--inbound-bytes-per-credential: 0 is outside 1..1099511627776"},
		{"a word", []string{"--inbound-bytes-per-run", "lots"}, `--inbound-bytes-per-run: "lots" is not an integer`},
		{"a token's below max-frame", []string{"--inbound-bytes-per-credential", "262143"},
			"--inbound-bytes-per-credential: 262143 must be within max-frame 262144..global-inbound-bytes 67108864"},
		{"a token's above the global budget", []string{"--inbound-bytes-per-credential", "67108865"},
			"--inbound-bytes-per-credential: 67108865 must be within max-frame 262144..global-inbound-bytes 67108864"},
		{"a run's below a token's", []string{"--inbound-bytes-per-run", "2097152"},
			"--inbound-bytes-per-run: 2097152 must be within inbound-bytes-per-credential 4194304..global-inbound-bytes 67108864"},
		{"a run's above a config file's global budget", []string{"--config", writeFile(t, "ig.json",
			`{"global-inbound-bytes": 8388608, "inbound-bytes-per-run": 16777216}`)},
			"16777216 must be within inbound-bytes-per-credential 524288..global-inbound-bytes 8388608"},
		{"a config boolean", []string{"--config", writeFile(t, "ib.json", `{"inbound-bytes-per-credential": true}`)},
			`inbound-bytes-per-credential: must be a number or "auto"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, homeEnv)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestOutboundBytesPerCredential: one token's share of the outbound budget, by flag or config key: auto (a
// sixteenth of the global budget, at least a connection's) follows the budgets given; a number is taken within
// outbound-bytes..global-outbound-bytes, and anything else is refused naming the setting.
func TestOutboundBytesPerCredential(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"default", nil, 16 << 20},
		{"auto follows the global budget", []string{"--global-outbound-bytes", "1073741824"}, 64 << 20},
		{"auto is at least a connection's", []string{"--global-outbound-bytes", "33554432"}, 4 << 20},
		{"auto by name", []string{"--outbound-bytes-per-credential", "auto"}, 16 << 20},
		{"a flag", []string{"--outbound-bytes-per-credential", "8388608"}, 8 << 20},
		{"the whole global budget", []string{"--outbound-bytes-per-credential", "268435456"}, 256 << 20},
		{"a config key", []string{"--config", writeFile(t, "n.json", `{"outbound-bytes-per-credential": 8388608}`)}, 8 << 20},
		{"auto in a config file", []string{"--config", writeFile(t, "a.json", `{"outbound-bytes-per-credential": "auto"}`)}, 16 << 20},
		{"the flag over the file", []string{"--config", writeFile(t, "f.json", `{"outbound-bytes-per-credential": 8388608}`),
			"--outbound-bytes-per-credential", "4194304"}, 4 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, homeEnv)
			require.NoError(t, err)
			require.Equal(t, tc.want, c.Limits.OutboundBytesPerCredential)
			o := broker.Options{SocketPath: "/tmp/c.sock", ServerKey: make([]byte, broker.MinServerKeyLen)}
			c.Limits.apply(&o)
			require.Equal(t, int64(tc.want), o.OutboundBytesPerCredential)
			require.NoError(t, o.Validate(), "the broker takes it")
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"zero", []string{"--outbound-bytes-per-credential", "0"}, "--outbound-bytes-per-credential: 0 is outside 1..1099511627776"},
		{"negative", []string{"--outbound-bytes-per-credential", "-1"}, "--outbound-bytes-per-credential: -1 is outside 1.."},
		{"a word", []string{"--outbound-bytes-per-credential", "lots"}, `--outbound-bytes-per-credential: "lots" is not an integer`},
		{"above the global budget", []string{"--outbound-bytes-per-credential", "268435457"},
			"--outbound-bytes-per-credential: 268435457 must be within outbound-bytes 4194304..global-outbound-bytes 268435456"},
		{"below a connection's", []string{"--outbound-bytes-per-credential", "1048576"},
			"--outbound-bytes-per-credential: 1048576 must be within outbound-bytes 4194304..global-outbound-bytes 268435456"},
		{"above a config file's global budget", []string{"--config", writeFile(t, "g.json",
			`{"global-outbound-bytes": 8388608, "outbound-bytes-per-credential": 16777216}`)},
			"16777216 must be within outbound-bytes 4194304..global-outbound-bytes 8388608"},
		{"a config word", []string{"--config", writeFile(t, "w.json", `{"outbound-bytes-per-credential": "lots"}`)},
			`outbound-bytes-per-credential: must be a number or "auto"`},
		{"a config boolean", []string{"--config", writeFile(t, "b.json", `{"outbound-bytes-per-credential": true}`)},
			`outbound-bytes-per-credential: must be a number or "auto"`},
		{"a global budget below a connection's", []string{"--global-outbound-bytes", "1048576"},
			"--global-outbound-bytes: 1048576 must be at least outbound-bytes 4194304"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, homeEnv)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestRunShares: what the workers of one run share, by flag or config key: auto follows the per-credential settings
// (a quarter of the global outbound budget, at least a credential's; four times a token's rate and burst, no pacing
// per run when a token is not paced); a number is taken within its bounds, and anything else is refused naming the
// setting.
func TestRunShares(t *testing.T) {
	type shares struct{ bytes, rate, burst int }
	for _, tc := range []struct {
		name string
		args []string
		want shares
	}{
		{"default", nil, shares{64 << 20, 20000, 20000}},
		{"auto follows the global budget", []string{"--global-outbound-bytes", "1073741824"}, shares{256 << 20, 20000, 20000}},
		{"auto is at least a credential's", []string{"--outbound-bytes-per-credential", "134217728"},
			shares{128 << 20, 20000, 20000}},
		{"auto follows the rate per credential", []string{"--rate-per-credential", "100", "--burst-per-credential", "10"},
			shares{64 << 20, 400, 400}},
		{"auto is no pacing when a token is not paced", []string{"--rate-per-credential", "0"}, shares{64 << 20, 0, 20000}},
		{"flags", []string{"--outbound-bytes-per-run", "33554432", "--rate-per-run", "7000", "--burst-per-run", "9000"},
			shares{32 << 20, 7000, 9000}},
		{"a rate per run alone", []string{"--rate-per-credential", "0", "--rate-per-run", "7000"}, shares{64 << 20, 7000, 20000}},
		{"config keys", []string{"--config", writeFile(t, "r.json",
			`{"outbound-bytes-per-run": 16777216, "rate-per-run": 0, "burst-per-run": "auto"}`)}, shares{16 << 20, 0, 20000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, homeEnv)
			require.NoError(t, err)
			require.Equal(t, tc.want, shares{c.Limits.OutboundBytesPerRun, c.Limits.RatePerRun, c.Limits.BurstPerRun})
			o := broker.Options{SocketPath: "/tmp/c.sock", ServerKey: make([]byte, broker.MinServerKeyLen)}
			c.Limits.apply(&o)
			require.NoError(t, o.Validate(), "the broker takes it")
			require.Equal(t, int64(tc.want.bytes), o.OutboundBytesPerRun)
			rate := tc.want.rate
			if rate == 0 {
				rate = -1 // 0 is no pacing per run, not the broker's default
			}
			require.Equal(t, rate, o.RatePerRun)
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"below a credential's", []string{"--outbound-bytes-per-run", "8388608"},
			"--outbound-bytes-per-run: 8388608 must be within outbound-bytes-per-credential 16777216..global-outbound-bytes 268435456"},
		{"above the global budget", []string{"--outbound-bytes-per-run", "268435457"}, "must be within outbound-bytes-per-credential"},
		{"a negative rate", []string{"--rate-per-run", "-1"}, "--rate-per-run: -1 is outside 0.."},
		{"a zero burst", []string{"--burst-per-run", "0"}, "--burst-per-run: 0 is outside 1.."},
		{"a word", []string{"--rate-per-run", "lots"}, `--rate-per-run: "lots" is not an integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, homeEnv)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestOutboundBytesAtLeastMaxFrame: a connection's outbound budget below the frame cap is a usage error naming the
// flag, like every other bad setting: the broker refuses it, and finding out only there opened the store (and
// recorded the engine's config) before crewd exited 1.
func TestOutboundBytesAtLeastMaxFrame(t *testing.T) {
	_, err := Load([]string{"--outbound-bytes", "100000"}, homeEnv)
	require.ErrorContains(t, err, "daemon: --outbound-bytes: 100000 must be at least max-frame 262144")
	_, err = Load([]string{"--config", writeFile(t, "o.json", `{"max-frame": 1048576, "outbound-bytes": 524288}`)}, homeEnv)
	require.ErrorContains(t, err, "524288 must be at least max-frame 1048576")

	c, err := Load([]string{"--max-frame", "1048576", "--outbound-bytes", "1048576"}, homeEnv)
	require.NoError(t, err)
	o := broker.Options{SocketPath: "/tmp/c.sock", ServerKey: make([]byte, broker.MinServerKeyLen), MaxFrame: c.MaxFrame}
	c.Limits.apply(&o)
	require.NoError(t, o.Validate(), "the broker takes what Load takes")

	data := filepath.Join(t.TempDir(), "data")
	var out, errs bytes.Buffer
	require.Equal(t, ExitUsage, Main([]string{"--data", data, "--outbound-bytes", "100000"}, &out, &errs), errs.String())
	require.NoDirExists(t, data)
}

// TestSecurityDocStatesCrewdsBounds: the numbers docs/security.md gives for crewd — the longest admin token crewctl
// sends, the connections kept for the admin, the outcomes with no event a task and a run's workers record, how long a
// read-only token outlives its revocation and how long crewd answers reads once its log has failed — are the ones the
// code enforces (their tests hold the code to them), so the page and the code cannot drift apart unnoticed.
func TestSecurityDocStatesCrewdsBounds(t *testing.T) {
	requireDocStates(t, "security.md", []docBound{
		{"one token of at most 256 bytes", MaxTokenLen, 256},
		{"never in the 8 places beyond `--max-conns` kept for the admin", broker.AdminConns, 8},
		{"records at most 10,000 outcomes that wrote no event", commands.MaxEventlessOutcomes, 10_000},
		{"all of a run's workers together at most 100,000", commands.MaxEventlessOutcomesPerRun, 100_000},
		{"which leaves their orchestrator its own 10,000", commands.MaxEventlessOutcomes, 10_000},
		{"effective within a second", recheckEvery, time.Second},
		{"crewd answers reads for 2 s, then exits 1", failDrain, 2 * time.Second},
	})
}
