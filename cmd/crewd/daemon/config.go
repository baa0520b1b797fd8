package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crewlog/crewlog/broker/httpapi"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Bounds of the broker's outbound queue: pi-crew's outboundQueueCap (D§7.7). A test checks them against the
// broker's own, which validates them again.
const (
	defaultOutboundQueueCap = 256
	minOutboundQueueCap     = 32
	maxOutboundQueueCap     = 4096
)

// NB: the open-timeout default (2m) is the longest a start stuck in Pebble may burn a core: reopening a store on
// a full disk retries its recovery flush without pause (measured: ~70 % of a core). --min-free-mib keeps crewd from
// getting there; the deadline bounds it when the check is off. Rebuilding 1M events takes ~10 s here.

// maxMinFreeMiB bounds --min-free-mib (1 TiB).
const maxMinFreeMiB = 1 << 20

// maxCacheMiB bounds --cache-mib and --memtable-mib (Pebble's memtable is
// at most 1 GiB; so is crewd's cache).
const maxCacheMiB = 1 << 10

// maxSocketPath is the longest path a unix socket can be bound at on Linux (sun_path minus its NUL).
const maxSocketPath = 107

// ErrHelp is returned by Load when --help or -h was given; the caller prints Usage and exits 0.
var ErrHelp = errors.New("daemon: help requested")

// Env is what the defaults depend on, so tests can supply their own.
type Env struct {
	Getenv func(string) string
	UID    int
}

// OSEnv is the process's environment.
func OSEnv() Env { return Env{Getenv: os.Getenv, UID: os.Getuid()} }

// Config is everything crewd runs with, resolved from flags, the config file and the environment.
type Config struct {
	DataDir    string // holds admin.token, server.key and the store
	SocketPath string
	ConfigFile string // "" when none was given

	// Engine is put in force at start; engine.configured is recorded only when it differs from the log's.
	Engine           projections.Config
	ModelCatalogFile string // "" when no catalog is configured

	MaxFrame         int
	OutboundQueueCap int
	Limits           Limits // per-principal limits of the broker (limits.go)

	// MinFreeBytes: below this much free space on the store's file system crewd refuses to start and
	// answers writes disk-full (0 disables the check).
	MinFreeBytes uint64
	// OpenTimeout bounds opening the store and rebuilding the state (0: no bound).
	OpenTimeout time.Duration
	// Retention is how long an ended run stays in memory after its last event (0: it leaves at once).
	Retention time.Duration
	// CacheBytes and MemTableBytes size the store's block cache and memtables (eventlog.Options; 0: the default).
	CacheBytes    int64
	MemTableBytes uint64
	// MemoryBytes is the resident memory crewd aims to stay within (0: no aim): the Go heap's soft limit is what
	// it leaves beside the cache and memtables (memory.go).
	MemoryBytes int64
	// SocketGroup is the gid whose members may connect (0: only crewd's uid).
	SocketGroup int

	// Store is where the log commits: StorePebble, or StoreJetStream with Cluster (cluster.go).
	Store   string
	Cluster Cluster

	LogLevel  slog.Level
	LogFormat string // "text" or "json"

	// HTTPAddr is the dashboard API's address ("" turns HTTP off); HTTPAddrSet says it was given rather than
	// defaulted (a default address in use only disables HTTP, with a warning). HTTPAllowRemote permits a
	// non-loopback address. HTTPSecureCookie marks the session cookie Secure (httpapi.Options.SecureCookie): only
	// the operator knows that browsers reach crewd over https, through a proxy in front of it. HTTPPublicURL is the
	// address browsers reach the dashboard at through that proxy ("": --http's), the base of every login link
	// (httpapi.Options.PublicURL), as httpapi.CheckPublicURL returns it.
	HTTPAddr         string
	HTTPAddrSet      bool
	HTTPAllowRemote  bool
	HTTPSecureCookie bool
	HTTPPublicURL    string

	// FollowPicrew is a pi-crew crew root to follow ("" for none): crewd runs the follower of migrations/picrew
	// against its own socket.
	FollowPicrew string

	// Warnings are problems that do not stop the daemon (an unreadable model catalog means an empty one); they
	// are logged once the logger exists.
	Warnings []string

	// serving, when set (MainServing), is given the engine and the log once the socket accepts connections.
	serving func(*commands.Engine, *eventlog.Log)
}

type kind int

