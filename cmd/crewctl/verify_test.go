package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

func TestVerifyGolden(t *testing.T) {
	data := scenarioData(t)
	r := crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	golden(t, "verify.txt", r.out)

	r = crewctl(t, nil, "verify", "--data", data, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var out verifyOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.True(t, out.OK)
	require.Equal(t, scenario.head, out.Events)
}

// TestVerifyCorrupt flips one byte of the stored record at one position
// (the key layout is eventlog's doc: 'e' | position big-endian), directly in
// Pebble as a disk error would, and expects verify to name that position.
func TestVerifyCorrupt(t *testing.T) {
	const bad = 20
	dir := t.TempDir()
	store := filepath.Join(dir, storeDir)
	audittest.Scenario(t, store)
	rewriteRecord(t, store, bad, func(rec []byte) { rec[len(rec)/2] ^= 0x01 })

	r := crewctl(t, nil, "verify", "--data", dir)
	require.Equal(t, exitProblem, r.code, r.err)
	require.Contains(t, r.out, "CORRUPT at position 20")
	r = crewctl(t, nil, "verify", "--data", dir, "--json")
	require.Equal(t, exitProblem, r.code)
	var out verifyOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.Equal(t, uint64(bad), out.FirstBad)

	// Replay meets the same damage and says so.
	r = crewctl(t, nil, "replay", "--data", dir)
	require.Equal(t, exitProblem, r.code)
	require.Contains(t, r.err, "position 20")
}

// rewriteRecord changes the record at position pos of the store in dir by edit, directly in Pebble, as a disk error
// or another writer would (the key layout is eventlog's doc: 'e' | position big-endian).
func rewriteRecord(t *testing.T, dir string, pos uint64, edit func(rec []byte)) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: audittest.QuietPebble{}})
	require.NoError(t, err)
	key := binary.BigEndian.AppendUint64([]byte{'e'}, pos)
	v, closer, err := db.Get(key)
	require.NoError(t, err)
	rec := append([]byte(nil), v...)
	require.NoError(t, closer.Close())
	edit(rec)
	require.NoError(t, db.Set(key, rec, pebble.Sync))
	require.NoError(t, db.Close())
}

// TestVerifyNamesDamageOutsideTheRecords: damage in a value that is no record (an outcome, a snapshot's chunk) has no
// position, and verify's one-line summary said "first bad position 0", a position no log has (they start at 1), and
// not what was damaged: it names the damaged key, as the CORRUPT line does, and a position only for a record.
func TestVerifyNamesDamageOutsideTheRecords(t *testing.T) {
	for _, tc := range []struct {
		name, prefix, key string
	}{
		{"an outcome", "o", `o/"a"/"cmd-001"`},
		{"a snapshot's chunk", "n", fmt.Sprintf("n/%d/0", audittest.SnapshotAt)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			store := filepath.Join(data, storeDir)
			audittest.Scenario(t, store)
			db, err := pebble.Open(store, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: audittest.QuietPebble{}})
			require.NoError(t, err)
			it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte(tc.prefix), UpperBound: []byte{tc.prefix[0] + 1}})
			require.NoError(t, err)
			require.True(t, it.First())
			key, v := slices.Clone(it.Key()), slices.Clone(it.Value())
			require.NoError(t, it.Close())
			v[len(v)-1] ^= 0x01
			require.NoError(t, db.Set(key, v, pebble.Sync))
			require.NoError(t, db.Close())

			for _, args := range [][]string{{"verify"}, {"verify", "--json"}} {
				r := crewctl(t, nil, append(args, "--data", data)...)
				require.Equal(t, exitProblem, r.code, "%v: %s", args, r.out+r.err)
				require.Contains(t, r.err, tc.key, "%v", args)
				require.NotContains(t, r.err, "position 0", "%v", args)
			}
			// The text says the damage on its one line, by its key alone, and nothing that was not checked.
			r := crewctl(t, nil, "verify", "--data", data)
			require.True(t, strings.HasPrefix(r.out, "CORRUPT "+tc.key+": "), r.out)
			require.Equal(t, 1, strings.Count(r.out, "\n"), r.out)
		})
	}
}

