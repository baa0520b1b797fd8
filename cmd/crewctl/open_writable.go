package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/eventlog"
)

// openWritable opens the store in dir to write, with opts (on the file system of a.storeOpts when a test names one),
// for the offline commands that write (backup, migrate, import).
//
// NB: Pebble's open flushes what it replays from the WAL, and retries a flush that fails at once and without end (a
// full disk): the open then never returns, and spins a core. So the storage engine's errors go to stderr (the first
// of a kind at once, then at most one per 10 s) and the open runs beside the command, which gives it up when ctx
// ends (Ctrl-C): crewctl waited for ever there, saying nothing, deaf to Ctrl-C. An open given up on is closed if it
// ever returns.
func (a *app) openWritable(ctx context.Context, dir string, opts eventlog.Options) (*eventlog.Log, error) {
	if a.storeOpts != nil && a.storeOpts.FS != nil {
		opts.FS = a.storeOpts.FS
	}
	errs := &quietable{w: a.io.err}
	opts.Logger = slog.New(slog.NewTextHandler(errs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l, err := daemon.Interruptible(ctx, "open "+dir, func() (*eventlog.Log, error) { return eventlog.Open(dir, &opts) },
		func(l *eventlog.Log) { l.Close() })
	if errors.Is(err, daemon.ErrGaveUp) {
		errs.quiet() // NB: the open goes on beside what crewctl does next, and must not write there
		return nil, fmt.Errorf("open %s: given up (%v): the storage engine has not finished opening it (see its errors "+
			"above: a full disk?)", dir, context.Cause(ctx))
	}
	return l, err
}

// quietable is a writer that writes to w until quiet.
//
// Concurrency: safe from any goroutine.
type quietable struct {
	mu     sync.Mutex
	w      io.Writer
	silent bool
}

func (q *quietable) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.silent {
		return len(p), nil
	}
	return q.w.Write(p)
}

// quiet drops every later write.
func (q *quietable) quiet() {
	q.mu.Lock()
	q.silent = true
	q.mu.Unlock()
}
