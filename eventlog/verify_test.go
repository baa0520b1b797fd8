package eventlog

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// buildSample writes a small log with several streams, commands and a
// snapshot.
func buildSample(t *testing.T) *Log {
	l, _ := openMem(t)
	for i := 0; i < 4; i++ {
		_, err := l.Append(
			Write{CommandID: "cmd-" + string(rune('a'+i)), Events: []Event{ev("run-1", "x"), ev("run-2", "y")}},
			Write{CommandID: "rej-" + string(rune('a'+i)), Code: "bad-params", Reason: "no"},
		)
		require.NoError(t, err)
	}
	require.NoError(t, l.SaveSnapshot(6, []byte("state at 6")))
	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.EqualValues(t, 8, rep.Head)
	require.Equal(t, 2, rep.Streams)
	require.Equal(t, 8, rep.Commands)
	require.Equal(t, 1, rep.Snapshots)
	return l
}

func rawGet(t *testing.T, l *Log, k []byte) []byte {
	v, closer, err := l.db.Get(k)
	require.NoError(t, err)
	defer closer.Close()
	return append([]byte(nil), v...)
}

// Flipping any single bit pattern in any byte of any record, the head, an
// index entry, an outcome or the snapshot is detected, and a damaged record
// is named by its position.
func TestVerifyDetectsEveryFlippedByte(t *testing.T) {
	l := buildSample(t)
	defer l.Close()

	type target struct {
		key []byte
		pos uint64 // expected first bad position, 0 when not a record
	}
	var targets []target
	for p := uint64(1); p <= 8; p++ {
		targets = append(targets, target{eventKey(p), p})
		e, err := l.Event(p)
		require.NoError(t, err)
		targets = append(targets, target{appendStreamKey(nil, e.Stream, e.StreamVersion), 0})
	}
	targets = append(targets, target{keyHead, 0}, target{keyFormat, 0}, target{snapshotChunkKey(6, 0), 0}, target{snapshotChunkKey(6, 1), 0},
		target{outcomeKey("", "cmd-b"), 0}, target{outcomeKey("", "rej-c"), 0})

	for _, tg := range targets {
		orig := rawGet(t, l, tg.key)
		for i := range orig {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				bad := append([]byte(nil), orig...)
				bad[i] ^= mask
				require.NoError(t, l.db.Set(tg.key, bad, pebble.NoSync))
				_, err := l.Verify(nil)
				require.ErrorIs(t, err, ErrCorrupt, "%s byte %d mask %#x", keyString(tg.key), i, mask)
				if tg.pos > 0 {
					var ce *CorruptError
					require.ErrorAs(t, err, &ce)
					require.Equal(t, tg.pos, ce.Position, "%s byte %d: %v", keyString(tg.key), i, err)
				}
			}
		}
		require.NoError(t, l.db.Set(tg.key, orig, pebble.NoSync))
	}
	_, err := l.Verify(nil)
	require.NoError(t, err)
}

