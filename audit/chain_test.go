package audit_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
)

// TestReplayRefusesABrokenChain: a record whose checksum is right but whose hash does not chain to the record
// before it (eventlog's doc: crc32c over bytes 5.., then the hash) is not what the log's writer wrote, whatever its
// body says. Replay, which folds and explains every record from position 1, names it as verify does, instead of
// folding it into an answer that hides it; up to the record before it, the log is sound.
func TestReplayRefusesABrokenChain(t *testing.T) {
	const bad = 20
	dir := filepath.Join(t.TempDir(), "store")
	audittest.Scenario(t, dir)
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: quiet{}})
	require.NoError(t, err)
	key := binary.BigEndian.AppendUint64([]byte{'e'}, bad)
	v, closer, err := db.Get(key)
	require.NoError(t, err)
	rec := append([]byte(nil), v...)
	require.NoError(t, closer.Close())
	rec[5] ^= 0x01 // the stored hash, re-sealed: the checksum holds, the link does not
	binary.BigEndian.PutUint32(rec[1:5], crc32.Checksum(rec[5:], crc32.MakeTable(crc32.Castagnoli)))
	require.NoError(t, db.Set(key, rec, pebble.Sync))
	require.NoError(t, db.Close())

	l, err := audit.Open(dir)
	require.NoError(t, err)
	defer l.Close()
	_, err = audit.Verify(l, nil)
	var ce *eventlog.CorruptError
	require.ErrorAs(t, err, &ce)
	require.EqualValues(t, bad, ce.Position, "%v", err)

	for _, o := range []audit.ReplayOptions{{}, {Explain: true}, {To: bad}} {
		_, err := audit.Replay(l, o)
		require.ErrorAs(t, err, &ce, "%+v", o)
		require.EqualValues(t, bad, ce.Position, "%v", err)
		require.ErrorContains(t, err, "hash chain broken")
	}
	res, err := audit.Replay(l, audit.ReplayOptions{To: bad - 1})
	require.NoError(t, err)
	require.EqualValues(t, bad-1, res.State.Position)
}

// quiet keeps Pebble's recovery messages out of the test's output.
type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
