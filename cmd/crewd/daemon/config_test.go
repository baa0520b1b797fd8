package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

func envOf(vars map[string]string) Env {
	return Env{Getenv: func(k string) string { return vars[k] }, UID: 1234}
}

var homeEnv = envOf(map[string]string{"HOME": "/home/u"})

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestLoadDefaults(t *testing.T) {
	c, err := Load(nil, homeEnv)
	require.NoError(t, err)
	// pi-crew ships fail-closed (D§2.10): nesting off, depth 2, wait methods off; the rest is the engine's, and a
	// reserve of each run quota for its orchestrator (none in a log without a config: DefaultConfig's).
	engine := projections.DefaultConfig()
	engine.NestingEnabled, engine.MaxDepth, engine.WaitMethodsEnabled = false, 2, false
	engine.QuotaReserve = projections.DefaultQuotaReserve
	engine.QuotaWorkerMsgShare = projections.DefaultQuotaWorkerMsgShare
	engine.QuotaWorkerShare = projections.DefaultQuotaWorkerShare
	engine.RerouteEndedAttempts = true // a rule of crewd's, in no log without a config
	// crewd's defaults, in no log written before the knobs
	engine.ShareByDelegator, engine.WorkerSlotShare = true, true
	require.Equal(t, Config{
		DataDir:          "/home/u/.local/share/crewlog",
		SocketPath:       "/tmp/crewlog-1234/crewd.sock",
		Engine:           engine,
		MaxFrame:         262144,
		OutboundQueueCap: 256,
		MinFreeBytes:     256 << 20,
		OpenTimeout:      2 * time.Minute,
		Retention:        10 * time.Minute,
		CacheBytes:       eventlog.DefaultCacheSize,
		MemTableBytes:    eventlog.DefaultMemTableSize,
		MemoryBytes:      DefaultMemoryMiB << 20,
		Limits:           defaultLimits,
		Store:            StorePebble,
		LogLevel:         slog.LevelInfo,
		LogFormat:        "text",
		HTTPAddr:         "127.0.0.1:7717",
	}, c)
	require.Nil(t, c.Engine.ModelCatalog, "no flag: no catalog")
}

func TestLoadPathDefaultsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name         string
		vars         map[string]string
		data, socket string
	}{
		{"xdg", map[string]string{"HOME": "/home/u", "XDG_DATA_HOME": "/xdg/data", "XDG_RUNTIME_DIR": "/run/user/1234"},
			"/xdg/data/crewlog", "/run/user/1234/crewlog/crewd.sock"},
		{"home and tmpdir", map[string]string{"HOME": "/home/u", "TMPDIR": "/var/tmp"},
			"/home/u/.local/share/crewlog", "/var/tmp/crewlog-1234/crewd.sock"},
		{"relative xdg values are ignored", map[string]string{"HOME": "/home/u", "XDG_DATA_HOME": "rel", "XDG_RUNTIME_DIR": "rel", "TMPDIR": "rel"},
			"/home/u/.local/share/crewlog", "/tmp/crewlog-1234/crewd.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(nil, envOf(tc.vars))
			require.NoError(t, err)
			require.Equal(t, tc.data, c.DataDir)
			require.Equal(t, tc.socket, c.SocketPath)
		})
	}
	t.Run("no home", func(t *testing.T) {
		_, err := Load(nil, envOf(nil))
		require.ErrorContains(t, err, "default --data: a path is required")
		c, err := Load([]string{"--data", "/d"}, envOf(nil))
		require.NoError(t, err)
		require.Equal(t, "/d", c.DataDir)
	})
}