// TestBackupDirectoryMadeMeanwhile: backup checks that DIR does not exist, then looks for crewd before it makes DIR.
// Someone who makes DIR in between (another user, in the shared temp directory) must not receive the copy, and with
// it server.key, in a directory they own and may alter before a restore: backup makes DIR itself or fails.
func TestBackupDirectoryMadeMeanwhile(t *testing.T) {
	data := scenarioData(t)
	tmp := t.TempDir()
	tokenFile := filepath.Join(tmp, "admin.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("tok\n"), 0o600))
	dest := filepath.Join(tmp, "backup")
	meanwhile := func(context.Context, string, string) (Broker, error) {
		require.NoError(t, os.Mkdir(dest, 0o700))
		require.NoError(t, os.Chmod(dest, 0o777))
		return nil, os.ErrNotExist // no crewd: the offline path
	}
	r := crewctl(t, meanwhile, "backup", dest, "--data", data, "--token-file", tokenFile)
	require.NotEqual(t, exitOK, r.code, "%s%s", r.out, r.err)
	require.Contains(t, r.err, "exists")
	entries, err := os.ReadDir(dest)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing is written into a directory backup did not make")
}

func TestBackupRestore(t *testing.T) {
	data := scenarioData(t)
	tmp := t.TempDir()
	backup := filepath.Join(tmp, "backup")
	r := crewctl(t, nil, "backup", backup, "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, scrub(r.out, tmp, "TMP"), "to TMP/backup at head 46")
	require.Contains(t, r.out, "invariants ok over 46 event(s)")

	r = crewctl(t, nil, "backup", backup, "--data", data)
	require.Equal(t, exitUsage, r.code, "an existing target is refused")

	target := filepath.Join(tmp, "restored")
	r = crewctl(t, nil, "restore", backup, "--data", target, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var out backupOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.True(t, out.Verify.OK)
	require.Equal(t, scenario.head, out.Head)

	r = crewctl(t, nil, "restore", backup, "--data", target)
	require.Equal(t, exitUsage, r.code, "a non-empty target is refused")
	require.Contains(t, r.err, "not empty")

	r = crewctl(t, nil, "replay", "--data", target, "--explain")
	require.Equal(t, exitOK, r.code, r.err)

	r = crewctl(t, nil, "restore", backup)
	require.Equal(t, exitUsage, r.code, "restore needs --data")
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, "empty"), 0o700))
	r = crewctl(t, nil, "restore", filepath.Join(tmp, "empty"), "--data", filepath.Join(tmp, "t2"))
	require.Equal(t, exitOpen, r.code, "an empty backup cannot be opened")

	// A data directory that is not this user's alone (another user may have made it, in a shared parent), which crewd
	// would refuse at its start: restore copied the store and server.key into it all the same.
	shared := filepath.Join(tmp, "shared")
	require.NoError(t, os.Mkdir(shared, 0o700))
	require.NoError(t, os.Chmod(shared, 0o777))
	r = crewctl(t, nil, "restore", backup, "--data", shared)
	require.Equal(t, exitOpen, r.code, "%s%s", r.out, r.err)
	require.Contains(t, r.err, "mode 0777")
	entries, err := os.ReadDir(shared)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing is copied into it")
}

// A store whose index of finished runs' summaries was removed by hand while
// its snapshot, which lists only the runs in memory, stayed: verify says
// so, where before it passed the store.
func TestVerifyReportsARemovedIndexOfSummaries(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, storeDir)
	l, err := eventlog.Open(store, nil)
	require.NoError(t, err)
	now := audittest.Epoch
	e, err := commands.Open(l, commands.Options{Clock: func() time.Time { return now }, ExpiryInterval: -1, Retention: -1, SnapshotEvery: 10})
	require.NoError(t, err)
	admin, orch := events.Actor{Role: events.RoleAdmin}, events.Actor{Role: events.RoleOrchestrator}
	for i := range 3 {
		run := fmt.Sprintf("team_20261001090000_%016x", i)
		for _, r := range []commands.Request{
			{Actor: admin, Command: &commands.RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"}},
			{Actor: orch, Command: &commands.RunTransition{RunID: run, To: "running"}},
			{Actor: orch, Command: &commands.RunTransition{RunID: run, To: "completed"}},
			{Actor: admin, Command: &commands.RunCreate{RunID: run + "x", Team: "t", Goal: "g", Cwd: "/w"}},
		} {
			rep, err := e.Submit(context.Background(), r)
			require.NoError(t, err)
			require.Nil(t, rep.Rejected)
		}
	}
	require.NoError(t, e.Close())
	snap, err := l.LatestSnapshot()
	require.NoError(t, err)
	s, err := projections.DecodeSnapshot(snap.Data)
	require.NoError(t, err)
	require.Positive(t, s.ColdRuns(), "the snapshot relies on the index")
	require.NoError(t, l.Close())

	r := crewctl(t, nil, "verify", "--data", dir)
	require.Equal(t, exitOK, r.code, r.err)

	l, err = eventlog.Open(store, nil)
	require.NoError(t, err)
	require.NoError(t, l.DropSummaries(false))
	require.NoError(t, l.Close())
	r = crewctl(t, nil, "verify", "--data", dir)
	require.Equal(t, exitProblem, r.code, r.out)
	require.Contains(t, r.out, "the index of finished runs' summaries holds 0 runs")
}