// TestVerifyDetectsStructuralDamage: each damage is found and, where it is in records, named by its first bad
// position; damage to several streams is named by the first position it touches, the same at every run, not by
// whichever stream a walk over a map meets first.
func TestVerifyDetectsStructuralDamage(t *testing.T) {
	cases := map[string]struct {
		damage func(t *testing.T, l *Log)
		pos    uint64
	}{
		"deleted record": {func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Delete(eventKey(3), pebble.Sync))
		}, 3},
		"deleted index entry": {func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Delete(appendStreamKey(nil, "run-1", 2), pebble.Sync))
		}, 0},
		"last index entry of each stream deleted": {func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Delete(appendStreamKey(nil, "run-2", 4), pebble.Sync))
			require.NoError(t, l.db.Delete(appendStreamKey(nil, "run-1", 4), pebble.Sync))
		}, 7},
		"catalog entry of each stream deleted": {func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Delete(catalogKey("run-2"), pebble.Sync))
			require.NoError(t, l.db.Delete(catalogKey("run-1"), pebble.Sync))
		}, 1},
		"extra index entry": {func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Set(appendStreamKey(nil, "run-1", 9), eventKey(1)[1:], pebble.Sync))
		}, 0},
		"record replaced by a valid record of another chain": {func(t *testing.T, l *Log) {
			e, err := l.Event(5)
			require.NoError(t, err)
			e.Time++
			require.NoError(t, l.db.Set(eventKey(5), appendRecord(nil, &[32]byte{}, &e), pebble.Sync))
		}, 5},
		"outcome pointing at another command": {func(t *testing.T, l *Log) {
			o := Outcome{First: 1, Count: 2}
			require.NoError(t, l.db.Set(outcomeKey("", "cmd-c"), o.encode(), pebble.Sync))
		}, 0},
		"truncated tail with stale head": {func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Delete(eventKey(8), pebble.Sync))
		}, 8},
		"record re-chained with a stream version skipped": {func(t *testing.T, l *Log) {
			rechainLast(t, l, func(e *Event) { e.StreamVersion++ })
		}, 8},
		"record re-chained repeating its stream's last version": {func(t *testing.T, l *Log) {
			rechainLast(t, l, func(e *Event) { e.StreamVersion-- })
		}, 8},
		"record re-chained saying another position": {func(t *testing.T, l *Log) {
			rechainLast(t, l, func(e *Event) { e.Position++ })
		}, 8},
		"head naming another hash": {func(t *testing.T, l *Log) {
			require.NoError(t, l.db.Set(keyHead, head{Position: 8, Hash: [32]byte{1}}.encode(), pebble.Sync))
		}, 8},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := buildSample(t)
			defer l.Close()
			c.damage(t, l)
			_, first := l.Verify(nil)
			for range 32 { // NB: Go walks a map in another order every time
				_, err := l.Verify(nil)
				require.ErrorIs(t, err, ErrCorrupt)
				require.Equal(t, first, err)
				if c.pos > 0 {
					var ce *CorruptError
					require.ErrorAs(t, err, &ce)
					require.Equal(t, c.pos, ce.Position, "%v", err)
				}
			}
		})
	}
}

// rechainLast rewrites the last record of buildSample's log (position 8) changed by change, sealed and chained to
// the record before it, and moves the head to its hash: damage that only the checks of what a record says find.
func rechainLast(t *testing.T, l *Log, change func(e *Event)) {
	t.Helper()
	prev, err := l.Event(7)
	require.NoError(t, err)
	e, err := l.Event(8)
	require.NoError(t, err)
	change(&e)
	require.NoError(t, l.db.Set(eventKey(8), appendRecord(nil, &prev.Hash, &e), pebble.Sync))
	require.NoError(t, l.db.Set(keyHead, head{Position: 8, Hash: e.Hash}.encode(), pebble.Sync))
}

// TestVerifyRefusesAFormatNewerThanThisBuild: a store whose marker a newer build raised holds what this build cannot
// check; Verify says so, as the *FormatError Open gives, rather than pass it having checked only what it knows.
func TestVerifyRefusesAFormatNewerThanThisBuild(t *testing.T) {
	l := buildSample(t)
	defer l.Close()
	require.NoError(t, l.db.Set(keyFormat, encodeFormat(CurrentFormat+1), pebble.Sync))
	_, err := l.Verify(nil)
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	require.ErrorIs(t, err, ErrFormatTooNew)
	require.Equal(t, FormatError{Store: CurrentFormat + 1, Supported: CurrentFormat}, *fe)
}

func TestVerifyReportsProgress(t *testing.T) {
	l := buildSample(t)
	defer l.Close()
	var last, total uint64
	_, err := l.Verify(&VerifyOptions{Progress: func(d, n uint64) { last, total = d, n }})
	require.NoError(t, err)
	require.EqualValues(t, 8, last)
	require.EqualValues(t, 8, total)
}