func TestLoadFlagsOverride(t *testing.T) {
	catalog := writeFile(t, "models", "# allowed\nclaude-sonnet\n\n  gpt-x  \n")
	c, err := Load([]string{
		"--data", "/d", "--socket=/s/crewd.sock", "--nesting=false", "--max-depth", "10", "--max-slots", "64",
		"--serialize-on-path-overlap", "--unmetered-delegates", "deny", "--model-catalog", catalog,
		"--settle-grace", "2m", "--max-frame", "1024", "--outbound-queue-cap", "4096", "--budget-mode", "nested",
		"-log-level", "debug", "--log-format", "json", "--min-free-mib", "0", "--open-timeout", "0s", "--socket-group", "4242", "--retention", "0s",
		"--cache-mib", "64", "--memtable-mib", "48", "--memory-mib", "0",
		"--slot-share", "3", "--slot-wait", "30s", "--quota-events", "5000", "--quota-bytes", "1048576", "--quota-msg-rate", "0", "--quota-reserve", "25", "--quota-worker-msg-share", "40", "--quota-worker-share", "30",
		"--share-by-delegator=false", "--worker-slot-share=false",
		"--http", "0.0.0.0:8080", "--http-allow-remote",
	}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, Config{
		DataDir: "/d", SocketPath: "/s/crewd.sock",
		Engine: projections.Config{
			NestingEnabled: false, MaxDepth: 10, MaxSlots: 64, SerializeOnPathOverlap: true,
			UnmeteredDelegates: events.UnmeteredDeny, ModelCatalog: []string{"claude-sonnet", "gpt-x"}, SettleGraceSec: 120,
			SlotShare: 3, SlotWaitSec: 30, QuotaEvents: 5000, QuotaBytes: 1 << 20, QuotaMsgsPerMin: 0, QuotaReserve: 25, QuotaWorkerMsgShare: 40, QuotaWorkerShare: 30,
			BudgetMode: events.BudgetModeNested, RerouteEndedAttempts: true,
		},
		ModelCatalogFile: catalog, MaxFrame: 1024, OutboundQueueCap: 4096, Limits: defaultLimits, Store: StorePebble,
		LogLevel: slog.LevelDebug, LogFormat: "json", SocketGroup: 4242,
		HTTPAddr: "0.0.0.0:8080", HTTPAddrSet: true, HTTPAllowRemote: true,
		CacheBytes: 64 << 20, MemTableBytes: 48 << 20,
	}, c)
}

// TestLoadHTTP: --http "" turns HTTP off; a non-loopback address needs --http-allow-remote; a malformed one is
// refused naming the flag.
func TestLoadHTTP(t *testing.T) {
	c, err := Load([]string{"--http", ""}, homeEnv)
	require.NoError(t, err)
	require.Empty(t, c.HTTPAddr)
	require.True(t, c.HTTPAddrSet)
	for _, addr := range []string{"0.0.0.0:7717", ":7717", "192.0.2.1:80"} {
		_, err = Load([]string{"--http", addr}, homeEnv)
		require.ErrorContains(t, err, "--http: ")
		require.ErrorContains(t, err, "--http-allow-remote")
	}
	_, err = Load([]string{"--http", "localhost"}, homeEnv)
	require.ErrorContains(t, err, "not host:port")
	c, err = Load([]string{"--http", "[::1]:0"}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, "[::1]:0", c.HTTPAddr)
}

// TestLoadHTTPSecureCookie: --http-secure-cookie, or its key in --config, marks the dashboard's session cookie
// Secure; without it, with --http-allow-remote too, it is not (a Secure cookie is never sent back over plain http).
func TestLoadHTTPSecureCookie(t *testing.T) {
	file := writeFile(t, "crewd.json", `{"http-secure-cookie": true}`)
	for _, c := range []struct {
		args []string
		want bool
	}{
		{args: nil, want: false},
		{args: []string{"--http", "0.0.0.0:7717", "--http-allow-remote"}, want: false},
		{args: []string{"--http-secure-cookie"}, want: true},
		{args: []string{"--http-secure-cookie=false"}, want: false},
		{args: []string{"--config", file}, want: true},
	} {
		cfg, err := Load(c.args, homeEnv)
		require.NoError(t, err, "%q", c.args)
		require.Equal(t, c.want, cfg.HTTPSecureCookie, "%q", c.args)
	}
}