// TestVerifyDamagedTable: a data block of a table that fails its checksum, as a disk error leaves it, is damage
// verify reports (exit 1), naming the file; Pebble's default for it is a fatal error, which made verify panic
// (exit 2) on the very damage it looks for.
func TestVerifyDamagedTable(t *testing.T) {
	dir, store := scenarioInTables(t)
	tables, err := filepath.Glob(filepath.Join(store, "*.sst"))
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	f, err := os.OpenFile(tables[0], os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("damage"), 200) // inside one of its first data blocks
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := crewctl(t, nil, "verify", "--data", dir)
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.out, "CORRUPT")
	require.Contains(t, r.out, "checksum mismatch")
	require.Contains(t, r.out, "file "+strings.TrimSuffix(filepath.Base(tables[0]), ".sst"))
}

// TestVerifyStoreWithMissingFiles: a store one of whose files is gone or malformed, so that it does not even open,
// is damage (exit 1, CORRUPT), not "no store" (exit 3, cannot open), which is what verify said of a store whose
// manifest or a table was lost.
func TestVerifyStoreWithMissingFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, store string)
	}{
		{"a table removed", func(t *testing.T, store string) { removeGlob(t, store, "*.sst") }},
		{"a table truncated", func(t *testing.T, store string) {
			tables, err := filepath.Glob(filepath.Join(store, "*.sst"))
			require.NoError(t, err)
			require.NotEmpty(t, tables)
			for _, tb := range tables {
				st, err := os.Stat(tb)
				require.NoError(t, err)
				require.NoError(t, os.Truncate(tb, st.Size()/2))
			}
		}},
		{"the manifest removed", func(t *testing.T, store string) { removeGlob(t, store, "MANIFEST-*") }},
		{"the manifest malformed", func(t *testing.T, store string) {
			ms, err := filepath.Glob(filepath.Join(store, "MANIFEST-*"))
			require.NoError(t, err)
			for _, m := range ms {
				require.NoError(t, os.WriteFile(m, []byte("not a manifest at all"), 0o600))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, store := scenarioInTables(t)
			tc.damage(t, store)

			r := crewctl(t, nil, "verify", "--data", dir)
			require.Equal(t, exitProblem, r.code, r.out+r.err)
			require.Contains(t, r.out, "CORRUPT")
			require.NotContains(t, r.out+r.err, "no store")
		})
	}
}

func removeGlob(t *testing.T, dir, pattern string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		require.NoError(t, os.Remove(f))
	}
}

// scenarioInTables writes the scenario into a new data directory's store and has Pebble flush it into a table.
func scenarioInTables(t *testing.T) (data, store string) {
	t.Helper()
	data = t.TempDir()
	store = filepath.Join(data, storeDir)
	audittest.Scenario(t, store)
	db, err := pebble.Open(store, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: audittest.QuietPebble{}})
	require.NoError(t, err)
	require.NoError(t, db.Close()) // its open flushed the log's writes into a table
	return data, store
}

// TestVerifyNewerBuildsEvent: a store holding an event of a type this build does not know, in a record whose
// checksum and chain hold, is not reported CORRUPT (a backup holds the same event): verify and replay --explain say
// a newer build wrote it, where, and to use that build.
func TestVerifyNewerBuildsEvent(t *testing.T) {
	dir := t.TempDir()
	pos := audittest.Newer(t, filepath.Join(dir, storeDir), "run.archived", 1)
	for _, args := range [][]string{{"verify"}, {"verify", "--json"}, {"replay", "--explain"}} {
		r := crewctl(t, nil, append(args, "--data", dir)...)
		require.Equal(t, exitProblem, r.code, "%v: %s", args, r.err)
		require.NotContains(t, r.out+r.err, "CORRUPT", "%v", args)
		require.NotContains(t, r.out+r.err, "corrupt", "%v", args)
		require.Contains(t, r.err, fmt.Sprintf("position %d (run.archived v1) was written by a newer build", pos), "%v", args)
	}
}

