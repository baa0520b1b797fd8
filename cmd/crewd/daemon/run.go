package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/crewlog/crewlog/broker"
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
	env := OSEnv()
	cfg, err := Load(args, env)
	switch {
	case errors.Is(err, ErrHelp):
		Usage(stdout, env)
		return ExitOK
	case err != nil:
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, "daemon: run crewd --help for the flags")
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, give the signals back to their default action, so a second one ends a
		// shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	if err := Run(ctx, cfg, stdout, NewLogger(stderr, cfg)); err != nil {
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

// Run starts the daemon of cfg and serves until ctx ends, then shuts down in order: the broker stops accepting
// and closes its connections, the engine finishes the group it is committing, the log closes. It prints the
// socket path and the admin token file (never the token) to stdout once the socket accepts connections.
func Run(ctx context.Context, cfg Config, stdout io.Writer, lg *slog.Logger) (err error) {
	for _, w := range cfg.Warnings {
		lg.Warn(w)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("daemon: data directory: %w", err)
	}
	token, err := AdminToken(cfg.DataDir)
	if err != nil {
		return err
	}
	key, err := ServerKey(cfg.DataDir)
	if err != nil {
		return err
	}
	session, err := randomBytes(4)
	if err != nil {
		return err
	}

	log, err := eventlog.Open(filepath.Join(cfg.DataDir, StoreDir), &eventlog.Options{Logger: lg.With("component", "eventlog")})
	if err != nil {
		return openError(cfg.DataDir, err)
	}
	defer func() {
		if cerr := log.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("daemon: close the event log: %w", cerr)
		}
	}()
	head, _ := log.Head()
	lg.Info("event log open", "dir", filepath.Join(cfg.DataDir, StoreDir), "head", head)

	engineConfig := cfg.Engine
	eng, err := commands.Open(log, commands.Options{Config: &engineConfig, Logger: lg.With("component", "engine")})
	if err != nil {
		return fmt.Errorf("daemon: open the engine: %w", err)
	}
	// NB: deferred after the log's close, so it runs first: the engine finishes its group before the log closes.
	defer eng.Close()

	srv, err := broker.New(eng, log, broker.Options{
		SocketPath:       cfg.SocketPath,
		AdminDigest:      Digest(token),
		ServerKey:        key,
		MaxFrame:         cfg.MaxFrame,
		OutboundQueueCap: cfg.OutboundQueueCap,
		SessionID:        fmt.Sprintf("crewd-%x", session),
		Logger:           lg.With("component", "broker"),
	})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	defer srv.Close()
	if err := srv.Listen(); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	// NB: the socket line comes last: scripts and tests take it as the sign that crewd accepts connections.
	fmt.Fprintf(stdout, "crewd: admin token file %s\ncrewd: socket %s\n", filepath.Join(cfg.DataDir, AdminTokenFile), srv.Addr())
	catalog := "none"
	if engineConfig.ModelCatalog != nil {
		catalog = fmt.Sprintf("%d models", len(engineConfig.ModelCatalog))
	}
	lg.Info("serving", "socket", srv.Addr(), "nesting", engineConfig.NestingEnabled, "maxDepth", engineConfig.MaxDepth,
		"maxSlots", engineConfig.MaxSlots, "serializeOnPathOverlap", engineConfig.SerializeOnPathOverlap,
		"unmeteredDelegates", engineConfig.UnmeteredDelegates, "modelCatalog", catalog,
		"settleGraceSec", engineConfig.SettleGraceSec)
	if err := srv.Serve(ctx); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	lg.Info("shutting down")
	return nil
}