// TestLoadHTTPPublicURL: --http-public-url, or its key in --config, is the base of the dashboard's login links as
// httpapi.CheckPublicURL gives it; a URL that is not an absolute http(s) address at / of its host, or plain http
// with --http-secure-cookie (the browser would refuse the cookie), stops the start with a message naming the flag.
func TestLoadHTTPPublicURL(t *testing.T) {
	file := writeFile(t, "crewd.json", `{"http-public-url": "https://crew.example.com/", "http-secure-cookie": true}`)
	for _, c := range []struct {
		args []string
		want string // the base of the links, or the refusal's words
		ok   bool
	}{
		{args: nil, want: "", ok: true},
		{args: []string{"--http-public-url", ""}, want: "", ok: true},
		{args: []string{"--http-public-url", "https://crew.example.com/"}, want: "https://crew.example.com", ok: true},
		{args: []string{"--http-public-url=http://192.0.2.7:8080"}, want: "http://192.0.2.7:8080", ok: true},
		{args: []string{"--http-secure-cookie", "--http-public-url", "https://crew.example.com:8443"},
			want: "https://crew.example.com:8443", ok: true},
		{args: []string{"--config", file}, want: "https://crew.example.com", ok: true},
		{args: []string{"--http-public-url", "crew.example.com"},
			want: `--http-public-url: "crew.example.com" is not an absolute http or https URL`},
		{args: []string{"--http-public-url", "https://crew.example.com/crewlog/"}, want: "has a path"},
		{args: []string{"--http-public-url", "https://crew.example.com/?x=1"}, want: "has a query or a fragment"},
		{args: []string{"--http-public-url", "https://crew.example.com/#x"}, want: "has a query or a fragment"},
		{args: []string{"--http-public-url", "https://op:pw@crew.example.com/"}, want: "user name or password"},
		{args: []string{"--http-secure-cookie", "--http-public-url", "http://crew.example.com/"},
			want: `--http-public-url: "http://crew.example.com/" is plain http`},
		{args: []string{"--config", file, "--http-public-url", "http://crew.example.com/"}, want: "is plain http"},
	} {
		cfg, err := Load(c.args, homeEnv)
		if !c.ok {
			require.ErrorContains(t, err, "--http-public-url: ", "%q", c.args)
			require.ErrorContains(t, err, c.want, "%q", c.args)
			continue
		}
		require.NoError(t, err, "%q", c.args)
		require.Equal(t, c.want, cfg.HTTPPublicURL, "%q", c.args)
	}
}

func TestLoadRelativePathsBecomeAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	c, err := Load([]string{"--data", "d", "--socket", "s.sock"}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "d"), c.DataDir)
	require.Equal(t, filepath.Join(wd, "s.sock"), c.SocketPath)
}

func TestLoadModelCatalogUnreadableIsEmpty(t *testing.T) {
	c, err := Load([]string{"--model-catalog", filepath.Join(t.TempDir(), "missing")}, homeEnv)
	require.NoError(t, err)
	require.NotNil(t, c.Engine.ModelCatalog, "fail closed: an empty catalog, not none")
	require.Empty(t, c.Engine.ModelCatalog)
	require.Len(t, c.Warnings, 1)
	require.Contains(t, c.Warnings[0], "every explicit model is denied")

	c, err = Load([]string{"--model-catalog", writeFile(t, "empty", "\n# nothing\n")}, homeEnv)
	require.NoError(t, err)
	require.NotNil(t, c.Engine.ModelCatalog)
	require.Empty(t, c.Engine.ModelCatalog)
	require.Empty(t, c.Warnings)
}