// TestVerifyReadFailureIsNotCorruption: a read of the store that fails (the disk answers EIO) says nothing of the
// bytes stored, so verify reports that it could not check the store (exit 3, "cannot open or read the store"), in
// text and with --json, and never CORRUPT: that sent the operator to restore a backup over a store that may be
// intact.
func TestVerifyReadFailureIsNotCorruption(t *testing.T) {
	data, _ := scenarioInTables(t)
	requireUnreadable(t, data, nil, [][]string{{"verify"}, {"verify", "--json"}})

	// The same store, read without the fault, is whole.
	r := crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

// TestVerifyReadFailureAfterTheWalk: verify reads the newest snapshot again once the walk has checked it, to check
// the index of summaries against it. A read of it that fails there (its blocks left the cache, and the disk answers
// EIO) is a store verify could not read (exit 3); verify ignored it as if there were no snapshot, said "store ok" and
// exited 0 with the index unchecked.
func TestVerifyReadFailureAfterTheWalk(t *testing.T) {
	data, store := scenarioInTables(t)
	snapshots := tableOf(t, store, 'n')
	var mu sync.Mutex
	read := map[int64]bool{}
	again := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Path != snapshots || op.Kind != errorfs.OpFileReadAt {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if read[op.Offset] {
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		read[op.Offset] = true
		return nil
	})
	// NB: a cache too small to keep a block, so the second read of the snapshot reaches the disk.
	opts := &eventlog.Options{CacheSize: 1, MemTableSize: 1 << 12, FS: errorfs.Wrap(vfs.Default, again)}
	r := crewctlOn(t, opts, "verify", "--data", data)
	require.Equal(t, exitOpen, r.code, r.out+r.err)
	require.Empty(t, r.out)
	require.Contains(t, r.err, "could not read the store")
	require.Contains(t, r.err, "input/output error")
}

// requireUnreadable runs each command line on the store of data with the reads of each table's first data block
// failing (EIO), reads at offset 0, which Pebble's open does not make and a walk of the log must; each must say that
// it could not read the store (exit 3), print nothing else and say nothing of damage. With tables given, only their
// reads fail.
func requireUnreadable(t *testing.T, data string, tables []string, cmds [][]string) {
	t.Helper()
	var failed atomic.Int64
	eio := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && (len(tables) == 0 || slices.Contains(tables, op.Path)) && op.Kind == errorfs.OpFileReadAt &&
			op.Offset == 0 {
			failed.Add(1)
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	})
	opts := &eventlog.Options{FS: errorfs.Wrap(vfs.Default, eio)}
	for _, args := range cmds {
		failed.Store(0)
		r := crewctlOn(t, opts, append(args, "--data", data)...)
		require.Positive(t, failed.Load(), "%v: no read failed", args)
		require.Equal(t, exitOpen, r.code, "%v: %s%s", args, r.out, r.err)
		require.NotContains(t, strings.ToLower(scrub(r.out+r.err, data, "DATA")), "corrupt", "%v", args)
		require.Empty(t, r.out, "%v: no report of a store that was not read", args)
		require.Contains(t, r.err, "could not read the store", "%v", args)
		require.Contains(t, r.err, "input/output error", "%v", args)
	}
}

// TestVerifyWarnsOfAnUnusableSnapshot: a snapshot whose seal holds but which start-up cannot load (its bytes are not
// a snapshot this build decodes, or it holds the state at another position than it is stored at) is ignored by
// crewd, which folds the log from position 1 at its next start. The store is whole (exit 0), but verify says so, in
// text and in --json, where it said "store ok" and nothing more.
func TestVerifyWarnsOfAnUnusableSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot func(older []byte) []byte
	}{
		{"bytes that are no snapshot", func([]byte) []byte { return []byte("not a snapshot") }},
		{"the state at another position", func(older []byte) []byte { return older }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, storeDir)
			head := audittest.Scenario(t, store)
			require.Less(t, audittest.SnapshotAt, head)
			l, err := eventlog.Open(store, nil)
			require.NoError(t, err)
			older, err := l.LatestSnapshot()
			require.NoError(t, err)
			require.NoError(t, l.SaveSnapshot(head, tc.snapshot(older.Data)))
			_, info, err := projections.Load(l)
			require.NoError(t, err)
			require.Error(t, info.SnapshotError, "start-up ignores the snapshot")
			require.Zero(t, info.SnapshotPosition)
			require.NoError(t, l.Close())

			r := crewctl(t, nil, "verify", "--data", dir)
			require.Equal(t, exitOK, r.code, r.out+r.err)
			require.Contains(t, r.out, "store ok")
			require.Contains(t, r.out, fmt.Sprintf("warning: the snapshot at position %d is not usable", head))
			require.Contains(t, r.out, "folds the log from position 1")
			require.Contains(t, r.out, "invariants ok")

			r = crewctl(t, nil, "verify", "--data", dir, "--json")
			require.Equal(t, exitOK, r.code, r.out+r.err)
			var out verifyOutput
			require.NoError(t, json.Unmarshal([]byte(r.out), &out))
			require.True(t, out.OK)
			require.NotNil(t, out.UnusableSnapshot)
			require.Equal(t, head, out.UnusableSnapshot.Position)
			require.NotEmpty(t, out.UnusableSnapshot.Reason)
		})
	}

	// A snapshot start-up loads is no warning.
	r := crewctl(t, nil, "verify", "--data", scenarioData(t), "--json")
	require.Equal(t, exitOK, r.code, r.err)
	require.NotContains(t, r.out, "unusableSnapshot")
}
