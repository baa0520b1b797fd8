package eventlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// rewind makes l a format-1 store: no catalog, marker 1.
func rewind(t *testing.T, l *Log) {
	t.Helper()
	b := l.db.NewBatch()
	require.NoError(t, b.DeleteRange([]byte{prefixCatalog}, []byte{prefixCatalog + 1}, nil))
	require.NoError(t, b.Set(keyFormat, encodeFormat(FormatInitial), nil))
	require.NoError(t, b.Commit(pebble.Sync))
	require.NoError(t, b.Close())
}

func backfill(u *Upgrade) error { _, err := u.BackfillStreamCatalog(); return err }

// manyStreams appends n streams of two events each, so the backfill spans
// several chunks.
func manyStreams(t *testing.T, l *Log, n int) {
	t.Helper()
	var ws []Write
	for i := range n {
		ws = append(ws, Write{CommandID: fmt.Sprintf("c%d", i), Events: evs(fmt.Sprintf("run-%04d", i), 2)})
	}
	_, err := l.Append(ws...)
	require.NoError(t, err)
}

func TestFormatGate(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	manyStreams(t, l, 3)
	rewind(t, l)
	require.NoError(t, l.Close())

	_, err = Open("db", &Options{FS: fs})
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	require.ErrorIs(t, err, ErrFormatTooOld)
	require.Equal(t, FormatError{Store: 1, Supported: CurrentFormat}, *fe)
	require.Contains(t, err.Error(), fmt.Sprintf("store format 1 is older than format %d", CurrentFormat))

	ro, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err, "read-only tools read an old store")
	_, err = ro.Streams()
	require.ErrorIs(t, err, ErrFormatTooOld, "no partial catalog from an old store")
	_, err = ro.Verify(nil)
	require.NoError(t, err)
	require.NoError(t, ro.Close())

	l, err = Open("db", &Options{FS: fs, AllowOlderFormat: true})
	require.NoError(t, err)
	require.ErrorIs(t, l.Upgrade(CurrentFormat, CurrentFormat+1, nil, nil), ErrInvalid, "no step beyond this build")
	require.ErrorIs(t, l.Upgrade(0, 1, nil, nil), ErrInvalid, "not the store's format")
	require.ErrorIs(t, l.Upgrade(1, 3, nil, nil), ErrInvalid, "one step at a time")
	f, err := l.Format()
	require.NoError(t, err)
	require.EqualValues(t, 1, f, "a refused step leaves the format")
	require.NoError(t, l.Close())
}

func TestUpgradeBackfillsCatalogAtomically(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	manyStreams(t, l, 2*upgradeChunk+10)
	want, err := l.Streams()
	require.NoError(t, err)
	rewind(t, l)
	require.NoError(t, l.Close())

	// A step that dies after writing some chunks: the format stays 1 and
	// a crash then loses nothing that matters.
	l, err = Open("db", &Options{FS: fs, AllowOlderFormat: true})
	require.NoError(t, err)
	boom := errors.New("boom")
	var calls int
	err = l.Upgrade(1, 2, func(u *Upgrade) error {
		_, err := u.BackfillStreamCatalog()
		require.NoError(t, err)
		return boom
	}, &UpgradeOptions{Progress: func(done, total uint64) { calls++ }},
		Write{CommandID: "migrate:2:test", Events: []Event{ev("$engine", "store.migrated")}})
	require.ErrorIs(t, err, boom)
	require.Positive(t, calls, "a step reports its progress")
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, l.Close())

	l, err = Open("db", &Options{FS: crashed, AllowOlderFormat: true})
	require.NoError(t, err)
	f, err := l.Format()
	require.NoError(t, err)
	require.Equal(t, FormatInitial, f)
	_, err = l.Outcome("", "migrate:2:test")
	require.ErrorIs(t, err, ErrNotFound)

	// Run again: idempotent over the partial backfill; marker, record and
	// last chunk land together.
	// NB: how much of the first run the crash kept depends on whether its chunks' syncs (awaited in the background)
	// were over: this run may have little left to add.
	err = l.Upgrade(1, 2, backfill, nil, Write{CommandID: "migrate:2:test", Events: []Event{ev("$engine", "store.migrated")}})
	require.NoError(t, err)
	durable := crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	require.NoError(t, l.Close())

	l, err = Open("db", &Options{FS: durable, AllowOlderFormat: true})
	require.NoError(t, err)
	defer l.Close()
	f, err = l.Format()
	require.NoError(t, err)
	require.Equal(t, FormatStreamCatalog, f)
	got, err := l.Streams()
	require.NoError(t, err)
	require.Len(t, got, len(want)+1) // and $engine, created by the record
	require.Equal(t, want, got[1:])  // "$engine" sorts first
	_, err = l.Outcome("", "migrate:2:test")
	require.NoError(t, err)
	_, err = l.Verify(nil)
	require.NoError(t, err)
}

