package audit

import (
	"errors"
	"fmt"
	"os"

	"github.com/crewlog/crewlog/eventlog"
)

// Errors of Open, told apart so a tool can say what to do.
var (
	// ErrNoStore: the directory holds no crewlog store.
	ErrNoStore = errors.New("audit: no store")
	// ErrLocked: a running daemon holds the store. Pebble locks the
	// directory even for read-only opens, so the offline tools cannot read
	// a live store: stop the daemon, or read a backup of it.
	ErrLocked = errors.New("audit: store is locked by a running daemon")
)

// Open opens the store in dir read-only: nothing the audit does can write.
func Open(dir string) (*eventlog.Log, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w in %s: %w", ErrNoStore, dir, err)
	}
	l, err := eventlog.Open(dir, &eventlog.Options{ReadOnly: true})
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, eventlog.ErrLocked):
		return nil, fmt.Errorf("%w (%s): %w", ErrLocked, dir, err)
	case errors.Is(err, eventlog.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w in %s: %w", ErrNoStore, dir, err)
	}
	return nil, err
}
