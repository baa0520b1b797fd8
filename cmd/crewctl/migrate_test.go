package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/stagingtest"
	"github.com/crewlog/crewlog/migrations/migrationstest"
)

// migrate on a copy of the committed format-1 store: the dry run writes
// nothing, the real run takes a backup (still at format 1) first, a second
// run has nothing to do.
func TestMigrate(t *testing.T) {
	data := fixtureData(t, "format1")

	r := crewctl(t, nil, "migrate", "--data", data, "--dry-run")
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "store is at format 1; 3 step(s) pending (dry run, nothing written)")
	require.Contains(t, r.out, "1 → 2 stream-catalog")
	require.Contains(t, r.out, "2 → 3 principal-outcomes")
	require.Contains(t, r.out, "3 → 4 chunked-snapshots")

	r = crewctl(t, nil, "migrate", "--data", data, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var out migrateOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.Equal(t, uint32(1), out.From)
	require.Equal(t, eventlog.CurrentFormat, out.To)
	require.Len(t, out.Applied, 3)
	rel, err := filepath.Rel(data, out.Backup)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(rel, filepath.Join("backups", "pre-migrate-1-")), rel)

	b, err := eventlog.Open(out.Backup, &eventlog.Options{ReadOnly: true})
	require.NoError(t, err, "the backup is a store")
	f, err := b.Format()
	require.NoError(t, err)
	require.Equal(t, eventlog.FormatInitial, f, "taken before the first step")
	require.NoError(t, b.Close())

	r = crewctl(t, nil, "migrate", "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	require.Equal(t, "store is at format 4, the current one: nothing to do\n", r.out)
	r = crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

// migrate takes a store written at format 2 to format 3: its outcomes move to their principals and verify, which
// checks each against its events, passes.
func TestMigrateFormat2(t *testing.T) {
	data := fixtureData(t, "format2")
	r := crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitOK, r.code, "a format-2 store verifies read-only: %s", r.out+r.err)
	r = crewctl(t, nil, "migrate", "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "2 → 3 principal-outcomes")
	r = crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

func TestImportPicrewCommand(t *testing.T) {
	data := t.TempDir()
	root := filepath.Join("..", "..", "migrations", "picrew", "testdata", "root")
	r := crewctl(t, nil, "import", "picrew", root, "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "2 run(s): appended ")
	require.Contains(t, r.out, "skipped state/runs/team_20261002080000_0123456789abcdef/events.jsonl:8: corrupt event line: skipped")

	r = crewctl(t, nil, "import", "picrew", root, "--data", data, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var sum struct {
		Appended int `json:"appended"`
		Existing int `json:"existing"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &sum))
	require.Zero(t, sum.Appended, "a second import adds nothing")
	require.Positive(t, sum.Existing)

	r = crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

// TestMigrateTwiceInOneSecondKeepsBothBackups: migrate names its backup by the second it starts in, so a second
// migrate in the same second (a store put back from its backup and migrated again, a rerun after a failed step)
// found its backup's name taken and refused: "no backup, nothing migrated". Each backup gets a name of its own, and
// the earlier one is left as it was.
func TestMigrateTwiceInOneSecondKeepsBothBackups(t *testing.T) {
	data := t.TempDir()
	fixture := filepath.Join("..", "..", "migrations", "testdata", "format1")
	frozen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	migrate := func() migrateOutput {
		t.Helper()
		require.NoError(t, os.RemoveAll(filepath.Join(data, storeDir)))
		require.NoError(t, os.Rename(migrationstest.CopyDir(t, fixture), filepath.Join(data, storeDir)))
		var out, errb bytes.Buffer
		a := &app{io: stdio{out: &out, err: &errb}, now: func() time.Time { return frozen }}
		code := a.run(context.Background(), []string{"migrate", "--data", data, "--json"})
		require.Equal(t, exitOK, code, out.String()+errb.String())
		var m migrateOutput
		require.NoError(t, json.Unmarshal(out.Bytes(), &m))
		return m
	}
	first := migrate()
	firstFiles := storeFiles(t, first.Backup)
	second := migrate()
	require.NotEqual(t, first.Backup, second.Backup)
	require.Equal(t, firstFiles, storeFiles(t, first.Backup), "the first backup is left as it was")
	for _, b := range []string{first.Backup, second.Backup} {
		requireFormat(t, b, eventlog.FormatInitial)
	}
}

// fixtureData is a new data directory holding a copy of the committed store migrations/testdata/name.
func fixtureData(t *testing.T, name string) string {
	t.Helper()
	data := t.TempDir()
	store := migrationstest.CopyDir(t, filepath.Join("..", "..", "migrations", "testdata", name))
	require.NoError(t, os.Rename(store, filepath.Join(data, storeDir)))
	return data
}

// requireFormat checks that store is a store at format want.
func requireFormat(t *testing.T, store string, want uint32) {
	t.Helper()
	l, err := eventlog.Open(store, &eventlog.Options{ReadOnly: true})
	require.NoError(t, err, "%s is a store", store)
	f, err := l.Format()
	require.NoError(t, err)
	require.Equal(t, want, f, store)
	require.NoError(t, l.Close())
}

// TestNewStoreIsPrivate: a data directory and store crewctl creates are its user's alone, whatever umask it runs
// with, as crewd's are: crewd refuses a data directory or store that others may reach, so one made 0755 by an
// import could not be started on (and its messages were readable by every user).
func TestNewStoreIsPrivate(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o022))
	data := filepath.Join(t.TempDir(), "new", "data")
	root := filepath.Join("..", "..", "migrations", "picrew", "testdata", "root")
	r := crewctl(t, nil, "import", "picrew", root, "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	require.NoError(t, filepath.WalkDir(filepath.Dir(data), func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		require.Zero(t, fi.Mode().Perm()&0o077, "%s has mode %04o", p, fi.Mode().Perm())
		return nil
	}))
}

// TestImportPicrewDryRunWritesNothing: --dry-run reports what an import would append and writes nothing: no store
// is created in a new data directory, and an existing store is only read (a writable open flushes its WAL into new
// files).
func TestImportPicrewDryRunWritesNothing(t *testing.T) {
	root := filepath.Join("..", "..", "migrations", "picrew", "testdata", "root")
	data := filepath.Join(t.TempDir(), "data")
	r := crewctl(t, nil, "import", "picrew", root, "--data", data, "--dry-run")
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "2 run(s): would append ")
	require.NoDirExists(t, data, "a dry run creates no store")

	data = t.TempDir()
	r = crewctl(t, nil, "import", "picrew", root, "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	before := storeFiles(t, data)
	r = crewctl(t, nil, "import", "picrew", root, "--data", data, "--dry-run", "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var sum struct {
		Appended int `json:"appended"`
		Existing int `json:"existing"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &sum))
	require.Zero(t, sum.Appended)
	require.Positive(t, sum.Existing, "the store's writes were found")
	require.Equal(t, before, storeFiles(t, data), "the store was only read")
}

// TestImportPicrewDryRunKilledIsRemovedByTheNext: a dry run into a data directory without a store plans against an
// empty store of its own in the temporary directory; one killed (kill -9, a crash) while it planned left that store
// there for good, and every such kill another. The next dry run removes those a dead crewctl left.
func TestImportPicrewDryRunKilledIsRemovedByTheNext(t *testing.T) {
	root := filepath.Join("..", "..", "migrations", "picrew", "testdata", "root")
	data := filepath.Join(t.TempDir(), "data")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	killedAt(t, atDryRun, "import", "picrew", root, "--data", data, "--dry-run")
	require.Len(t, stagingtest.Names(t, tmp), 1, "the killed dry run left its store")
	r := crewctl(t, nil, "import", "picrew", root, "--data", data, "--dry-run")
	require.Equal(t, exitOK, r.code, r.err)
	require.Empty(t, stagingtest.Names(t, tmp))
	require.NoDirExists(t, data, "a dry run creates no store")
}

// storeFiles names the files of data's store (data itself when it is a bare store) with their sizes.
func storeFiles(t *testing.T, data string) map[string]int64 {
	t.Helper()
	entries, err := os.ReadDir(storePath(data))
	require.NoError(t, err)
	out := map[string]int64{}
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		out[e.Name()] = fi.Size()
	}
	return out
}

// TestMigrateOfAStoreMissingARecordSaysWhere: the step to format 3 reads the first record of each outcome, and a
// record missing from the log (a gap) failed it with Pebble's bare "not found", named no position, and sent the
// operator to run migrate again, which meets the same gap: the store is damaged at that position, and migrate says
// so (exit 1), as it does for a record that fails its checksum: before anything is written, and forced
// (--allow-damaged) when its step meets the gap, naming the backup.
func TestMigrateOfAStoreMissingARecordSaysWhere(t *testing.T) {
	const missing = 3 // the first record of an outcome of the format-2 store
	data := fixtureData(t, "format2")
	store := filepath.Join(data, storeDir)
	db, err := pebble.Open(store, &pebble.Options{Logger: audittest.QuietPebble{}})
	require.NoError(t, err)
	require.NoError(t, db.Delete(binary.BigEndian.AppendUint64([]byte{'e'}, missing), pebble.Sync))
	require.NoError(t, db.Close())

	r := crewctl(t, nil, "migrate", "--data", data)
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.err, fmt.Sprintf("corrupt at position %d", missing))
	require.Contains(t, r.err, "missing record")
	require.Contains(t, r.err, "nothing migrated, no backup taken")
	// Forced past its verification, the step meets the gap.
	r = crewctl(t, nil, "migrate", "--data", data, "--allow-damaged")
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.err, fmt.Sprintf("corrupt at position %d", missing))
	require.Contains(t, r.err, "missing record")
	require.Contains(t, r.err, "backup in ")
	require.NotContains(t, r.err, "run migrate again", "running it again meets the same gap")
}

