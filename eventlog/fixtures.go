//go:build crewlog_fixtures

package eventlog

import (
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// RewindFormatForFixtures turns a freshly written store into one written
// at an older format, for the fixture generators (build tag
// crewlog_fixtures): it drops or rewrites what the later formats added and
// sets the marker — below format 4 a snapshot is stored whole again,
// below format 3 every outcome goes back to the command table of formats 1
// and 2 (c | command id, no fingerprint, no principal), below format 2 the
// stream catalog goes. It exists only in fixture builds; nothing may ever
// lower the format of a real store.
func (l *Log) RewindFormatForFixtures(to uint32) error {
	if to < FormatInitial || to >= FormatChunkedSnapshots {
		return fmt.Errorf("eventlog: no rewind to format %d", to)
	}
	b := l.db.NewBatch()
	defer b.Close()
	if err := l.stageWholeSnapshots(b); err != nil {
		return fmt.Errorf("eventlog: rewind format: %w", err)
	}
	if to < FormatPrincipalOutcomes {
		if err := l.stageLegacyOutcomes(b); err != nil {
			return fmt.Errorf("eventlog: rewind format: %w", err)
		}
	}
	if to < FormatStreamCatalog {
		_ = b.DeleteRange([]byte{prefixCatalog}, []byte{prefixCatalog + 1}, nil)
	}
	_ = b.Set(keyFormat, encodeFormat(to), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("eventlog: rewind format: %w", err)
	}
	return l.db.Flush()
}

// stageWholeSnapshots stages every snapshot in chunks rewritten whole under
// 'n' | pos, as formats 1 to 3 store it.
func (l *Log) stageWholeSnapshots(b *pebble.Batch) error {
	whole := map[uint64][]byte{}
	if _, err := eachSnapshot(l.db, math.MaxUint64, func(pos uint64, data []byte) { whole[pos] = data }); err != nil {
		return err
	}
	_ = b.DeleteRange([]byte{prefixSnapshot}, []byte{prefixSnapshot + 1}, nil)
	for pos, data := range whole {
		_ = b.Set(snapshotKey(pos), seal(data), nil)
	}
	return nil
}
