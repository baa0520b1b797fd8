package eventlog

import "strings"

// isTableSizeMismatch reports whether err is Pebble refusing to open a store
// one of whose tables is not the size its manifest records: a table cut short
// (a torn copy, a disk that lost its tail) or grown. That is damage to the
// stored bytes, but Pebble's consistency check at open reports it as a plain
// error, not one IsCorruptionError recognises, so it would read as "cannot
// open" rather than "corrupt". Its message is the only mark it has
// (TestOpenReportsATruncatedTableAsCorrupt fails if a Pebble upgrade changes it).
func isTableSizeMismatch(err error) bool {
	return strings.Contains(err.Error(), "object size mismatch")
}