// A sound outcome table is read once, alongside the walk: the exact pass
// that names a problem runs only when the scan finds one (the cases above).
func TestVerifyReadsSoundOutcomesOnce(t *testing.T) {
	byPrincipal, _ := openMem(t)
	defer byPrincipal.Close()
	for i, s := range []string{"run-1", "run-2", "run-1"} {
		_, err := byPrincipal.Append(
			Write{Principal: "o" + s, CommandID: fmt.Sprint("cmd-", i), Events: evs(s, 1+i)},
			Write{Principal: "o" + s, CommandID: fmt.Sprint("rej-", i), Code: "bad-params", Reason: "no"})
		require.NoError(t, err)
	}
	sample := buildSample(t)
	defer sample.Close()
	for name, c := range map[string]struct {
		l         *Log
		principal func([]byte, *Event) []byte
		outcomes  int
	}{"command ids": {sample, nil, 8}, "principals": {byPrincipal, principalByStream, 6}} {
		t.Run(name, func(t *testing.T) {
			snap := c.l.db.NewSnapshot()
			defer snap.Close()
			h, err := decodeHead(rawGet(t, c.l, keyHead))
			require.NoError(t, err)
			seed := maphash.MakeSeed()
			_, cmds, err := verifyRecords(snap, h, &commandHasher{seed: seed, principal: c.principal}, nil, nil)
			require.NoError(t, err)
			scan := scanOutcomes(snap, h.Position, &commandHasher{seed: seed, principal: c.principal})
			defer scan.stop()
			exact := false
			n, _, err := scan.verify(cmds, func() (int, []outcomeSpan, error) { exact = true; return 0, nil, nil })
			require.NoError(t, err)
			require.False(t, exact, "a sound table is not read a second time")
			require.Equal(t, c.outcomes, n)
		})
	}
}

// TestVerifyReportsADamagedTableAsCorrupt: a table block that fails its checksum, met by Verify on a read-only open,
// is damage and Verify returns it as a *CorruptError naming the table; Pebble reports it with an error of its own,
// which Verify returned as it came, so a caller could not tell it from a read that failed. A read that fails (the
// disk answers EIO) is not damage.
func TestVerifyReportsADamagedTableAsCorrupt(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = l.Append(Write{Events: evs("a", 200)}) // a table of many blocks
	require.NoError(t, err)
	require.NoError(t, l.db.Flush())
	require.NoError(t, l.Close())
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NoError(t, err)
	require.Len(t, tables, 1)

	eio := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Path == tables[0] && op.Kind == errorfs.OpFileReadAt {
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	})}
	ro, err := Open(dir, &Options{ReadOnly: true, FS: errorfs.Wrap(vfs.Default, eio)})
	require.NoError(t, err)
	eio.On() // the blocks Open read are cached; the walk reads the others
	_, err = ro.Verify(nil)
	require.ErrorIs(t, err, syscall.EIO)
	require.NotErrorIs(t, err, ErrCorrupt, "a read that failed is not damage")
	require.NoError(t, ro.Close())

	f, err := os.OpenFile(tables[0], os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("damage"), 20) // inside its first data block
	require.NoError(t, err)
	require.NoError(t, f.Close())
	ro, err = Open(dir, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Verify(nil)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, ce.Reason, "checksum mismatch")
	require.Contains(t, ce.Reason, "file "+strings.TrimSuffix(filepath.Base(tables[0]), ".sst"))
}

