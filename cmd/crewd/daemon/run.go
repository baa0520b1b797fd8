package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/httpapi"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// Exit statuses of Main.
const (
	ExitOK      = 0 // clean shutdown, or --help
	ExitRuntime = 1 // the daemon could not start or failed while running
	ExitUsage   = 2 // bad flags or config
)

// Main is crewd: it parses args, runs the daemon until SIGINT or SIGTERM and returns the exit status. stdout gets
// the start-up lines (and --help), stderr the logs.
func Main(args []string, stdout, stderr io.Writer) int {
	return MainServing(context.Background(), args, stdout, stderr, nil)
}

// MainServing is Main for a program that runs crewd in a process of its own and reads its engine's counters, as
// crewbench's socket cells do, so that what they time is crewd as it ships — its flags and defaults, its memory
// limit, its free-space guard, its collections after a snapshot, its dashboard. serving, when not nil, is called
// once the socket accepts connections, before the socket's line is printed, with the engine and the log, which stay
// open until MainServing returns. crewd stops, as on SIGTERM, when ctx ends.
func MainServing(ctx context.Context, args []string, stdout, stderr io.Writer,
	serving func(*commands.Engine, *eventlog.Log)) int {
	// Everything crewd creates — the store, secrets, checkpoints, the socket — is for its own user: no file starts
	// out readable by others, whatever umask it was started with. The socket group is granted explicitly.
	syscall.Umask(0o077)
	limitMallocArenas()
	env := OSEnv()
	cfg, err := Load(args, env)
	switch {
	case errors.Is(err, ErrHelp):
		// NB: a help that could not be written (a full disk, a closed pipe) is no success: a script that saves it
		// learns it has nothing. It is written in one go, so that one write's error is the help's.
		var help bytes.Buffer
		Usage(&help, env)
		if _, err := stdout.Write(help.Bytes()); err != nil {
			fmt.Fprintln(stderr, "crewd: write the help:", err)
			return ExitRuntime
		}
		return ExitOK
	case err != nil:
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, "daemon: run crewd --help for the flags")
		return ExitUsage
	}
	cfg.serving = serving
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, give the signals back to their default action, so a second one ends a
		// shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	lg := NewLogger(stderr, cfg)
	applyMemoryLimit(ctx, cfg, env.Getenv, lg)
	if err := Run(ctx, cfg, stdout, lg); err != nil {
		fmt.Fprintln(stderr, err)
		return ExitRuntime
	}
	return ExitOK
}