// TestMigrateWhoseBackupIsNotDurableMigratesNothing: migrate made its backups directory, checkpointed the store into
// it and went on to migrate without syncing that directory's entry in the data directory, so a crash during the
// migration could leave a store part-way migrated and no backup of it, which migrate had named. A sync that fails
// now stops migrate before it changes the store.
func TestMigrateWhoseBackupIsNotDurableMigratesNothing(t *testing.T) {
	data := fixtureData(t, "format1")
	failDirSync(t, data)
	r := crewctl(t, nil, "migrate", "--data", data)
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.err, "no backup, nothing migrated")
	require.Contains(t, r.err, syscall.EIO.Error())
	requireFormat(t, filepath.Join(data, storeDir), eventlog.FormatInitial)
}

// TestMigrateRefusesADamagedStore: migrate opened a store whose records pass their checksums but whose hash chain is
// broken (a record its writer did not write there), took its backup and appended its steps after the damage, and
// reported the store migrated while verify still reported it damaged: the new events chained onto a record no writer
// wrote. A store verify finds damaged is refused before anything is written, naming the damage, unless
// --allow-damaged says to migrate it all the same.
func TestMigrateRefusesADamagedStore(t *testing.T) {
	const bad = 3
	breakChain := func(rec []byte) {
		rec[5] ^= 0x01 // the stored hash (eventlog's doc: crc32c over bytes 5.., then the hash), re-sealed
		binary.BigEndian.PutUint32(rec[1:5], crc32.Checksum(rec[5:], crc32.MakeTable(crc32.Castagnoli)))
	}
	for _, tc := range []struct {
		name   string
		damage func(rec []byte)
		reason string
	}{
		{"hash chain broken", breakChain, "hash chain broken"},
		{"checksum fails", func(rec []byte) { rec[len(rec)-1] ^= 0x01 }, "checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := fixtureData(t, "format1")
			store := filepath.Join(data, storeDir)
			rewriteRecord(t, store, bad, tc.damage)
			before := storeFiles(t, data)

			r := crewctl(t, nil, "migrate", "--data", data)
			require.Equal(t, exitProblem, r.code, r.out+r.err)
			require.Contains(t, r.err, fmt.Sprintf("corrupt at position %d", bad))
			require.Contains(t, r.err, tc.reason)
			require.Contains(t, r.err, "nothing migrated")
			require.Contains(t, r.err, "--allow-damaged")
			requireFormat(t, store, eventlog.FormatInitial)
			require.NoDirExists(t, filepath.Join(data, "backups"), "no backup taken")
			require.Equal(t, before, storeFiles(t, data), "nothing written")
		})
	}
	// Forced, migrate takes its backup and migrates; verify still names the damage.
	data := fixtureData(t, "format1")
	rewriteRecord(t, filepath.Join(data, storeDir), bad, breakChain)
	r := crewctl(t, nil, "migrate", "--data", data, "--allow-damaged")
	require.Equal(t, exitOK, r.code, r.out+r.err)
	require.Contains(t, r.out, "backup written to ")
	requireFormat(t, filepath.Join(data, storeDir), eventlog.CurrentFormat)
	r = crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.out, fmt.Sprintf("CORRUPT at position %d", bad))
}
