package eventlog

import (
	"errors"
	"fmt"
)

// Store formats. The format only ratchets up (like Pebble's
// FormatMajorVersion): a step is taken by the migrations package, which
// commits the new marker in the same batch as the step's last write, so a
// crash leaves the store at the old format with a step that is simply run
// again. Every step must therefore be idempotent.
const (
	// FormatInitial is the first store format: records, stream index,
	// command table, snapshot slot, head and format marker.
	FormatInitial uint32 = 1
	// FormatStreamCatalog adds the stream catalog ('r' keys, see
	// catalog.go): one entry per stream naming its first position and time,
	// so listing the runs of a store does not scan the log. Append writes an
	// entry when a stream receives its version 1; the step to this format
	// backfills the streams created before it.
	FormatStreamCatalog uint32 = 2
	// FormatPrincipalOutcomes keys every recorded outcome by its principal
	// and command id ('o' keys, see outcome.go) and records the request's
	// fingerprint; formats 1 and 2 keyed outcomes by the command id alone
	// ('c' keys). The step to this format moves each 'c' outcome to the
	// principal its events name (MoveOutcomes).
	FormatPrincipalOutcomes uint32 = 3
	// FormatChunkedSnapshots stores the snapshot in sealed chunks under a
	// header ('n' | pos | chunk keys, see snapshot_chunks.go); formats 1 to
	// 3 stored it whole under 'n' | pos, which a build of this format still
	// reads. The step to this format rewrites a whole snapshot in chunks,
	// so that a build of an older format, which reads only whole snapshots,
	// refuses the store rather than taking the chunks for damage.
	FormatChunkedSnapshots uint32 = 4
)

// ErrFormatTooOld is returned by Open for a store written at an older
// format, unless Options.AllowOlderFormat or ReadOnly is set: the store must
// be migrated (crewctl migrate) before a writer uses it.
var ErrFormatTooOld = errors.New("eventlog: store format is older than this build writes")

// FormatError reports a store whose format this build will not open as
// asked. It wraps ErrFormatTooNew or ErrFormatTooOld, so callers can test
// the direction with errors.Is and read both versions from the error.
type FormatError struct {
	Store     uint32 // the store's format
	Supported uint32 // the format this build writes (CurrentFormat)
}

func (e *FormatError) Error() string {
	if e.Store > e.Supported {
		return fmt.Sprintf("eventlog: store format %d is newer than format %d, the newest this build supports; "+
			"use a newer crewlog", e.Store, e.Supported)
	}
	return fmt.Sprintf("eventlog: store format %d is older than format %d, the format this build writes; "+
		"the store needs a migration", e.Store, e.Supported)
}

// Unwrap makes errors.Is(err, ErrFormatTooNew) or errors.Is(err,
// ErrFormatTooOld) hold.
func (e *FormatError) Unwrap() error {
	if e.Store > e.Supported {
		return ErrFormatTooNew
	}
	return ErrFormatTooOld
}

// checkFormat decides whether a store at format may be opened with o.
// NB: a read-only open accepts an older format: reading needs nothing a
// later format adds (readers of format-specific keys check Format), and the
// offline tools must be able to read a pre-migration backup.
func checkFormat(format uint32, o *Options) error {
	switch {
	case format == 0:
		return corruptf(0, keyFormat, "format 0 is not a format")
	case format > CurrentFormat:
		return &FormatError{Store: format, Supported: CurrentFormat}
	case format < CurrentFormat && !o.ReadOnly && !o.AllowOlderFormat:
		return &FormatError{Store: format, Supported: CurrentFormat}
	}
	return nil
}