func TestLoadConfigFile(t *testing.T) {
	file := writeFile(t, "crewd.json", `{"data": "/from-file", "max-slots": 8, "nesting": false, "settle-grace": 45,
		"unmetered-delegates": "deny", "log-format": "json", "budget-mode": "nested", "slot-share": 1}`)
	c, err := Load([]string{"--config", file, "--max-slots", "3"}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, file, c.ConfigFile)
	require.Equal(t, "/from-file", c.DataDir)
	require.Equal(t, 3, c.Engine.MaxSlots, "a flag overrides the file")
	require.False(t, c.Engine.NestingEnabled)
	require.Equal(t, 45, c.Engine.SettleGraceSec, "a number of seconds")
	require.Equal(t, events.UnmeteredDeny, c.Engine.UnmeteredDelegates)
	require.Equal(t, events.BudgetModeNested, c.Engine.BudgetMode)
	require.Equal(t, 1, c.Engine.SlotShare, "N|auto takes a number")
	require.Equal(t, "json", c.LogFormat)
	require.Equal(t, 2, c.Engine.MaxDepth, "keys the file leaves out keep their defaults")

	c, err = Load([]string{"--config", writeFile(t, "auto.json", `{"slot-share": "auto", "max-slots": 6}`)}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, 3, c.Engine.SlotShare, "or the word auto")
}