// TestVerifySummaryOrdinalReadFailureIsNotDamage: Verify's read of a summary's ordinal entry that fails (EIO) is an
// error of its own, not ErrCorrupt, while an ordinal entry that is missing is damage.
func TestVerifySummaryOrdinalReadFailureIsNotDamage(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = l.Append(Write{Events: []Event{ev("a", "test.e")}})
	require.NoError(t, err)
	data := make([]byte, 1<<20) // incompressible: the ordinal entry's key is stored as it is, in a block of its own
	_, _ = rand.Read(data)
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 1, Position: 1, Data: data}}))
	require.NoError(t, l.db.Flush())
	require.NoError(t, l.Close())

	ordKey := summaryOrdKey(1, 1)
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NoError(t, err)
	var table string
	at := int64(-1)
	for _, p := range tables {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		if i := bytes.Index(b, ordKey); i >= 0 {
			table, at = p, int64(i)
		}
	}
	require.GreaterOrEqual(t, at, int64(0), "the ordinal entry's key is in a table")
	// The block holding the ordinal entry is read first by the views' scan, whose seek stops on it, then by the
	// lookup of the summary's ordinal entry: the reads after the first fail. A cache that memtables fill keeps no
	// block, so every lookup reads its block again.
	var reads atomic.Int32
	eio := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Path == table && op.Kind == errorfs.OpFileReadAt && op.Offset <= at && at-op.Offset < 4096 &&
			reads.Add(1) > 1 {
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	})
	ro, err := Open(dir, &Options{ReadOnly: true, FS: errorfs.Wrap(vfs.Default, eio), CacheSize: 1, MemTableSize: 1 << 20})
	require.NoError(t, err)
	_, err = ro.Verify(nil)
	require.ErrorIs(t, err, syscall.EIO)
	require.NotErrorIs(t, err, ErrCorrupt, "a read that failed is not damage")
	require.Equal(t, int32(2), reads.Load(), "the lookup's read is the one that failed")
	require.NoError(t, ro.Close())

	l, err = Open(dir, nil)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.db.Delete(ordKey, pebble.Sync))
	_, err = l.Verify(nil)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Reason, "has no ordinal entry")
}

// Verify detects a flipped byte in the value of every key that is not an event record, an index entry or a
// snapshot chunk (TestVerifyDetectsEveryFlippedByte flips those): an outcome, a principal's and a group's tally,
// a catalog entry, a view, a summary in both orders and the index's counts, and each metadata key (format, head,
// source). The store holds every prefix the key layout lists, so a prefix Verify leaves unread fails here.
func TestVerifyDetectsAFlippedByteUnderEveryPrefix(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	l.SetTallyGroup(func(principal string) string { return "team-" + principal })
	_, err := l.AppendFrom(41,
		Write{Principal: "wA", CommandID: "a1", Events: []Event{ev("run-1", "x"), ev("run-2", "y")}},
		refusal("wA", "a2"))
	require.NoError(t, err)
	require.NoError(t, l.SaveView("run-1", 1, []byte("view of run-1")))
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "run-2", Ord: 3, Position: 2, Data: []byte("sum")}}))
	_, err = l.Verify(nil)
	require.NoError(t, err)

	var keys [][]byte
	prefixes := map[byte]bool{}
	it, err := l.db.NewIter(nil)
	require.NoError(t, err)
	for ok := it.First(); ok; ok = it.Next() {
		if k := it.Key(); k[0] != prefixEvent && k[0] != prefixStream && k[0] != prefixSnapshot {
			keys = append(keys, append([]byte(nil), k...))
			prefixes[k[0]] = true
		}
	}
	require.NoError(t, it.Close())
	for _, p := range []byte{prefixOutcome, prefixTally, prefixGroupTally, prefixCatalog, prefixView, prefixSummary,
		prefixSummaryByOrd, prefixMeta} {
		require.True(t, prefixes[p], "the sample holds no %q key", p)
	}
	require.Contains(t, keys, keySource)

	for _, k := range keys {
		orig := rawGet(t, l, k)
		for i := range orig {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				bad := append([]byte(nil), orig...)
				bad[i] ^= mask
				require.NoError(t, l.db.Set(k, bad, pebble.NoSync))
				_, err := l.Verify(nil)
				require.ErrorIs(t, err, ErrCorrupt, "%s byte %d mask %#x", keyString(k), i, mask)
				var ce *CorruptError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, keyString(k), ce.Key, "%s byte %d mask %#x: %v", keyString(k), i, mask, err)
			}
		}
		require.NoError(t, l.db.Set(k, orig, pebble.NoSync))
	}
	_, err = l.Verify(nil)
	require.NoError(t, err)
}
