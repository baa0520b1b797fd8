package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
)

// stdio is where a command writes.
type stdio struct {
	out io.Writer
	err io.Writer
}

// app is the state shared by the command tree: global flags and how to
// reach the daemon.
type app struct {
	io        stdio
	dial      dialer
	dataDir   string
	socket    string
	tokenFile string
	json      bool
	nats      streamFlags
	// storeOpts are the options open (a.open) opens the store read-only with (nil: defaults); a test sets a file
	// system that injects faults.
	storeOpts *eventlog.Options
	// now reads the clock that names migrate's backups (nil: time.Now); a test freezes it.
	now func() time.Time
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, io stdio, dial dialer) int {
	return (&app{io: io, dial: dial}).run(ctx, args)
}

// clock is the time now.
func (a *app) clock() time.Time {
	if a.now == nil {
		return time.Now()
	}
	return a.now()
}

func (a *app) run(ctx context.Context, args []string) int {
	// A store, data directory, backup or secret crewctl creates is for its user alone, as crewd's are
	// (crewd refuses a data directory or store that others may reach), whatever umask it was started with.
	syscall.Umask(0o077)
	out := &output{w: a.io.out}
	a.io.out = out
	root := a.root()
	root.SetArgs(args)
	root.SetOut(a.io.out)
	root.SetErr(a.io.err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		if werr := out.failed(); werr != nil {
			err = problemf("write output: %v", werr)
		}
	}
	if err == nil {
		return exitOK
	}
	// NB: the error may quote what the store or the daemon holds, so it is printed escaped, on one line.
	stderr := screen{a.io.err}
	stderr.printf("%s\n", err)
	var ee *exitError
	isExit := errors.As(err, &ee)
	if isExit && ee.hint != "" {
		stderr.printf("  %s\n", ee.hint)
	}
	code := codeOf(err)
	if code == exitUsage && !isExit {
		stderr.printf("Run 'crewctl --help' for usage.\n")
	}
	return code
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "crewctl",
		Short: "Inspect and operate a crewlog store and its daemon",
		Long: `crewctl inspects and operates crewlog.

Offline (reads the store directly, read-only; the daemon must not hold it):
  replay, verify, restore
Offline, writing (the daemon must not hold the store):
  migrate, import picrew, migrate-store (Pebble store <-> JetStream stream)
Live (asks crewd over its socket with the admin token):
  runs, show run, tasks, delegations, ledger, slots, events, jobs, show job,
  dashboard (a one-time login link to crewd's dashboard)
Live, writing (with the admin token):
  cancel, import picrew --follow
Either: backup (a checkpoint through crewd when it answers, else offline)
Either, writing <data>/readonly.tokens: token create --read-only, token list,
  token revoke (read-only tokens of the dashboard's HTTP API)

Exit codes: 0 ok, 1 problem found (corruption, broken invariant, policy
drift, differences, runs an import left unread) or output that could not
be written, 2 usage error, 3 cannot open or read the store, reach crewd,
or crewd could not read its own (replay-failed).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// NB: an empty socket would be dialled as given, and backup would take it for a crewd not running.
			if cmd.Flags().Changed("socket") && a.socket == "" {
				return usagef("--socket: a path is required")
			}
			return a.checkStreamFlags(cmd)
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("%v", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&a.dataDir, "data", defaultDataDir(), "crewd's data directory (the store)")
	pf.StringVar(&a.socket, "socket", defaultSocket(), "crewd's unix socket")
	pf.StringVar(&a.tokenFile, "token-file", "", "admin token file (default <data>/admin.token)")
	pf.BoolVar(&a.json, "json", false, "print JSON for scripts instead of text")
	pf.StringVar(&a.nats.urls, "nats", "", "NATS URL[,URL] of a JetStream cluster: verify, replay and backup read "+
		"the stream instead of --data's store, migrate-store moves a log to or from it; other commands refuse it")
	pf.StringVar(&a.nats.creds, "nats-creds", "", "NATS credentials file for --nats (refused without it)")
	pf.StringVar(&a.nats.stream, "stream", "CREWLOG",
		"the JetStream stream holding the log (with --nats; refused without it)")
	root.AddCommand(a.replayCmd(), a.verifyCmd(), a.backupCmd(), a.restoreCmd(),
		a.runsCmd(), a.showCmd(), a.tasksCmd(), a.delegationsCmd(), a.ledgerCmd(), a.slotsCmd(), a.eventsCmd(), a.jobsCmd(),
		a.dashboardCmd(),
		a.cancelCmd(), a.migrateCmd(), a.migrateStoreCmd(), a.importCmd(), a.tokenCmd())
	return root
}

// args validates positional arguments as a usage error.
func args(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, got []string) error {
		if len(got) != n {
			return usagef("expected %s, got %d argument(s)", names, len(got))
		}
		return nil
	}
}

// runFlagOnly refuses positional arguments of a command that takes its run as --run: tasks, jobs and show run take
// it as an argument, so the run typed as one here is the likely slip, and the error shows the command as it should
// have been typed rather than only counting its arguments.
func runFlagOnly(command string) cobra.PositionalArgs {
	return func(_ *cobra.Command, got []string) error {
		switch len(got) {
		case 0:
			return nil
		case 1:
			return usagef("%s takes the run as a flag, not an argument: crewctl %s --run %s", command, command,
				printable(got[0]))
		default:
			return usagef("%s takes no arguments (the run is --run ID), got %d", command, len(got))
		}
	}
}

// open opens the store read-only, mapping failures to exit codes: a
// damaged store is a finding (1), anything else means it cannot be read (3).
func (a *app) open(dir string) (*eventlog.Log, error) {
	if dir == "" {
		return nil, usagef("no data directory: pass --data")
	}
	l, err := audit.OpenWith(dir, a.storeOpts)
	if err == nil {
		return l, nil
	}
	var ce *eventlog.CorruptError
	if errors.As(err, &ce) {
		return nil, problemf("store %s is corrupt: %w", dir, err)
	}
	if errors.Is(err, audit.ErrLocked) {
		return nil, hinted(openErr(fmt.Errorf("crewctl: %w", err)),
			"crewd is running on this store; stop it, or run this command on a backup (crewctl backup takes one "+
				"through crewd)")
	}
	return nil, openErr(fmt.Errorf("crewctl: %w", err))
}

// tokenPath is the admin token file crewctl sends: --token-file, else <data>/admin.token ("" with neither).
func (a *app) tokenPath() string {
	if a.tokenFile != "" || a.dataDir == "" {
		return a.tokenFile
	}
	return filepath.Join(a.dataDir, adminTokenFile)
}

// token returns the admin token from --token-file or <data>/admin.token.
func (a *app) token() (string, error) {
	path := a.tokenPath()
	if path == "" {
		return "", usagef("no admin token file: pass --token-file or --data")
	}
	tok, err := readToken(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", hinted(openErr(err), "crewd writes admin.token into its data directory at first start and prints "+
			"the file's path (crewd: admin token file …): name that directory with --data, or the file with --token-file")
	}
	if err != nil {
		return "", openErr(err)
	}
	return tok, nil
}

// connect dials crewd with the admin token.
func (a *app) connect(ctx context.Context) (Broker, error) {
	tok, err := a.token()
	if err != nil {
		return nil, err
	}
	b, err := a.dial(ctx, a.socket, tok)
	if err != nil {
		return nil, a.unreachedErr("", err)
	}
	return b, nil
}

// unreachedErr is the error of a connection to crewd that failed with err, what naming the command ("" for a view).
// A hello crewd refuses as auth is, as a rule, the token of another data directory: crewd started with --data DIR and
// crewctl run without it sends the default one's. A socket that is missing or that nothing listens at is crewd not
// started, stopped, or started with another --socket. The hint names the flag that chooses each, which a bare "hello
// rejected" or "connect: no such file or directory" leaves the operator to guess.
func (a *app) unreachedErr(what string, err error) error {
	e := openErr(fmt.Errorf("crewctl: %sconnect to crewd at %s: %w", what, a.socket, err))
	switch {
	case wire.CodeOf(err) == wire.CodeAuth:
		return hinted(e, fmt.Sprintf("crewd refused the admin token in %s, most likely another crewd's: name this "+
			"crewd's data directory with --data (or its token file with --token-file)", a.tokenPath()))
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return hinted(e, fmt.Sprintf("no crewd listens at %s: start crewd, or pass the --socket it printed at start "+
			"(crewd: socket …)", a.socket))
	}
	return e
}

// call runs one broker call; its error exits as brokerErr says.
func call(ctx context.Context, b Broker, method string, params, result any) error {
	if err := b.Call(ctx, method, params, result); err != nil {
		return brokerErr(method, err)
	}
	return nil
}

// stdout is where a command prints for a person.
func (a *app) stdout() screen { return screen{a.io.out} }

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.io.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return problemf("encode output: %v", err)
	}
	return nil
}