const (
	kindString kind = iota
	kindBool
	kindInt
	kindDuration
	kindIntOrAuto // a number, or the word "auto" for a default that follows other settings
)

// option is one setting: a flag --name and the key "name" of the config file. def computes the default from the
// environment; it returns "" when there is none.
type option struct {
	name  string
	kind  kind
	arg   string // the value's placeholder in --help
	usage string
	def   func(Env) string
}

func fixed(s string) func(Env) string { return func(Env) string { return s } }

// maxQuota bounds the run quota knobs (2^40: a terabyte, a trillion events).
const maxQuota = 1 << 40

var options = []option{
	{"data", kindString, "DIR", "data directory: admin.token, server.key and the event store (store/)", DefaultDataDir},
	{"socket", kindString, "PATH", "unix socket path the broker listens on (a new directory is made 0700; an existing one others may reach is refused)", DefaultSocketPath},
	{"socket-group", kindString, "GROUP", "group (name or id) whose members may connect: the socket is made 0660 and a new directory 0750, with that group (default: only crewd's own user)", fixed("")},
	{"config", kindString, "FILE", "JSON file with any of these settings by flag name, each at most once (an unknown or repeated key is refused), e.g. {\"max-slots\": 4}; flags override it; a regular file of at most 1 MiB", fixed("")},
	{"picrew-config", kindString, "FILE", "a pi-crew config file (JSON) whose nesting.* and broker.* keys set --nesting, --max-depth, --max-slots, --wait-methods, --max-frame and --outbound-queue-cap; unknown keys are reported; --config and flags override it; a regular file of at most 1 MiB", fixed("")},
	{"nesting", kindBool, "[=BOOL]", "allow workers to delegate (nesting.enabled; off by default, as pi-crew ships)", fixed("false")},
	{"max-depth", kindInt, "N", fmt.Sprintf("deepest delegation depth, %d..%d (nesting.maxDepth)", commands.MinMaxDepth, commands.MaxMaxDepth), fixed("2")},
	{"wait-methods", kindBool, "[=BOOL]", "let workers park on questions with wait.request / wait.resolve (broker.waitMethodsEnabled; off by default, as pi-crew ships: refused policy-disabled with a policy.action event)", fixed("false")},
	{"max-slots", kindInt, "N", fmt.Sprintf("delegations in flight at once, %d..%d", commands.MinMaxSlots, commands.MaxMaxSlots), fixed("2")},
	{"serialize-on-path-overlap", kindBool, "[=BOOL]", "tolerate a write-capable delegation in the cwd of another running executor (off: refuse it, workspace-conflict)", fixed("false")},
	{"unmetered-delegates", kindString, "allow|deny", "admit delegations that no budget meters: allow or deny", fixed(events.UnmeteredAllow)},
	{"budget-mode", kindString, "picrew|nested", "how a delegation's grant is found: picrew (every task seeded with the run's budgetTotal) or nested (a grandchild's grant is its reservation; a run never spends more than budgetTotal)", fixed(events.BudgetModePicrew)},
	{"model-catalog", kindString, "FILE", "file of allowed models, one per line ('#' comments); absent: no model check; unreadable: every explicit model is denied", fixed("")},
	{"settle-grace", kindDuration, "DURATION", fmt.Sprintf("time after a delegation's timeout before the engine times it out, whole seconds, 0s..%ds", commands.MaxSettleGraceSec), fixed("30s")},
	{"slot-share", kindIntOrAuto, "N|auto", fmt.Sprintf("slots one run may hold while another run waits for one, and (--worker-slot-share) one worker of a run with its delegations while another task of its run waits, 0..%d (0: no share); auto: half of --max-slots, at least 1", commands.MaxMaxSlots), fixed("auto")},
	{"slot-wait", kindDuration, "DURATION", fmt.Sprintf("how long a run, or (--worker-slot-share) a task, refused a slot counts as waiting for one, whole seconds, 0s..%ds (0s: no fair slots)", commands.MaxSlotWaitSec), fixed(fmt.Sprintf("%ds", projections.DefaultSlotWaitSec))},
	{"quota-events", kindInt, "N", fmt.Sprintf("events one run may hold, 0..%d (0: no limit)", maxQuota), fixed(strconv.Itoa(projections.DefaultQuotaEvents))},
	{"quota-bytes", kindInt, "BYTES", fmt.Sprintf("bytes of text one run may hold (every string its events record: message bodies and subjects, ids, command ids), 0..%d (0: no limit)", maxQuota), fixed(strconv.Itoa(projections.DefaultQuotaBytes))},
	{"quota-msg-rate", kindInt, "N", fmt.Sprintf("messages one run may take per minute, 0..%d (0: no limit)", maxQuota), fixed(strconv.Itoa(projections.DefaultQuotaMsgsPerMin))},
	{"quota-reserve", kindInt, "PERCENT", fmt.Sprintf("percent of each run quota only the run's orchestrator and the admin may use, 0..%d: its workers together stop at the rest, so none of them can lock the orchestrator out of its run", commands.MaxQuotaReserve), fixed(strconv.Itoa(projections.DefaultQuotaReserve))},
	{"quota-worker-msg-share", kindInt, "PERCENT", fmt.Sprintf("percent of what a run's workers share of its message rate (the rate less the reserve) that any one worker may use, 0..%d (0 or %d: no share of its own), so one worker flooding its run cannot silence the others", commands.MaxQuotaWorkerMsgShare, commands.MaxQuotaWorkerMsgShare), fixed(strconv.Itoa(projections.DefaultQuotaWorkerMsgShare))},
	{"quota-worker-share", kindInt, "PERCENT", fmt.Sprintf("percent of what a run's workers share of its events quota and of its bytes quota (each quota less the reserve) that any one worker may have appended, 0..%d (0 or %d: no share of its own), so one worker flooding its run cannot leave the others refused quota-exceeded", commands.MaxQuotaWorkerShare, commands.MaxQuotaWorkerShare), fixed(strconv.Itoa(projections.DefaultQuotaWorkerShare))},
	{"share-by-delegator", kindBool, "[=BOOL]", "count what the worker of a delegation appends and sends, and the result delivered for it, for the shares (--quota-worker-share, --quota-worker-msg-share) of the workflow task whose delegation started it, so a worker cannot pass its share by delegating; false: each delegation's worker has a share of its own and a result counts for none, as in a log written before the knob", fixed("true")},
	{"worker-slot-share", kindBool, "[=BOOL]", "hold one worker of a run, with the delegations it started and theirs, to --slot-share slots while another task of its run waits for one (refused a slot within --slot-wait), so one worker cannot take every slot its run may hold; false: only runs share the pool, as in a log written before the knob", fixed("true")},
	{"max-frame", kindInt, "BYTES", fmt.Sprintf("broker frame cap in bytes, newline included, %d..%d", wire.MaxFrameFloor, wire.MaxFrameCeiling), fixed(strconv.Itoa(wire.DefaultMaxFrame))},
	{"outbound-queue-cap", kindInt, "N", fmt.Sprintf("frames queued per connection before a subscriber is resynced, %d..%d", minOutboundQueueCap, maxOutboundQueueCap), fixed(strconv.Itoa(defaultOutboundQueueCap))},
	{"min-free-mib", kindInt, "MIB", fmt.Sprintf("free space (MiB) the store's file system must keep: below it crewd does not start and answers writes disk-full, and refuses a checkpoint (crewctl backup) that would bring it there; 0 disables, 0..%d", maxMinFreeMiB), fixed("256")},
	{"retention", kindDuration, "DURATION", "how long a run that ended (completed, failed, cancelled) stays in memory after its last event; later it is read back from the store when asked for; 0s: it leaves memory at once", fixed(commands.DefaultRetention.String())},
	{"cache-mib", kindInt, "MIB", fmt.Sprintf("the store's block cache (MiB), 1..%d; with the memtables, most of crewd's memory outside the active runs", maxCacheMiB), fixed(strconv.Itoa(eventlog.DefaultCacheSize >> 20))},
	{"memtable-mib", kindInt, "MIB", fmt.Sprintf("the store's memtable size (MiB; two while one is flushed), 1..%d: larger ones flush and compact less often under write load, for more memory", maxCacheMiB), fixed(strconv.Itoa(eventlog.DefaultMemTableSize >> 20))},
	{"memory-mib", kindInt, "MIB", fmt.Sprintf("the resident memory (MiB) crewd aims to stay within, 0..%d: the Go heap's soft limit is what it leaves beside --cache-mib, three --memtable-mib (with cgo; without, they are on the Go heap) and %d MiB for the binary (at least %d MiB), or a quarter above the live heap when that is more; 0: no limit (GOMEMLIMIT, when set, overrides it)", maxMemoryMiB, memoryOverhead>>20, minGoMemoryLimit>>20), fixed(strconv.Itoa(DefaultMemoryMiB))},
	{"open-timeout", kindDuration, "DURATION", "longest time opening the store and rebuilding the state may take before crewd exits 1; 0s: no limit", fixed("2m")},
	{"follow-picrew", kindString, "DIR", "a pi-crew crew root (holding state/runs) to import and keep importing as pi-crew writes it, through crewd's own socket as the admin (crewctl import picrew DIR --follow inside crewd; docs/picrew.md)", fixed("")},
	{"http", kindString, "ADDR", "address of the dashboard and its read-only HTTP API (host:port); \"\" turns HTTP off", fixed(httpapi.DefaultAddr)},
	{"http-allow-remote", kindBool, "[=BOOL]", "allow --http on a non-loopback address (the API then answers other machines; put TLS in front)", fixed("false")},
	// NB: off by default, --http-allow-remote or not: a browser sends a Secure cookie over plain http to localhost at
	// most, so on by default it would sign no page in on a remote setup served plain; and a loopback crewd may have a
	// TLS proxy in front of it too.
	{"http-secure-cookie", kindBool, "[=BOOL]", "mark the dashboard's session cookie Secure (and name it __Host-…): pass it when browsers reach the dashboard over https, through a proxy in front that terminates TLS; over plain http a page of another machine cannot sign in with it", fixed("false")},
	// NB: no path prefix, and never taken from a request's Host or X-Forwarded-* headers (httpapi.CheckPublicURL).
	{"http-public-url", kindString, "URL", "the address browsers reach the dashboard at through a proxy in front of crewd, such as https://crew.example.com/: every login link crewd prints or hands out (dashboard.login, POST /api/v1/login) names it instead of --http's; an absolute http or https URL with no path but /, query, fragment nor user name (the proxy serves crewd at / of a host name or port of its own), https with --http-secure-cookie", fixed("")},
	{"log-level", kindString, "LEVEL", "debug, info, warn or error", fixed("info")},
	{"log-format", kindString, "FORMAT", "text or json (logs go to stderr)", fixed("text")},
}

