package eventlog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a consistent copy of the store to destDir (which must
// not exist) while the log stays online. The copy is a complete store that
// Open accepts; it holds at least every append acknowledged before the call.
// On the same file system most files are hard links, so it is cheap.
func (l *Log) Checkpoint(destDir string) error {
	if err := l.readable(); err != nil {
		return err
	}
	if err := l.db.Checkpoint(destDir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("eventlog: checkpoint to %s: %w", destDir, err)
	}
	return nil
}