func TestVerifyChecksCatalog(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	manyStreams(t, l, 3)
	_, err := l.Verify(nil)
	require.NoError(t, err)
	require.NoError(t, l.db.Delete(catalogKey("run-0001"), pebble.Sync))
	_, err = l.Verify(nil)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Reason, "no catalog entry")
}

// A crash before every file-system operation of the step to format 3, which moves the outcomes in chunks committed
// without awaiting their sync: the recovered store is at format 2 or 3, the step run again finishes it, and then every
// outcome is under its principal and every command id is still refused as a duplicate.
func TestCrashWhileMovingOutcomes(t *testing.T) {
	defer func(n int) { upgradeChunk = n }(upgradeChunk)
	upgradeChunk = 256 // NB: each chunk is a WAL write and a sync, and a crash before each: some 12 chunks, not 400
	mem := vfs.NewCrashableMem()
	l, err := Open("db", &Options{FS: mem})
	require.NoError(t, err)
	type cmd struct{ principal, id string }
	var cmds []cmd
	var ws []Write
	for i := range 3000 {
		w := Write{CommandID: fmt.Sprintf("c%04d", i), Events: evs(fmt.Sprintf("S%d", i%4), 1+i%2)}
		c := cmd{fmt.Sprintf("oS%d", i%4), w.CommandID}
		if i%5 == 0 {
			w.Events, w.Code = nil, "bad-params"
			c.principal = "admin"
		}
		ws, cmds = append(ws, w), append(cmds, c)
	}
	for len(ws) > 0 {
		n := min(len(ws), 500)
		_, err := l.Append(ws[:n]...)
		require.NoError(t, err)
		ws = ws[n:]
	}
	toLegacy(t, l)
	require.NoError(t, l.Close())
	principalOf := func(first *Event) string {
		if first == nil {
			return "admin"
		}
		return "o" + first.Stream
	}
	move := func(u *Upgrade) error { _, err := u.MoveOutcomes(principalOf); return err }
	record := Write{CommandID: "migrate:3:test", Events: []Event{ev("$engine", "store.migrated")}}

	crashes := &crashRecorder{mem: mem, seed: 13}
	l, err = Open("db", &Options{FS: errorfs.Wrap(mem, crashes), AllowOlderFormat: true})
	require.NoError(t, err)
	crashes.armed.Store(true)
	require.NoError(t, l.Upgrade(FormatStreamCatalog, FormatPrincipalOutcomes, move, nil, record))
	crashes.armed.Store(false)
	final := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0, RNG: rand.New(rand.NewPCG(1, 1))})
	require.NoError(t, l.Close())
	clones := append(crashes.clones, final)
	require.Greater(t, len(clones), 3)

	for i, fs := range clones {
		if raceDetector && i%8 != 0 && i != len(clones)-1 {
			continue // NB: some 170 clones, each checked in full, take minutes under the race detector
		}
		r, err := Open("db", &Options{FS: fs, AllowOlderFormat: true})
		require.NoError(t, err, "crash %d", i)
		f, err := r.Format()
		require.NoError(t, err, "crash %d", i)
		require.Contains(t, []uint32{FormatStreamCatalog, FormatPrincipalOutcomes}, f, "crash %d", i)
		if f == FormatStreamCatalog {
			require.NoError(t, r.Upgrade(FormatStreamCatalog, FormatPrincipalOutcomes, move, nil, record), "crash %d", i)
		}
		for _, c := range cmds {
			_, err := r.Outcome(c.principal, c.id)
			require.NoError(t, err, "crash %d: %s of %s", i, c.id, c.principal)
			_, err = r.Append(Write{Principal: c.principal, CommandID: c.id, Events: evs("again", 1)})
			require.ErrorIs(t, err, ErrDuplicateCommand, "crash %d: %s", i, c.id)
		}
		_, err = r.Verify(nil)
		require.NoError(t, err, "crash %d", i)
		require.NoError(t, r.Close())
	}
}