// TestLoadInvalid checks every invalid value, and that one Load reports all the problems it has.
func TestLoadInvalid(t *testing.T) {
	long := "/" + strings.Repeat("s", 120)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown flag", []string{"--nope"}, []string{"daemon: flag provided but not defined: -nope"}},
		{"stray argument", []string{"serve"}, []string{"unexpected arguments"}},
		{"nesting", []string{"--nesting=maybe"}, []string{`--nesting: "maybe" is not true or false`}},
		{"serialize", []string{"--serialize-on-path-overlap=2"}, []string{`--serialize-on-path-overlap: "2" is not true or false`}},
		{"max-depth low", []string{"--max-depth", "0"}, []string{"--max-depth: 0 is outside 1..10"}},
		{"max-depth high", []string{"--max-depth", "11"}, []string{"--max-depth: 11 is outside 1..10"}},
		{"max-depth text", []string{"--max-depth", "four"}, []string{`--max-depth: "four" is not an integer`}},
		{"max-slots low", []string{"--max-slots", "0"}, []string{"--max-slots: 0 is outside 1..64"}},
		{"max-slots high", []string{"--max-slots", "65"}, []string{"--max-slots: 65 is outside 1..64"}},
		{"unmetered", []string{"--unmetered-delegates", "maybe"}, []string{`--unmetered-delegates: "maybe" is not one of allow, deny`}},
		{"budget mode", []string{"--budget-mode", "flat"}, []string{`--budget-mode: "flat" is not one of picrew, nested`}},
		{"grace text", []string{"--settle-grace", "soon"}, []string{`--settle-grace: "soon" is not a duration`}},
		{"grace fraction", []string{"--settle-grace", "1500ms"}, []string{"--settle-grace: 1.5s is not a whole number of seconds"}},
		{"quota reserve high", []string{"--quota-reserve", "51"}, []string{"--quota-reserve: 51 is outside 0..50"}},
		{"quota reserve negative", []string{"--quota-reserve", "-1"}, []string{"--quota-reserve: -1 is outside 0..50"}},
		{"worker message share high", []string{"--quota-worker-msg-share", "101"}, []string{"--quota-worker-msg-share: 101 is outside 0..100"}},
		{"worker share high", []string{"--quota-worker-share", "101"}, []string{"--quota-worker-share: 101 is outside 0..100"}},
		{"worker share negative", []string{"--quota-worker-share", "-1"}, []string{"--quota-worker-share: -1 is outside 0..100"}},
		{"share by delegator", []string{"--share-by-delegator=some"}, []string{`--share-by-delegator: "some" is not true or false`}},
		{"worker slot share", []string{"--worker-slot-share=2"}, []string{`--worker-slot-share: "2" is not true or false`}},
		{"grace negative", []string{"--settle-grace", "-1s"}, []string{"--settle-grace: -1s is outside 0s..86400s"}},
		{"grace high", []string{"--settle-grace", "25h"}, []string{"--settle-grace: 25h0m0s is outside 0s..86400s"}},
		{"max-frame low", []string{"--max-frame", "1023"}, []string{"--max-frame: 1023 is outside 1024..1048576"}},
		{"max-frame high", []string{"--max-frame", "1048577"}, []string{"--max-frame: 1048577 is outside 1024..1048576"}},
		{"queue low", []string{"--outbound-queue-cap", "31"}, []string{"--outbound-queue-cap: 31 is outside 32..4096"}},
		{"queue high", []string{"--outbound-queue-cap", "4097"}, []string{"--outbound-queue-cap: 4097 is outside 32..4096"}},
		{"log level", []string{"--log-level", "loud"}, []string{`--log-level: "loud" is not one of debug, info, warn, error`}},
		{"log format", []string{"--log-format", "xml"}, []string{`--log-format: "xml" is not one of text, json`}},
		{"empty data", []string{"--data", ""}, []string{"--data: a path is required"}},
		{"min free high", []string{"--min-free-mib", "1048577"}, []string{"--min-free-mib: 1048577 is outside 0..1048576"}},
		{"no cache", []string{"--cache-mib", "0", "--memtable-mib", "1025"}, []string{"--cache-mib: 0 is outside 1..1024", "--memtable-mib: 1025 is outside 1..1024"}},
		{"memory negative", []string{"--memory-mib", "-1"}, []string{"--memory-mib: -1 is outside 0..1048576"}},
		{"open timeout text", []string{"--open-timeout", "long"}, []string{`--open-timeout: "long" is not a duration`}},
		{"open timeout negative", []string{"--open-timeout", "-1s"}, []string{"--open-timeout: -1s is negative"}},
		{"retention negative", []string{"--retention", "-1m"}, []string{"--retention: -1m0s is negative"}},
		// A connection holding a wait has its idle timer armed again at every expiry, and every other one is closed
		// as soon as its hello is answered: a timeout of microseconds fired thousands of times a second per
		// connection.
		{"idle timeout tiny", []string{"--idle-timeout", "1us"}, []string{"--idle-timeout: 1µs is below 100ms (0s: never)"}},
		{"idle timeout just below", []string{"--idle-timeout", "99ms"}, []string{"--idle-timeout: 99ms is below 100ms"}},
		{"socket group root", []string{"--socket-group", "0"}, []string{"root's group"}},
		{"socket group unknown", []string{"--socket-group", "no-such-group-crewlog"}, []string{"--socket-group: "}},
		// The kernel reads a gid modulo 2^32, and (gid_t)-1 as leaving the group as it is.
		{"socket group root's modulo 2^32", []string{"--socket-group", "4294967296"}, []string{"--socket-group: 4294967296 is not a group id"}},
		{"socket group no change", []string{"--socket-group", "4294967295"}, []string{"--socket-group: 4294967295 is not a group id"}},
		{"socket group negative", []string{"--socket-group", "-5"}, []string{"--socket-group: -5 is not a group id"}},
		{"http port out of range", []string{"--http", "127.0.0.1:99999"}, []string{`--http: "127.0.0.1:99999" has no valid port`}},
		{"http port negative", []string{"--http", "127.0.0.1:-1"}, []string{`--http: "127.0.0.1:-1" has no valid port`}},
		{"http port unknown service", []string{"--http", "127.0.0.1:no-such-service"}, []string{`--http: "127.0.0.1:no-such-service" has no valid port`}},
		{"socket too long", []string{"--socket", long}, []string{"a unix socket path is at most 107"}},
		{"missing config file", []string{"--config", "/nonexistent/crewd.json"}, []string{"daemon: config file: open /nonexistent/crewd.json"}},
		{"catalog entry too long", []string{"--model-catalog", writeFile(t, "m", strings.Repeat("m", 300))}, []string{"engine config: model catalog entry"}},
		{"all at once", []string{"--max-depth", "0", "--max-slots", "99", "--log-format", "xml", "--settle-grace", "x"},
			[]string{"--max-depth: 0", "--max-slots: 99", "--log-format", "--settle-grace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, homeEnv)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				require.True(t, strings.HasPrefix(line, "daemon: "), "error line %q", line)
			}
		})
	}
}

