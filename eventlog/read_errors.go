package eventlog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// orErr returns the error of a read of the store that failed with err, damage when Pebble met a damaged table
// (tableDamage), or otherwise when err is nil.
func orErr(err, otherwise error) error {
	if err != nil {
		return tableDamage(fmt.Errorf("eventlog: %w", err))
	}
	return otherwise
}

// tableDamage returns err as a *CorruptError when it is Pebble's report of a
// table block that fails its checksum (a read-only open's reads return it
// rather than crash), which marks neither ErrCorrupt nor a key; any other
// error as it is. Every read of the store passes its error through it, so
// that a caller tells a damaged store from one whose read failed.
func tableDamage(err error) error {
	if err == nil || errors.Is(err, ErrCorrupt) || !pebble.IsCorruptionError(err) {
		return err
	}
	// NB: Pebble's message puts its details on lines of their own; the first names the file and the block.
	reason, _, _ := strings.Cut(err.Error(), "\n")
	return &CorruptError{Key: "store", Reason: strings.TrimPrefix(reason, "eventlog: ")}
}