// DefaultDataDir is crewd's data directory when --data is not given ("" when env names none). It follows the XDG
// base directory spec, which ignores relative values. crewctl uses it too, so both find the same store.
func DefaultDataDir(env Env) string {
	if d := env.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "crewlog")
	}
	if h := env.Getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "share", "crewlog")
	}
	return ""
}

// DefaultSocketPath is crewd's socket when --socket is not given (crewctl's default too): under the per-user
// runtime dir, else a per-user dir in the temp dir (as pi-crew's is, D§7.1), since a socket belongs on a file
// system that is cleared at boot.
func DefaultSocketPath(env Env) string {
	if d := env.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "crewlog", "crewd.sock")
	}
	tmp := env.Getenv("TMPDIR") // what os.TempDir reads on Unix
	if !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, fmt.Sprintf("crewlog-%d", env.UID), "crewd.sock")
}

// rawValue records a flag's text; every value is checked after parsing, so all problems are reported together.
type rawValue struct {
	kind kind
	set  bool
	text string
}

func (v *rawValue) String() string     { return v.text }
func (v *rawValue) Set(s string) error { v.set, v.text = true, s; return nil }
func (v *rawValue) IsBoolFlag() bool   { return v.kind == kindBool }

// Usage writes the --help text, with the defaults this environment gives.
func Usage(w io.Writer, env Env) {
	fmt.Fprint(w, `crewd: the crewlog daemon. It keeps the event log in <data>/store, serves the broker protocol on a
unix socket, and on first start writes a random admin token to <data>/admin.token and a server key to
<data>/server.key (both 0600; existing ones are reused, group- or world-readable ones refused).
On start it prints the admin token file (never the token), a one-time login link to the dashboard
(--http) and the socket path to stdout.
SIGINT or SIGTERM shuts it down gracefully. Exit status: 0 clean, 1 runtime error, 2 bad flags or config.

Usage: crewd [flags]

`)
	for _, o := range options {
		sep := " "
		if o.kind == kindBool {
			sep = ""
		}
		fmt.Fprintf(w, "  --%s%s%s\n      %s", o.name, sep, o.arg, o.usage)
		if d := o.def(env); d != "" {
			fmt.Fprintf(w, " (default %s)", d)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, `
Defaults: --data is $XDG_DATA_HOME/crewlog, else ~/.local/share/crewlog; --socket is
$XDG_RUNTIME_DIR/crewlog/crewd.sock, else $TMPDIR (or /tmp)/crewlog-<uid>/crewd.sock.
`)
}

// Load resolves the config from args (flags), the --config file and env. It returns ErrHelp for --help, and
// otherwise every problem found, joined, each starting with "daemon: ".
func Load(args []string, env Env) (Config, error) {
	fs := flag.NewFlagSet("crewd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	raws := make(map[string]*rawValue, len(options))
	for _, o := range options {
		raws[o.name] = &rawValue{kind: o.kind}
		fs.Var(raws[o.name], o.name, o.usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, ErrHelp
		}
		return Config{}, fmt.Errorf("daemon: %w", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("daemon: unexpected arguments %q", fs.Args())
	}

	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf("daemon: "+format, args...)) }
	// Each value remembers where it came from, so an error names the flag or the file key to fix.
	type value struct{ text, src string }
	vals := make(map[string]value, len(options))
	for _, o := range options {
		if r := raws[o.name]; r.set {
			vals[o.name] = value{r.text, "--" + o.name}
		}
	}
	var c Config
	if v, ok := vals["config"]; ok && v.text != "" {
		c.ConfigFile = absPath(v.text)
		fileVals, ferrs := readConfigFile(c.ConfigFile)
		errs = append(errs, ferrs...)
		for name, text := range fileVals {
			if _, byFlag := vals[name]; !byFlag {
				vals[name] = value{text, fmt.Sprintf("%s in %s", name, c.ConfigFile)}
			}
		}
	}
	if v, ok := vals["picrew-config"]; ok && v.text != "" {
		file := absPath(v.text)
		picrewVals, warnings, perrs := readPicrewConfig(file)
		errs = append(errs, perrs...)
		c.Warnings = append(c.Warnings, warnings...)
		for name, text := range picrewVals {
			if _, set := vals[name]; !set {
				vals[name] = value{text, fmt.Sprintf("%s (from %s)", name, file)}
			}
		}
	}
	for _, o := range options {
		if _, ok := vals[o.name]; !ok {
			vals[o.name] = value{o.def(env), "default --" + o.name}
		}
	}

	str := func(name string) (string, string) { v := vals[name]; return v.text, v.src }
	boolean := func(name string) bool {
		text, src := str(name)
		b, err := strconv.ParseBool(text)
		if err != nil {
			fail("%s: %q is not true or false", src, text)
		}
		return b
	}
	integer := func(name string, lo, hi int) int {
		text, src := str(name)
		n, err := strconv.Atoi(text)
		switch {
		case err != nil:
			fail("%s: %q is not an integer", src, text)
		case n < lo || n > hi:
			fail("%s: %d is outside %d..%d", src, n, lo, hi)
		}
		return n
	}
	duration := func(name string) time.Duration {
		text, src := str(name)
		d, err := time.ParseDuration(text)
		switch {
		case err != nil:
			fail("%s: %q is not a duration (e.g. 2m)", src, text)
		case d < 0:
			fail("%s: %s is negative", src, d)
		}
		return d
	}
	oneOf := func(name string, allowed ...string) string {
		text, src := str(name)
		for _, a := range allowed {
			if text == a {
				return text
			}
		}
		fail("%s: %q is not one of %s", src, text, strings.Join(allowed, ", "))
		return text
	}
	path := func(name string) string {
		text, src := str(name)
		if text == "" {
			fail("%s: a path is required (no default applies: set $HOME or pass the flag)", src)
			return ""
		}
		return absPath(text)
	}

	c.DataDir = path("data")
	c.SocketPath = path("socket")
	if text, _ := str("follow-picrew"); text != "" {
		c.FollowPicrew = absPath(text)
	}
	if len(c.SocketPath) > maxSocketPath {
		_, src := str("socket")
		fail("%s: %q is %d bytes; a unix socket path is at most %d", src, c.SocketPath, len(c.SocketPath), maxSocketPath)
	}
	c.Engine = projections.Config{
		NestingEnabled:         boolean("nesting"),
		MaxDepth:               integer("max-depth", commands.MinMaxDepth, commands.MaxMaxDepth),
		MaxSlots:               integer("max-slots", commands.MinMaxSlots, commands.MaxMaxSlots),
		SerializeOnPathOverlap: boolean("serialize-on-path-overlap"),
		UnmeteredDelegates:     oneOf("unmetered-delegates", events.UnmeteredAllow, events.UnmeteredDeny),
		BudgetMode:             oneOf("budget-mode", events.BudgetModePicrew, events.BudgetModeNested),
		WaitMethodsEnabled:     boolean("wait-methods"),
	}
	seconds := func(name string, maxSec int) int {
		text, src := str(name)
		d, err := time.ParseDuration(text)
		switch {
		case err != nil:
			fail("%s: %q is not a duration (e.g. 30s)", src, text)
		case d%time.Second != 0:
			fail("%s: %s is not a whole number of seconds", src, d)
		case d < 0 || d > time.Duration(maxSec)*time.Second:
			fail("%s: %s is outside 0s..%ds", src, d, maxSec)
		}
		return int(d / time.Second)
	}
	c.Engine.SettleGraceSec = seconds("settle-grace", commands.MaxSettleGraceSec)
	if text, _ := str("slot-share"); text == "auto" {
		c.Engine.SlotShare = projections.DefaultSlotShare(c.Engine.MaxSlots)
	} else {
		c.Engine.SlotShare = integer("slot-share", 0, commands.MaxMaxSlots)
	}
	c.Engine.SlotWaitSec = seconds("slot-wait", commands.MaxSlotWaitSec)
	c.Engine.QuotaEvents = int64(integer("quota-events", 0, maxQuota))
	c.Engine.QuotaBytes = int64(integer("quota-bytes", 0, maxQuota))
	c.Engine.QuotaMsgsPerMin = integer("quota-msg-rate", 0, maxQuota)
	c.Engine.QuotaReserve = integer("quota-reserve", 0, commands.MaxQuotaReserve)
	c.Engine.QuotaWorkerMsgShare = integer("quota-worker-msg-share", 0, commands.MaxQuotaWorkerMsgShare)
	c.Engine.QuotaWorkerShare = integer("quota-worker-share", 0, commands.MaxQuotaWorkerShare)
	// NB: a rule, not a choice: a knob only so that engine.configured records when it came into force, and replay
	// decides a settlement of a log written before it as it was decided.
	c.Engine.RerouteEndedAttempts = true
	c.Engine.ShareByDelegator = boolean("share-by-delegator")
	c.Engine.WorkerSlotShare = boolean("worker-slot-share")
	if text, _ := str("model-catalog"); text != "" {
		c.ModelCatalogFile = absPath(text)
		catalog, err := readModelCatalog(c.ModelCatalogFile)
		if err != nil {
			// Fail closed (D§4.5): a catalog that was asked for but cannot be read denies every explicit model.
			c.Warnings = append(c.Warnings, fmt.Sprintf("model catalog unreadable, every explicit model is denied: %v", err))
		}
		c.Engine.ModelCatalog = catalog
	}
	c.MaxFrame = integer("max-frame", wire.MaxFrameFloor, wire.MaxFrameCeiling)
	c.MinFreeBytes = uint64(integer("min-free-mib", 0, maxMinFreeMiB)) << 20
	c.OpenTimeout = duration("open-timeout")
	c.Retention = duration("retention")
	c.CacheBytes = int64(integer("cache-mib", 1, maxCacheMiB)) << 20
	c.MemTableBytes = uint64(integer("memtable-mib", 1, maxCacheMiB)) << 20
	c.MemoryBytes = int64(integer("memory-mib", 0, maxMemoryMiB)) << 20
	if text, src := str("socket-group"); text != "" {
		gid, err := lookupGroup(text)
		switch {
		case err != nil:
			fail("%s: %v", src, err)
		case gid == 0:
			fail("%s: %q is root's group, which needs no grant; name the group the workers are in", src, text)
		}
		c.SocketGroup = gid
	}
	c.OutboundQueueCap = integer("outbound-queue-cap", minOutboundQueueCap, maxOutboundQueueCap)
	c.Limits = loadLimits(c.MaxFrame, integer, duration, str, fail)
	c.Store, c.Cluster = loadCluster(integer, duration, boolean, str, fail)
	switch oneOf("log-level", "debug", "info", "warn", "error") {
	case "debug":
		c.LogLevel = slog.LevelDebug
	case "warn":
		c.LogLevel = slog.LevelWarn
	case "error":
		c.LogLevel = slog.LevelError
	default:
		c.LogLevel = slog.LevelInfo
	}
	c.LogFormat = oneOf("log-format", "text", "json")
	c.HTTPAllowRemote = boolean("http-allow-remote")
	c.HTTPSecureCookie = boolean("http-secure-cookie")
	if text, src := str("http-public-url"); text != "" {
		base, err := httpapi.CheckPublicURL(text, c.HTTPSecureCookie)
		if err != nil {
			fail("%s: %v", src, err)
		}
		c.HTTPPublicURL = base
	}
	c.HTTPAddr, _ = str("http")
	c.HTTPAddrSet = !strings.HasPrefix(vals["http"].src, "default ")
	if c.HTTPAddr != "" {
		_, src := str("http")
		if err := httpapi.CheckAddr(c.HTTPAddr, c.HTTPAllowRemote); err != nil {
			fail("%s: %v", src, err)
		}
	}

	if len(errs) == 0 {
		// The engine's own check as a backstop: it also vets the catalog's entries.
		if err := commands.ValidateConfig(c.Engine); err != nil {
			fail("engine config: %w", err)
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// absPath makes p absolute, so the paths crewd prints and uses do not depend on where it was started from.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// readConfigFile returns the settings of a config file as flag texts, checking each key's JSON type against its
// option. Every problem is returned.
func readConfigFile(path string) (map[string]string, []error) {
	data, err := readSettingsFile("config file", path)
	if err != nil {
		return nil, []error{err}
	}
	fields, duplicates, err := decodeObject(data)
	if err != nil {
		return nil, []error{fmt.Errorf("daemon: config file %s: %w", path, err)}
	}
	var errs []error
	for _, key := range duplicates {
		errs = append(errs, fmt.Errorf("daemon: config file %s: duplicate key %q", path, key))
	}
	out := make(map[string]string, len(fields))
	for _, key := range slices.Sorted(maps.Keys(fields)) { // the same file is refused with the same text every time
		raw := fields[key]
		o, ok := lookupOption(key)
		if !ok || key == "config" || key == "picrew-config" {
			errs = append(errs, fmt.Errorf("daemon: config file %s: unknown key %q", path, key))
			continue
		}
		text, err := jsonText(o.kind, raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("daemon: config file %s: %s: %w", path, key, err))
			continue
		}
		out[key] = text
	}
	return out, errs
}

func lookupOption(name string) (option, bool) {
	for _, o := range options {
		if o.name == name {
			return o, true
		}
	}
	return option{}, false
}

// jsonText turns a config file value into the text its flag would have: booleans must be JSON booleans, integers
// JSON numbers, strings JSON strings; a duration is a string ("30s") or a number of seconds.
func jsonText(k kind, raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case bool:
		if k == kindBool {
			return strconv.FormatBool(x), nil
		}
	case float64:
		switch k {
		case kindInt, kindIntOrAuto:
			return string(raw), nil
		case kindDuration:
			return string(raw) + "s", nil
		}
	case string:
		if k == kindString || k == kindDuration || k == kindIntOrAuto && x == "auto" {
			return x, nil
		}
	}
	want := map[kind]string{kindBool: "a boolean", kindInt: "a number", kindString: "a string",
		kindDuration: `a string like "30s" or a number of seconds`, kindIntOrAuto: `a number or "auto"`}[k]
	return "", fmt.Errorf("must be %s", want)
}

// lookupGroup resolves a group name or numeric id to a gid.
func lookupGroup(name string) (int, error) {
	if gid, err := strconv.Atoi(name); err == nil {
		// NB: a gid is 32 bits, and the kernel reads a larger one modulo 2^32 (2^32 is root's group) and
		// (gid_t)-1 as leaving the group as it is (crewd's own, with the socket made 0660).
		if gid < 0 || gid >= math.MaxUint32 {
			return 0, fmt.Errorf("%d is not a group id", gid)
		}
		return gid, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}

// readModelCatalog reads one model per line; blank lines and lines starting with '#' are skipped. On error it
// returns an empty, non-nil catalog: a configured catalog that cannot be read denies every explicit model.
func readModelCatalog(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return []string{}, err
	}
	defer f.Close()
	catalog := []string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		catalog = append(catalog, line)
	}
	if err := sc.Err(); err != nil {
		return []string{}, err
	}
	return catalog, nil
}