func TestLoadInvalidConfigFile(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"not json", `{`, []string{"not one JSON object"}},
		{"array", `[]`, []string{"not one JSON object"}},
		{"two objects", `{} {}`, []string{"not one JSON object"}},
		{"trailing bracket", `{} ]`, []string{"not one JSON object"}},
		{"unknown key and bad types", `{"max-slot": 3, "config": "x", "nesting": "yes", "max-depth": "4", "data": 1, "settle-grace": true}`,
			[]string{`unknown key "max-slot"`, `unknown key "config"`, "nesting: must be a boolean", "max-depth: must be a number",
				"data: must be a string", "settle-grace: must be a string"}},
		{"duplicate key", `{"max-slots": 4, "nesting": true, "max-slots": 8}`, []string{`duplicate key "max-slots"`}},
		// A config file names no other settings file: which would override which is no one's guess.
		{"settings files", `{"picrew-config": "pi-crew.json"}`, []string{`unknown key "picrew-config"`}},
		{"bad values", `{"max-depth": 11, "max-slots": 2.5}`, []string{"max-depth in ", ": 11 is outside 1..10", `max-slots in `, `"2.5" is not an integer`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "c.json", tc.content)
			_, err := Load([]string{"--config", path}, homeEnv)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			// The same file is refused with the same text every time, its problems in the order of their keys (a
			// walk over a map would list them in another order within a few tries).
			for range 16 * (len(tc.want) - 1) {
				_, again := Load([]string{"--config", path}, homeEnv)
				require.Equal(t, err.Error(), again.Error())
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		_, err := Load([]string{arg}, homeEnv)
		require.ErrorIs(t, err, ErrHelp)
	}
	var b bytes.Buffer
	Usage(&b, homeEnv)
	for _, o := range options {
		require.Regexp(t, `(?m)^  --`+o.name+`[ \[]`, b.String(), "--help documents --%s", o.name)
	}
	require.Contains(t, b.String(), "(default /home/u/.local/share/crewlog)")
	require.Contains(t, b.String(), "Exit status")
	require.Contains(t, b.String(), "  --http-public-url URL\n", "the dashboard's public URL behind a proxy")
}

func TestLoadPicrewConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pi-crew.json")
	require.NoError(t, os.WriteFile(file, []byte(`{
		"nesting": {"enabled": true, "maxDepth": 3, "maxSlots": 4, "maxDeph": 9},
		"broker": {"enabled": true, "waitMethodsEnabled": true, "outboundQueueCap": 64, "maxFrameBytes": 4096},
		"limits": {"maxConcurrentWorkers": 8}
	}`), 0o600))
	c, err := Load([]string{"--picrew-config", file, "--max-slots", "3"}, homeEnv)
	require.NoError(t, err)
	require.True(t, c.Engine.NestingEnabled)
	require.Equal(t, 3, c.Engine.MaxDepth)
	require.Equal(t, 3, c.Engine.MaxSlots, "a flag overrides the pi-crew file")
	require.True(t, c.Engine.WaitMethodsEnabled)
	require.Equal(t, 64, c.OutboundQueueCap)
	require.Equal(t, 4096, c.MaxFrame)
	require.Equal(t, []string{
		"pi-crew config " + file + ": unknown key nesting.maxDeph; ignored",
		"pi-crew config " + file + ": broker.enabled does not apply to crewd; ignored",
	}, c.Warnings)

	require.NoError(t, os.WriteFile(file, []byte(`{"nesting": {"enabled": "yes", "maxDepth": 11}}`), 0o600))
	_, err = Load([]string{"--picrew-config", file}, homeEnv)
	require.ErrorContains(t, err, "nesting.enabled: must be a boolean")
	require.ErrorContains(t, err, "max-depth (from "+file+"): 11 is outside 1..10")
}
