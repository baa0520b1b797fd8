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
// A store that does not open because a file of it is gone (its manifest, a
// table) or its manifest is malformed is damaged: a *eventlog.CorruptError,
// not ErrNoStore.
func Open(dir string) (*eventlog.Log, error) { return OpenWith(dir, nil) }

// OpenWith is Open with the log's options o (nil: defaults), read-only whatever o says: a test opens the store on a
// file system that injects faults (eventlog.Options.FS).
func OpenWith(dir string, o *eventlog.Options) (*eventlog.Log, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w in %s: %w", ErrNoStore, dir, err)
	}
	// NB: refused before Pebble opens it, which writes its LOCK file even read-only: an empty directory (one a
	// restore is to copy into, one a killed copy left) would be empty no more, and the copy refuse it.
	if !eventlog.HasManifestMarker(dir) && !eventlog.IsStore(dir) {
		return nil, fmt.Errorf("%w in %s", ErrNoStore, dir)
	}
	var opts eventlog.Options
	if o != nil {
		opts = *o
	}
	opts.ReadOnly = true
	l, err := eventlog.Open(dir, &opts)
	var ce *eventlog.CorruptError
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, eventlog.ErrLocked):
		return nil, fmt.Errorf("%w (%s): %w", ErrLocked, dir, err)
	case errors.As(err, &ce):
		return nil, err
	case errors.Is(err, eventlog.ErrCorrupt) || errors.Is(err, os.ErrNotExist) && eventlog.HasManifestMarker(dir):
		return nil, &eventlog.CorruptError{Key: "store", Reason: err.Error()}
	case errors.Is(err, eventlog.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w in %s: %w", ErrNoStore, dir, err)
	}
	return nil, err
}
