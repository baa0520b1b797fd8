//go:build crewlog_fixtures

package eventlog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// RewindFormatForFixtures turns a freshly written store into one written
// at an older format, for the fixture generators (build tag
// crewlog_fixtures): it drops what the later formats added and sets the
// marker. It exists only in fixture builds; nothing may ever lower the
// format of a real store.
func (l *Log) RewindFormatForFixtures(to uint32) error {
	if to != FormatInitial {
		return fmt.Errorf("eventlog: no rewind to format %d", to)
	}
	b := l.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange([]byte{prefixCatalog}, []byte{prefixCatalog + 1}, nil)
	_ = b.Set(keyFormat, encodeFormat(to), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("eventlog: rewind format: %w", err)
	}
	return l.db.Flush()
}
