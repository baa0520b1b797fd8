package audit_test

import (
	"encoding/binary"
	"hash/crc32"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestReplayRefusesABrokenChain: a record whose checksum is right but whose hash does not chain to the record
// before it (eventlog's doc: crc32c over bytes 5.., then the hash) is not what the log's writer wrote, whatever its
// body says. Replay, which folds and explains every record from position 1, names it as verify does, instead of
// folding it into an answer that hides it; up to the record before it, the log is sound.
func TestReplayRefusesABrokenChain(t *testing.T) {
	const bad = 20
	dir := filepath.Join(t.TempDir(), "store")
	audittest.Scenario(t, dir)
	breakChainAt(t, dir, bad)

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

// TestStartRefusesABrokenChainInTheTail: the fold a start makes of the events after the snapshot checks the hash
// chain as replay does, so a daemon refuses to start on a record its writer did not write there instead of answering
// from a state built on it; a broken link before the snapshot is verify's to find (the snapshot covers it).
func TestStartRefusesABrokenChainInTheTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	head := audittest.Scenario(t, dir)
	bad := audittest.SnapshotAt + (head-audittest.SnapshotAt)/2
	require.Greater(t, bad, audittest.SnapshotAt)
	breakChainAt(t, dir, bad)

	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	defer l.Close()
	_, info, err := projections.Load(l)
	var ce *eventlog.CorruptError
	require.ErrorAs(t, err, &ce)
	require.EqualValues(t, bad, ce.Position, "%v", err)
	require.ErrorContains(t, err, "hash chain broken")
	require.Nil(t, info.SnapshotError, "the snapshot was read; the tail after it was not folded")
	_, err = commands.Open(l, commands.Options{ExpiryInterval: -1})
	require.ErrorAs(t, err, &ce)
	require.EqualValues(t, bad, ce.Position, "the engine does not start: %v", err)
}

// breakChainAt rewrites the record at position pos of the store in dir with its stored hash changed and its checksum
// made right again: the checksum holds, the link to the record before it does not.
func breakChainAt(t *testing.T, dir string, pos uint64) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: audittest.QuietPebble{}})
	require.NoError(t, err)
	key := binary.BigEndian.AppendUint64([]byte{'e'}, pos)
	v, closer, err := db.Get(key)
	require.NoError(t, err)
	rec := append([]byte(nil), v...)
	require.NoError(t, closer.Close())
	rec[5] ^= 0x01 // the stored hash, re-sealed
	binary.BigEndian.PutUint32(rec[1:5], crc32.Checksum(rec[5:], crc32.MakeTable(crc32.Castagnoli)))
	require.NoError(t, db.Set(key, rec, pebble.Sync))
	require.NoError(t, db.Close())
}