// NewLogger returns the daemon's logger: text or JSON lines on w at cfg's level.
func NewLogger(w io.Writer, cfg Config) *slog.Logger {
	ho := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// failDrain is how long a daemon whose engine failed keeps answering reads before it exits.
const failDrain = 2 * time.Second

// storeOptions is storeFaults; tests replace it to put the store on a file system that fails as they need, which no
// disk does on demand.
var storeOptions = storeFaults

// errOpenTimeout is the cause of an open that outlived cfg.OpenTimeout.
var errOpenTimeout = errors.New("open timeout reached (--open-timeout)")

// Run starts the daemon of cfg and serves until ctx ends, then shuts down in order: the pi-crew follower
// (--follow-picrew) sends what it has read and its checkpoints, the broker stops accepting and closes its
// connections, the engine finishes the group it is committing, the log closes. It prints the
// admin token file (never the token), the dashboard's one-time login link (when HTTP is on) and, last, the socket
// path to stdout once the socket accepts connections.
//
// It refuses to start on a data directory that others may reach, on one that is a store itself
// (checkNotABareStore), on one where a crewctl copy of a store did not finish (checkNoUnfinishedCopy), or with less
// free space than cfg.MinFreeBytes.
// Opening the store and rebuilding the state end early, with an error, when ctx ends or cfg.OpenTimeout passes.
// If a commit error stops the engine, Run answers reads for failDrain, shuts down and returns an error wrapping
// commands.ErrFailed, so the process exits non-zero and its supervisor restarts it; once the log failed stop, it
// waits for the engine and the log to close at most failedStoreClose (closeStore).
func Run(ctx context.Context, cfg Config, stdout io.Writer, lg *slog.Logger) (err error) {
	for _, w := range cfg.Warnings {
		lg.Warn(w)
	}
	storeDir := filepath.Join(cfg.DataDir, StoreDir)
	if err := MakePrivateDir(cfg.DataDir); err != nil {
		return err
	}
	// No store: a new one is made here, unless the directory is not for one.
	var dirLock io.Closer
	defer func() {
		if dirLock != nil {
			dirLock.Close()
		}
	}()
	if _, err := os.Lstat(storeDir); err != nil {
		// NB: under the data directory's lock, which a crewctl copy into it takes to claim it, until the admin.token
		// and server.key below are made: a restore that claimed the directory right after the check found no copy
		// went on beside this crewd, which served a new, empty store, and could take out a server.key crewd had read.
		if dirLock, err = eventlog.LockDir(cfg.DataDir); err != nil {
			return err
		}
		if err := checkNotABareStore(cfg.DataDir); err != nil {
			return err
		}
		if err := checkNoUnfinishedCopy(cfg.DataDir); err != nil {
			return err
		}
	}
	if err := checkPrivateDir(storeDir); err != nil {
		return err
	}
	// NB: the store's file system, where Pebble writes: a store may be a symbolic link to another one than the data
	// directory's. A new store is made in the data directory.
	spaceDir := storeDir
	if _, err := os.Stat(storeDir); errors.Is(err, fs.ErrNotExist) {
		spaceDir = cfg.DataDir
	}
	space, err := newSpaceGuard(spaceDir, cfg.MinFreeBytes, lg.With("component", "space"))
	if err != nil {
		return err
	}
	if err := space.CheckSpace(); err != nil {
		// NB: before Pebble opens: on a full disk its recovery flush fails and is retried forever.
		return fmt.Errorf("daemon: disk-full: %w; free space or lower --min-free-mib, then start again", err)
	}
	if cfg.FollowPicrew != "" {
		if err := checkPicrewRoot(cfg.FollowPicrew); err != nil {
			return err
		}
	}
	token, err := AdminToken(cfg.DataDir)
	if err != nil {
		return err
	}
	key, err := ServerKey(cfg.DataDir)
	if err != nil {
		return err
	}
	if dirLock != nil {
		dirLock.Close()
		dirLock = nil
	}
	session, err := randomBytes(4)
	if err != nil {
		return err
	}

	openCtx, cancelOpen := ctx, context.CancelFunc(func() {})
	if cfg.OpenTimeout > 0 {
		openCtx, cancelOpen = context.WithTimeoutCause(ctx, cfg.OpenTimeout, errOpenTimeout)
	}
	defer cancelOpen()
	log, err := Interruptible(openCtx, "open the event log", func() (*eventlog.Log, error) {
		opts := &eventlog.Options{Logger: lg.With("component", "eventlog"), CacheSize: cfg.CacheBytes,
			MemTableSize: cfg.MemTableBytes}
		storeOptions(opts)
		l, err := eventlog.Open(storeDir, opts)
		if err != nil {
			return nil, openError(cfg.DataDir, err)
		}
		return l, nil
	}, func(l *eventlog.Log) { l.Close() })
	if err != nil {
		return err
	}
	// logInUse is set when the engine's open was given up while it may still read the log: closing the log under
	// a reader is not allowed, so the abandoned open closes it when it ends (the process is exiting anyway).
	logInUse := false
	storeClosed := false // set once closeStore took the log's close over
	defer func() {
		if logInUse || storeClosed {
			return
		}
		if cerr := log.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("daemon: close the event log: %w", cerr)
		}
	}()
	head, _ := log.Head()
	lg.Info("event log open", "dir", storeDir, "head", head)

	engineConfig := cfg.Engine
	metrics := httpapi.NewMetrics()
	// clustered is set when crewd runs as one of a JetStream cluster's crewds (--store jetstream).
	var clustered *clusterEngine
	eng, err := Interruptible(openCtx, "open the engine", func() (*commands.Engine, error) {
		opts := commands.Options{Config: &engineConfig, Logger: lg.With("component", "engine"),
			Observer: engineObserver{metrics}, Retention: cfg.Retention, Clock: engineClock()}
		if cfg.Retention == 0 {
			opts.Retention = -1 // commands.Options reads 0 as its default
		}
		if cfg.MinFreeBytes > 0 {
			opts.Space = space
		}
		if cfg.Store == StoreJetStream {
			c, err := openClusterEngine(openCtx, cfg.Cluster, log, opts, cfg.MaxFrame, lg)
			if err != nil {
				return nil, err
			}
			clustered = c
			return c.node.Engine(), nil
		}
		e, err := commands.Open(log, opts)
		if err != nil {
			return nil, fmt.Errorf("daemon: open the engine: %w", err)
		}
		return e, nil
	}, func(e *commands.Engine) {
		if clustered != nil {
			clustered.Close()
		}
		e.Close()
		log.Close()
	})
	if errors.Is(err, ErrGaveUp) {
		logInUse = true
	}
	if err != nil {
		return err
	}
	cancelOpen()
	releaseStartup()
	// NB: deferred after the log's close, so it runs first: the engine finishes its group before the log closes.
	defer func() {
		storeClosed = true
		if cerr := closeStore(clustered, eng, log, lg); cerr != nil && err == nil {
			err = cerr
		}
	}()
	// failed is closed when crewd must exit for its supervisor to restart it; failure says why.
	failed, failure := eng.Failed(), eng.Err
	if clustered != nil {
		// A crewd in a cluster also stops when it is fenced or loses the writer lease: it restarts as a follower.
		failed, failure = clustered.node.Failed(), clustered.node.Err
		lg.Info("joined the cluster", "stream", cfg.Cluster.Stream, "node", cfg.Cluster.Name,
			"sequence", clustered.node.Sequence())
	}

	adminDigest := Digest(token)
	bopts := broker.Options{
		SocketPath:       cfg.SocketPath,
		SocketGroup:      cfg.SocketGroup,
		AdminDigest:      adminDigest,
		ServerKey:        key,
		MaxFrame:         cfg.MaxFrame,
		OutboundQueueCap: cfg.OutboundQueueCap,
		SessionID:        fmt.Sprintf("crewd-%x", session),
		Logger:           lg.With("component", "broker"),
	}
	// NB: the dashboard starts after the socket (it reads the broker's stats), so dashboard.login finds it here.
	var dashboard atomic.Pointer[httpapi.Server]
	bopts.DashboardLogin = func() (string, time.Time, bool) {
		web := dashboard.Load()
		if web == nil {
			return "", time.Time{}, false
		}
		url, exp := web.AdminLoginURL()
		return url, exp, true
	}
	cfg.Limits.apply(&bopts)
	srv, err := broker.New(eng, log, bopts)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	defer srv.Close()
	if err := srv.Listen(); err != nil {
		if errors.Is(err, broker.ErrAlreadyServing) {
			return fmt.Errorf("daemon: another crewd (or another broker) already listens at %s: stop it first, or "+
				"start this crewd with another --socket: %w", bopts.SocketPath, err)
		}
		return fmt.Errorf("daemon: %w", err)
	}
	notReady := func() string {
		err := failure()
		if err == nil {
			// NB: a cluster node learns of its engine's failure on a goroutine of its own: until then, the engine's.
			err = eng.Err()
		}
		if err != nil {
			return failureLine(err, eng.Cause())
		}
		return ""
	}
	web, err := startHTTP(cfg, eng, log, srv, metrics, adminDigest, notReady, lg)
	if err != nil {
		return err
	}
	if web != nil {
		defer web.Close()
		dashboard.Store(web)
	}
	// NB: the socket line comes last: scripts and tests take it as the sign that crewd accepts connections.
	fmt.Fprintf(stdout, "crewd: admin token file %s\n", filepath.Join(cfg.DataDir, AdminTokenFile))
	if web != nil {
		login, _ := web.LoginURL()
		fmt.Fprintf(stdout, "crewd: dashboard %s\n", login)
	}
	if cfg.serving != nil {
		cfg.serving(eng, log)
	}
	fmt.Fprintf(stdout, "crewd: socket %s\n", srv.Addr())
	catalog := "none"
	if engineConfig.ModelCatalog != nil {
		catalog = fmt.Sprintf("%d models", len(engineConfig.ModelCatalog))
	}
	lg.Info("serving", "socket", srv.Addr(), "nesting", engineConfig.NestingEnabled, "maxDepth", engineConfig.MaxDepth,
		"maxSlots", engineConfig.MaxSlots, "serializeOnPathOverlap", engineConfig.SerializeOnPathOverlap,
		"unmeteredDelegates", engineConfig.UnmeteredDelegates, "budgetMode", engineConfig.BudgetMode,
		"modelCatalog", catalog,
		"settleGraceSec", engineConfig.SettleGraceSec, "slotShare", engineConfig.SlotShare,
		"slotWaitSec", engineConfig.SlotWaitSec, "quotaEvents", engineConfig.QuotaEvents,
		"quotaBytes", engineConfig.QuotaBytes, "quotaMsgsPerMin", engineConfig.QuotaMsgsPerMin,
		"quotaReserve", engineConfig.QuotaReserve, "quotaWorkerMsgShare", engineConfig.QuotaWorkerMsgShare,
		"quotaWorkerShare", engineConfig.QuotaWorkerShare, "shareByDelegator", engineConfig.ShareByDelegator,
		"workerSlotShare", engineConfig.WorkerSlotShare)
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	if mallocTrims {
		go trimMallocUntil(serveCtx)
	}
	go func() {
		select {
		case <-failed:
			lg.Error(failureLine(failure(), eng.Cause()), "err", failure(), "drain", failDrain)
			select {
			case <-time.After(failDrain):
			case <-serveCtx.Done():
			}
			stopServing()
		case <-serveCtx.Done():
		}
	}()
	if web != nil {
		go func() {
			if err := web.Serve(serveCtx); err != nil {
				lg.Error("the dashboard's HTTP server stopped", "err", err)
			}
		}()
	}
	brokerCtx := serveCtx
	if cfg.FollowPicrew != "" {
		// NB: its stop may be called twice, and at once: here and from the AfterFunc below.
		stopFollow := followPicrew(serveCtx, cfg.FollowPicrew, srv.Addr(), token, cfg.MaxFrame,
			lg.With("component", "picrew-follow"))
		defer stopFollow()
		// NB: the broker serves until the follower has stopped: the follower sends the writes it has read and where
		// it got to in each file as it stops, through the broker, which Serve closes as soon as its context ends.
		var stopBroker context.CancelFunc
		brokerCtx, stopBroker = context.WithCancel(context.WithoutCancel(serveCtx))
		defer stopBroker()
		defer context.AfterFunc(serveCtx, func() {
			stopFollow()
			stopBroker()
		})()
	}
	if err := srv.Serve(brokerCtx); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if err := failure(); err != nil {
		return fmt.Errorf("daemon: exiting: %w", err)
	}
	lg.Info("shutting down")
	return nil
}
