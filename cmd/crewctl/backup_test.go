package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/stagingtest"
)

// TestRestoreFailingPartWayLeavesNoStore: a restore that fails part-way (here on an entry of the backup's store it
// cannot copy, which sorts after the store's files; a full disk does the same) copied the files before it into
// DIR/store and left them there. That half store has no manifest marker, so crewd started on DIR as a new, empty
// store, and a second restore was refused because DIR was not empty. The copy is put in place only once it is whole.
func TestRestoreFailingPartWayLeavesNoStore(t *testing.T) {
	tmp := t.TempDir()
	backup := filepath.Join(tmp, "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	require.NoError(t, os.WriteFile(filepath.Join(backup, serverKeyFile), []byte("key"), 0o600))
	stray := filepath.Join(backup, storeDir, "zz")
	require.NoError(t, os.Mkdir(stray, 0o700))

	// A target the restore made is taken out again; one that was there stays, empty.
	made, target := filepath.Join(tmp, "made"), filepath.Join(tmp, "restored")
	require.NoError(t, os.Mkdir(target, 0o700))
	for _, dir := range []string{made, target} {
		r := crewctl(t, nil, "restore", backup, "--data", dir)
		require.Equal(t, exitProblem, r.code, r.out+r.err)
		require.Contains(t, r.err, "zz is not a regular file")
	}
	require.NoDirExists(t, made, "the data directory the failed restore made is not left")
	entries, err := os.ReadDir(target)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing of the failed restore is left in %s", target)

	require.NoError(t, os.Remove(stray))
	r := crewctl(t, nil, "restore", backup, "--data", target)
	require.Equal(t, exitOK, r.code, r.out+r.err)
	r = crewctl(t, nil, "verify", "--data", target)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

// TestRestoreFailingLeavesASymlinkItDidNotMake: restore took a DIR that os.Stat found missing for one it would make,
// so a DIR that is a symbolic link to nothing (a volume not mounted yet), on which the restore fails, was removed as
// the restore failed: a failed restore takes out only a DIR it made.
func TestRestoreFailingLeavesASymlinkItDidNotMake(t *testing.T) {
	tmp := t.TempDir()
	backup := filepath.Join(tmp, "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	target := filepath.Join(tmp, "restored")
	require.NoError(t, os.Symlink(filepath.Join(tmp, "not-mounted"), target))

	r := crewctl(t, nil, "restore", backup, "--data", target)
	require.Equal(t, exitOpen, r.code, r.out+r.err)
	st, err := os.Lstat(target)
	require.NoError(t, err, "the symbolic link the failed restore did not make is left")
	require.Equal(t, fs.ModeSymlink, st.Mode().Type())
	require.NoDirExists(t, filepath.Join(tmp, "not-mounted"))
}

// TestRestoreKilledWhileStagingRunsAgain: a restore killed (kill -9, a crash) while it built its copy left that
// copy's staging directory in DIR, a hidden directory nothing removed, and one killed between its two moves into
// place left the backup's server.key there too: the same restore, run again, was refused because DIR was not empty.
// It removes the staging directory a dead restore left, takes over the backup's key, and restores.
func TestRestoreKilledWhileStagingRunsAgain(t *testing.T) {
	tmp := t.TempDir()
	backup := filepath.Join(tmp, "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	require.NoError(t, os.WriteFile(filepath.Join(backup, serverKeyFile), []byte("key"), 0o600))
	for _, tc := range []struct {
		at   string
		left []string // what the killed restore left in target, its staging directory aside
	}{
		{atStaged, nil},
		// Killed between its two moves into place, a restore left the backup's server.key in target alone.
		{atKeyPlaced, []string{serverKeyFile}},
	} {
		t.Run(tc.at, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "restored")
			killedAt(t, tc.at, "restore", backup, "--data", target)
			left := stagingtest.Names(t, target)
			require.Len(t, left, len(tc.left)+1, "the killed restore left its staging directory")
			require.Subset(t, left, tc.left)

			r := crewctl(t, nil, "restore", backup, "--data", target)
			require.Equal(t, exitOK, r.code, r.out+r.err)
			require.ElementsMatch(t, []string{storeDir, serverKeyFile}, stagingtest.Names(t, target))
			r = crewctl(t, nil, "verify", "--data", target)
			require.Equal(t, exitOK, r.code, r.out+r.err)
		})
	}
	// A server.key in target that is not the backup's is not a restore's: target is not empty.
	target := filepath.Join(tmp, "other")
	require.NoError(t, os.Mkdir(target, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(target, serverKeyFile), []byte("another"), 0o600))
	r := crewctl(t, nil, "restore", backup, "--data", target)
	require.Equal(t, exitUsage, r.code, r.out+r.err)
	require.Contains(t, r.err, "is not empty")
}

// TestCrewdRefusesAnUnfinishedCopy: a restore killed (kill -9, a crash) before its copy was in place left its staging
// directory in DIR, and perhaps the backup's server.key; a migrate-store --to pebble killed so left its own. crewd
// started on DIR made a new, empty store there (with the backup's key) and served it, and an operator who missed the
// failed copy ran an empty crewd believing it restored; its admin.token and store then had the same copy, run again,
// refused DIR as not empty. crewd refuses such a data directory, naming the staging directory and what to do, and
// writes nothing there; the copy run again then finishes, and crewd serves it.
func TestCrewdRefusesAnUnfinishedCopy(t *testing.T) {
	tmp := t.TempDir()
	backup := filepath.Join(tmp, "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	require.NoError(t, os.WriteFile(filepath.Join(backup, serverKeyFile), []byte(strings.Repeat("k", 32)), 0o600))
	restore := func(target string) []string { return []string{"restore", backup, "--data", target} }
	for _, tc := range []struct {
		name    string
		at      string
		args    func(target string) []string
		staging string
	}{
		{"restore staged", atStaged, restore, restoreStaging},
		{"restore key placed", atKeyPlaced, restore, restoreStaging},
		{"migrate-store to pebble", atStaged, func(target string) []string {
			return append([]string{"migrate-store", "--to", "pebble", "--data", target}, streamOf(t, scenarioData(t))...)
		}, streamStaging},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "data")
			args := tc.args(target)
			killedAt(t, tc.at, args...)
			left := stagingtest.Names(t, target)

			run := startCrewdOn(t, target)
			require.False(t, run.served, "crewd served an empty store in place of the unfinished copy")
			require.NotZero(t, run.code)
			require.Contains(t, run.stderr, filepath.Join(target, tc.staging))
			require.Contains(t, run.stderr, "run the same crewctl command again")
			require.Equal(t, left, stagingtest.Names(t, target), "crewd wrote nothing in the data directory")

			r := crewctl(t, nil, args...)
			require.Equal(t, exitOK, r.code, r.out+r.err)
			run = startCrewdOn(t, target)
			require.True(t, run.served, run.stderr)
		})
	}
}

// TestCrewdRefusesABareStore: a bare store (a checkpoint, as migrate's pre-migrate backups are) is a data directory
// to crewctl, and crewd started on one made a new, empty store inside it and served that. crewd refuses it and says
// to restore it into a data directory, on which it then serves the copy.
func TestCrewdRefusesABareStore(t *testing.T) {
	bare := filepath.Join(t.TempDir(), "checkpoint")
	audittest.Scenario(t, bare)
	require.Equal(t, exitOK, crewctl(t, nil, "verify", "--data", bare).code, "crewctl reads it as a data directory")
	before := stagingtest.Names(t, bare)

	run := startCrewdOn(t, bare)
	require.False(t, run.served, "crewd served a new, empty store inside the checkpoint")
	require.NotZero(t, run.code)
	require.Contains(t, run.stderr, "crewctl restore "+bare+" --data NEWDIR")
	require.Equal(t, before, stagingtest.Names(t, bare), "crewd wrote nothing in the checkpoint")

	data := filepath.Join(t.TempDir(), "data")
	r := crewctl(t, nil, "restore", bare, "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
	run = startCrewdOn(t, data)
	require.True(t, run.served, run.stderr)
}

// TestOfflineReadOfADirectoryWithoutAStoreLeavesItEmpty: verify (or restore, or an offline backup) of a directory
// that holds no store, such as the empty one a restore is about to copy into, is refused, but its read-only open
// left Pebble's LOCK file there: the restore into it was then refused as the directory was not empty.
func TestOfflineReadOfADirectoryWithoutAStoreLeavesItEmpty(t *testing.T) {
	backup := filepath.Join(t.TempDir(), "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	target := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(target, 0o700))
	r := crewctl(t, nil, "verify", "--data", target)
	require.Equal(t, exitOpen, r.code, r.out+r.err)
	require.Contains(t, r.err, "no store")
	require.Empty(t, stagingtest.Names(t, target))
	r = crewctl(t, nil, "restore", backup, "--data", target)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

// TestBackupOfAnOlderFormatStore: crewd refuses a store at an older format until migrate brings it up, and an operator
// backs it up before running a newer crewlog on it; the offline backup opened it as a writer, which refused it as too
// old, so it could not be backed up at all. The copy keeps the store's format, and the store is left at its own.
func TestBackupOfAnOlderFormatStore(t *testing.T) {
	data := fixtureData(t, "format1")
	dest := filepath.Join(t.TempDir(), "backup")
	r := crewctl(t, nil, "backup", dest, "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
	requireFormat(t, filepath.Join(dest, storeDir), eventlog.FormatInitial)
	requireFormat(t, filepath.Join(data, storeDir), eventlog.FormatInitial)
	r = crewctl(t, nil, "restore", dest, "--data", filepath.Join(t.TempDir(), "restored"))
	require.Equal(t, exitOK, r.code, r.out+r.err)
	r = crewctl(t, nil, "migrate", "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

// TestBackupInsideTheStoreIsRefused: a backup written inside the store it copies put a directory of its own among
// Pebble's files, where restore, which copies a store's files one by one, refuses the data directory from then on,
// and where removing the store (as a restore into the same place needs) removes the backup with it.
func TestBackupInsideTheStoreIsRefused(t *testing.T) {
	data := t.TempDir()
	store := filepath.Join(data, storeDir)
	audittest.Scenario(t, store)
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(store, link))
	for _, dest := range []string{
		filepath.Join(store, "backup"),
		filepath.Join(store, "a", "b"),
		filepath.Join(link, "backup"),
	} {
		r := crewctl(t, nil, "backup", dest, "--data", data)
		require.Equal(t, exitUsage, r.code, "%s: %s%s", dest, r.out, r.err)
		require.Contains(t, r.err, "inside the store")
		require.NoFileExists(t, dest)
		require.NoDirExists(t, dest)
	}
	entries, err := os.ReadDir(store)
	require.NoError(t, err)
	for _, e := range entries {
		require.True(t, e.Type().IsRegular(), "%s in the store", e.Name())
	}
	// A bare store as --data is the store itself.
	r := crewctl(t, nil, "backup", filepath.Join(store, "backup"), "--data", store)
	require.Equal(t, exitUsage, r.code, r.out+r.err)
	// Beside the store, in the data directory, as migrate keeps its backups, is fine.
	r = crewctl(t, nil, "backup", filepath.Join(data, "backup"), "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

// TestBackupFailingLeavesNothing: a backup that failed after its checkpoint (here on a server.key that is a symbolic
// link, which backup does not read through) left DIR holding a store that verifies and no key: a restore of it
// succeeds and crewd, minting a new key, no longer validates any token it gave out; and the same backup, run again
// once the key is mended, was refused because DIR existed.
func TestBackupFailingLeavesNothing(t *testing.T) {
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	key := filepath.Join(t.TempDir(), serverKeyFile)
	require.NoError(t, os.WriteFile(key, []byte(strings.Repeat("k", 32)), 0o600))
	require.NoError(t, os.Symlink(key, filepath.Join(data, serverKeyFile)))

	dest := filepath.Join(t.TempDir(), "backup")
	r := crewctl(t, nil, "backup", dest, "--data", data)
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.err, "not a regular file")
	require.NoDirExists(t, dest, "nothing is left behind")

	require.NoError(t, os.Remove(filepath.Join(data, serverKeyFile)))
	require.NoError(t, os.Rename(key, filepath.Join(data, serverKeyFile)))
	r = crewctl(t, nil, "backup", dest, "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
	require.FileExists(t, filepath.Join(dest, serverKeyFile))
}

// TestRestoreInsideTheBackupIsRefused: a restore into a directory inside the backup's store made that directory there
// before it copied, then failed on it (a store holds only files), and left it behind: every restore of that backup
// failed on it from then on.
func TestRestoreInsideTheBackupIsRefused(t *testing.T) {
	tmp := t.TempDir()
	backup := filepath.Join(tmp, "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	before := storeFiles(t, backup)

	target := filepath.Join(backup, storeDir, "restored")
	r := crewctl(t, nil, "restore", backup, "--data", target)
	require.Equal(t, exitUsage, r.code, r.out+r.err)
	require.Contains(t, r.err, "inside the backup")
	require.Equal(t, before, storeFiles(t, backup), "the backup is untouched")

	r = crewctl(t, nil, "restore", backup, "--data", filepath.Join(tmp, "restored"))
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

// TestRestoreWithoutServerKeySaysSo: a backup may hold no server.key (migrate's own backups, a data directory that
// had none); crewd started on its restore makes a new key, and no token it minted before validates. restore said
// nothing of it, where it says when the key is copied.
func TestRestoreWithoutServerKeySaysSo(t *testing.T) {
	tmp := t.TempDir()
	backup := filepath.Join(tmp, "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	require.NoFileExists(t, filepath.Join(backup, serverKeyFile))

	r := crewctl(t, nil, "restore", backup, "--data", filepath.Join(tmp, "restored"))
	require.Equal(t, exitOK, r.code, r.out+r.err)
	require.Contains(t, r.out, "no server.key copied: crewd makes a new one, and no token minted before validates")
}

// TestBackupSaysWhyCrewdWasNotReached: while crewd holds the store, backup goes through it; one that cannot reach it
// (a token it refuses, another socket, no token file) fell back to opening the store and said only that crewd was
// running and that crewctl backup takes a backup through crewd, which is the command that failed, hiding why.
func TestBackupSaysWhyCrewdWasNotReached(t *testing.T) {
	data, socket := liveDaemon(t)
	wrong := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, os.WriteFile(wrong, []byte("not-the-token\n"), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		why  string // what the error names as the cause
	}{
		{"a token crewd refuses", []string{"--token-file", wrong, "--socket", socket}, "hello rejected"},
		{"another socket", []string{"--socket", socket + ".other"}, socket + ".other"},
		{"no token file", []string{"--token-file", wrong + ".missing", "--socket", socket}, wrong + ".missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "backup")
			r := crewctl(t, dialBroker, append([]string{"backup", dest, "--data", data}, tc.args...)...)
			require.Equal(t, exitOpen, r.code, r.out+r.err)
			require.Contains(t, r.err, "could not reach crewd")
			require.Contains(t, r.err, tc.why)
			require.NotContains(t, r.err, "crewctl backup takes one through crewd")
			require.NoDirExists(t, dest)
		})
	}
}

// failedCheckpoint is a crewd that writes the checkpoint asked of it into place, then answers err.
type failedCheckpoint struct {
	Broker
	err error
}

func (f failedCheckpoint) Call(_ context.Context, method string, params, _ any) error {
	if method != "admin.checkpoint" {
		return fmt.Errorf("unexpected %s", method)
	}
	dir := params.(map[string]any)["dir"].(string)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return f.err
}

func (failedCheckpoint) Close() error { return nil }

// TestBackupLeftBehindByCrewdSaysSo: an online backup whose call is cut off (the connection lost, the command
// interrupted) cannot stop crewd writing its checkpoint, and one crewd refuses after the copy is in place (a failed
// sync) leaves it there; backup left DIR holding a copy with no server.key, which looked like a backup. The
// checkpoint is written in a staging directory beside DIR, which backup removes: DIR is not made, and a cut-off
// backup says that crewd may still be writing there.
func TestBackupLeftBehindByCrewdSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code int
		says string
	}{
		{"cut off", io.ErrUnexpectedEOF, exitOpen, "crewd may still be writing its checkpoint beside "},
		{"refused after its copy", wire.NewError(wire.CodeInternal, "sync failed"), exitProblem, "sync failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "backup")
			tok := filepath.Join(t.TempDir(), "admin.token")
			require.NoError(t, writeFile(tok, "t0ken"))
			dial := func(context.Context, string, string) (Broker, error) { return failedCheckpoint{err: tc.err}, nil }
			r := crewctl(t, dial, "backup", dest, "--data", t.TempDir(), "--token-file", tok)
			require.Equal(t, tc.code, r.code, r.out+r.err)
			require.Contains(t, r.err, tc.says)
			require.Empty(t, stagingtest.Names(t, parent), "no DIR, no staging directory")
		})
	}
}

// TestBackupWhoseSyncFailsIsNotReported: backup reported its copy written (exit 0) without syncing the backup
// directory after it copied server.key into it, nor that directory's entry in its parent: a crash right after could
// leave a backup without its key, which restores and verifies while crewd, minting a new key, validates none of the
// tokens it gave out, or leave no backup at all. A sync that fails now fails the backup, offline or through crewd,
// and the backup leaves nothing.
func TestBackupWhoseSyncFailsIsNotReported(t *testing.T) {
	offline := t.TempDir()
	audittest.Scenario(t, filepath.Join(offline, storeDir))
	require.NoError(t, os.WriteFile(filepath.Join(offline, serverKeyFile), []byte(strings.Repeat("k", 32)), 0o600))
	online, socket := liveDaemon(t)
	for _, how := range []struct {
		name string
		dial dialer
		args []string
	}{
		{"offline", nil, []string{"--data", offline}},
		{"online", dialBroker, []string{"--data", online, "--socket", socket}},
	} {
		for _, tc := range []struct {
			name   string
			failed func(dest, dir string) bool
		}{
			// The backup, built in its staging directory beside dest and renamed to dest.
			{"the backup directory", func(dest, dir string) bool {
				return filepath.Base(dir) == backupCopy && filepath.Dir(filepath.Dir(dir)) == filepath.Dir(dest) &&
					eventlog.IsStagingDirName(filepath.Base(filepath.Dir(dir)), backupStaging)
			}},
			{"its parent", func(dest, dir string) bool { return dir == filepath.Dir(dest) }},
		} {
			t.Run(how.name+"/"+tc.name, func(t *testing.T) {
				dest := filepath.Join(t.TempDir(), "backup")
				failDirSyncOf(t, func(dir string) bool { return tc.failed(dest, dir) })
				r := crewctl(t, how.dial, append([]string{"backup", dest}, how.args...)...)
				require.Equal(t, exitProblem, r.code, r.out+r.err)
				require.Contains(t, r.err, syscall.EIO.Error())
				require.Empty(t, stagingtest.Names(t, filepath.Dir(dest)), "nothing is left behind")
			})
		}
	}
}

// TestRestoreWhoseSyncFailsIsNotReported: restore made its data directory and reported the restore done without
// syncing that directory's entry in its parent, so a crash right after could leave no data directory, or one without
// its store (crewd then starts a new, empty one), nor did it fail when a sync of what it moved in failed. A sync that
// fails now fails the restore, which leaves no data directory where there was none.
func TestRestoreWhoseSyncFailsIsNotReported(t *testing.T) {
	tmp := t.TempDir()
	backup := filepath.Join(tmp, "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	for _, tc := range []struct {
		name   string
		failed func(target string) string
	}{
		{"the data directory", func(target string) string { return target }},
		{"its parent", filepath.Dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "restored")
			failDirSync(t, tc.failed(target))
			r := crewctl(t, nil, "restore", backup, "--data", target)
			require.Equal(t, exitProblem, r.code, r.out+r.err)
			require.Contains(t, r.err, syscall.EIO.Error())
			require.NoDirExists(t, target, "the data directory the failed restore made is not left")
		})
	}
}

// failDirSync makes the sync of the directory dir fail with EIO for the rest of the test.
func failDirSync(t *testing.T, dir string) {
	failDirSyncOf(t, func(d string) bool { return d == dir })
}

// failDirSyncOf makes the sync of every directory failed reports fail with EIO for the rest of the test.
func failDirSyncOf(t *testing.T, failed func(dir string) bool) {
	was := syncDirFile
	t.Cleanup(func() { syncDirFile = was })
	syncDirFile = func(f *os.File) error {
		if failed(f.Name()) {
			return syscall.EIO
		}
		return was(f)
	}
}

// TestBackupSyncsTheParentsItMade: backup makes the missing parents of its directory, and synced the entry of the
// nearest one only, so a crash right after a backup reported written could take away a parent it made, and the
// backup with it. A sync of a directory that holds one it made that fails now fails the backup.
func TestBackupSyncsTheParentsItMade(t *testing.T) {
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	root := t.TempDir()
	failDirSync(t, root)
	dest := filepath.Join(root, "a", "b", "backup")
	r := crewctl(t, nil, "backup", dest, "--data", data)
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.err, syscall.EIO.Error())
	require.NoDirExists(t, dest, "nothing is left behind")
}

// committingCheckpoint is a crewd that commits while it writes its checkpoint: it answers the head it read when the
// checkpoint began, behind by the events committed since, which the copy holds too; or, ahead, a head the copy does
// not reach, as a copy that lost acknowledged events.
type committingCheckpoint struct {
	Broker
	l             *eventlog.Log
	behind, ahead uint64
}

func (c committingCheckpoint) Call(_ context.Context, method string, params, result any) error {
	if method != "admin.checkpoint" {
		return fmt.Errorf("unexpected %s", method)
	}
	dir := params.(map[string]any)["dir"].(string)
	if err := c.l.Checkpoint(dir); err != nil {
		return err
	}
	head, _ := c.l.Head()
	*result.(*checkpointResult) = checkpointResult{Dir: dir, Head: head - c.behind + c.ahead}
	return nil
}

func (committingCheckpoint) Close() error { return nil }

// committingCrewd is a data directory holding a scenario's store at head, and a dialer that reaches crewd as c (its
// log that store's), through the admin token in tokenFile.
func committingCrewd(t *testing.T, c committingCheckpoint) (data string, head uint64, dial dialer, tokenFile string) {
	data = t.TempDir()
	head = audittest.Scenario(t, filepath.Join(data, storeDir))
	l, err := eventlog.Open(filepath.Join(data, storeDir), nil)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	c.l = l
	dial = func(context.Context, string, string) (Broker, error) { return c, nil }
	tokenFile = filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("tok\n"), 0o600))
	return data, head, dial, tokenFile
}

// TestBackupWhileCrewdCommitsNamesTheCopysHead: crewd answers an online checkpoint with its head when the checkpoint
// began, and the copy holds every event committed until it was taken too. backup said it copied the store "at head"
// crewd's answer, lower than the head of the copy it had just verified and printed below it (head 0 above a copy of
// 12 events, under load): it names the copy's head, in text and in --json's head, as restore and an offline backup
// do.
func TestBackupWhileCrewdCommitsNamesTheCopysHead(t *testing.T) {
	data, head, crewd, tokenFile := committingCrewd(t, committingCheckpoint{behind: 5})

	dest := filepath.Join(t.TempDir(), "backup")
	r := crewctl(t, crewd, "backup", dest, "--data", data, "--token-file", tokenFile)
	require.Equal(t, exitOK, r.code, r.out+r.err)
	require.Contains(t, r.out, fmt.Sprintf("at head %d (online checkpoint by crewd)", head))

	dest = filepath.Join(t.TempDir(), "backup")
	r = crewctl(t, crewd, "backup", dest, "--data", data, "--token-file", tokenFile, "--json")
	require.Equal(t, exitOK, r.code, r.out+r.err)
	var out backupOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.True(t, out.Online)
	require.Equal(t, head, out.Verify.Head)
	require.Equal(t, head, out.Head)
}

// TestBackupShortOfCrewdsHeadFails: crewd answers an online checkpoint with its head when the checkpoint began, every
// event of which it had acknowledged, so a copy whose head is below that lacks acknowledged events. backup printed
// both heads and exited 0, reporting as a backup a copy that had lost what crewd acknowledged. It fails, naming both.
func TestBackupShortOfCrewdsHeadFails(t *testing.T) {
	const ahead = 3
	data, head, crewd, tokenFile := committingCrewd(t, committingCheckpoint{ahead: ahead})
	for _, args := range [][]string{nil, {"--json"}} {
		dest := filepath.Join(t.TempDir(), "backup")
		argv := append([]string{"backup", dest, "--data", data, "--token-file", tokenFile}, args...)
		r := crewctl(t, crewd, argv...)
		require.Equal(t, exitProblem, r.code, r.out+r.err)
		require.Contains(t, r.err, fmt.Sprintf("head %d", head), "the copy's head")
		require.Contains(t, r.err, fmt.Sprintf("head %d", head+ahead), "crewd's")
		require.Empty(t, stagingtest.Names(t, filepath.Dir(dest)), "no DIR, no staging directory")
	}
}

// TestBackupOfADamagedStoreLeavesNothing: a backup of a store whose copy fails verification (a record that fails its
// checksum) exited 1 but left the whole copy in DIR, server.key and all: restore refuses it, but a reader of DIR saw
// what looked like a backup. The copy is placed at DIR only once verified; a failed one leaves nothing.
func TestBackupOfADamagedStoreLeavesNothing(t *testing.T) {
	const bad = 20
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	require.NoError(t, os.WriteFile(filepath.Join(data, serverKeyFile), []byte(strings.Repeat("k", 32)), 0o600))
	rewriteRecord(t, filepath.Join(data, storeDir), bad, func(rec []byte) { rec[len(rec)-1] ^= 0x01 })
	for _, args := range [][]string{nil, {"--json"}} {
		parent := t.TempDir()
		dest := filepath.Join(parent, "backup")
		r := crewctl(t, nil, append([]string{"backup", dest, "--data", data}, args...)...)
		require.Equal(t, exitProblem, r.code, r.out+r.err)
		require.Empty(t, stagingtest.Names(t, parent), "no DIR, no staging directory")
		require.Contains(t, r.err, "failed verification")
		require.Contains(t, r.err, fmt.Sprintf("first bad position %d", bad))
	}
}

// TestBackupKilledPartWayLeavesNoBackup: backup made DIR, then wrote the store's checkpoint into it, then server.key:
// killed (kill -9, a crash) between the two it left DIR holding a store that verifies and restores without its key,
// on which crewd mints a new one and validates none of the tokens it gave out. The backup is built in a staging
// directory beside DIR and renamed to DIR once whole and verified: killed at any step, it leaves no DIR, only its
// staging directory, which the next backup beside it removes.
func TestBackupKilledPartWayLeavesNoBackup(t *testing.T) {
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	require.NoError(t, os.WriteFile(filepath.Join(data, serverKeyFile), []byte(strings.Repeat("k", 32)), 0o600))
	for _, at := range []string{atStoreStaged, atStaged} {
		t.Run(at, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "backup")
			killedAt(t, at, "backup", dest, "--data", data)
			require.NoDirExists(t, dest)
			left := stagingtest.Names(t, parent)
			require.Len(t, left, 1)
			require.True(t, eventlog.IsStagingDirName(left[0], backupStaging), left[0])

			r := crewctl(t, nil, "backup", dest, "--data", data)
			require.Equal(t, exitOK, r.code, r.out+r.err)
			require.Equal(t, []string{"backup"}, stagingtest.Names(t, parent), "the dead backup's staging is gone")
			require.ElementsMatch(t, []string{storeDir, serverKeyFile}, stagingtest.Names(t, dest))
			r = crewctl(t, nil, "restore", dest, "--data", filepath.Join(t.TempDir(), "restored"))
			require.Equal(t, exitOK, r.code, r.out+r.err)
			require.Contains(t, r.out, "server.key copied")
		})
	}
}

// TestBackupDoesNotReplaceADirMadeBeforeItsPlace: backup checked that DIR did not exist, then renamed its copy onto
// it, and rename(2) replaces an empty directory: a DIR made between the two (by another user, in a shared directory
// such as the temp directory) was refused only by os.Rename's own check, a moment before the rename, with a bare
// "file exists" (exit 1), and one made after that check was replaced. The copy is moved only where nothing is
// (eventlog.RenameNoReplace, whose test covers a kernel or file system that cannot rename so): a DIR made since
// backup's check is refused as existing (exit 2) and left as it was, and the backup leaves nothing behind.
func TestBackupDoesNotReplaceADirMadeBeforeItsPlace(t *testing.T) {
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	parent := t.TempDir()
	dest := filepath.Join(parent, "backup")
	r := crewctl(t, nil, "backup", dest, "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
	require.ElementsMatch(t, []string{storeDir}, stagingtest.Names(t, dest), "placed where nothing was")

	was := reached
	t.Cleanup(func() { reached = was })
	dest = filepath.Join(parent, "raced")
	reached = func(point string) {
		if point == atPlacing {
			require.NoError(t, os.Mkdir(dest, 0o755)) // made after backup's check, before the move
		}
	}
	r = crewctl(t, nil, "backup", dest, "--data", data)
	require.Equal(t, exitUsage, r.code, r.out+r.err)
	require.Contains(t, r.err, dest+" exists; name a new directory")
	entries, err := os.ReadDir(dest)
	require.NoError(t, err)
	require.Empty(t, entries, "the directory made is left as it was")
	require.ElementsMatch(t, []string{"backup", "raced"}, stagingtest.Names(t, parent), "no staging is left")
}

// TestRestoreDoesNotReplaceWhatIsMadeBeforeItsPlace: restore checked that its target was empty, then renamed its
// copy's server.key and store onto target/server.key and target/store: a server.key made there meanwhile (by a
// restore of another backup run into the same target at once) was replaced with this backup's without a word, to
// lie beside a store it may not be the key of, and an empty directory made at
// target/store was refused only by os.Rename's own check, a moment before rename(2) replaced one made after it, with
// a bare "file exists" (a file there failed it as "not a directory"). Whatever is made there since the check is
// refused, the target not empty, and left as it was, and the restore leaves nothing of its own behind; a server.key
// there that is the backup's, as a restore killed between its two moves leaves it, is the restore's own and is kept.
func TestRestoreDoesNotReplaceWhatIsMadeBeforeItsPlace(t *testing.T) {
	backup := filepath.Join(t.TempDir(), "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	key := []byte(strings.Repeat("k", 32))
	require.NoError(t, os.WriteFile(filepath.Join(backup, serverKeyFile), key, 0o600))
	theirs := func(name string) func(target string) error {
		return func(target string) error { return os.WriteFile(filepath.Join(target, name), []byte("theirs"), 0o600) }
	}
	for _, tc := range []struct {
		name string
		at   string
		make func(target string) error
		left []string // what target holds after, all of it made by make but the restore's
	}{
		{"a server.key", atStaged, theirs(serverKeyFile), []string{serverKeyFile}},
		{"an empty directory at store", atKeyPlaced, func(target string) error {
			return os.Mkdir(filepath.Join(target, storeDir), 0o700)
		}, []string{storeDir}},
		{"a file at store", atKeyPlaced, theirs(storeDir), []string{storeDir}},
		{"the backup's server.key", atStaged, func(target string) error {
			return os.WriteFile(filepath.Join(target, serverKeyFile), key, 0o600)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "restored")
			was := reached
			t.Cleanup(func() { reached = was })
			var made error
			reached = func(point string) {
				if point == tc.at {
					made = tc.make(target) // after restore's check, before the move
				}
			}
			r := crewctl(t, nil, "restore", backup, "--data", target)
			require.NoError(t, made)
			if tc.left == nil {
				require.Equal(t, exitOK, r.code, r.out+r.err)
				require.ElementsMatch(t, []string{storeDir, serverKeyFile}, stagingtest.Names(t, target))
				got, err := os.ReadFile(filepath.Join(target, serverKeyFile))
				require.NoError(t, err)
				require.Equal(t, key, got)
				return
			}
			require.Equal(t, exitUsage, r.code, r.out+r.err)
			require.Contains(t, r.err, target+" is not empty; restore only into an empty or new directory")
			require.Equal(t, tc.left, stagingtest.Names(t, target), "nothing of the restore's is left")
			p := filepath.Join(target, tc.left[0])
			if st, err := os.Lstat(p); err == nil && st.IsDir() {
				require.Empty(t, stagingtest.Names(t, p), "the directory made is left as it was")
				return
			}
			got, err := os.ReadFile(p)
			require.NoError(t, err)
			require.Equal(t, "theirs", string(got), "the file made is left as it was")
		})
	}
}

// TestTwoRestoresIntoOneTargetAtOnce: two restores into one target, run at once, both found it empty, copied, and
// raced to move a server.key and a store in: the second was refused only then (target not empty), or, of a backup
// with no key, put its store in place while the other moved its key beside it, which that one, killed before it
// took the key out again, left there (crewd then mints no key, and the tokens minted before no longer validate). The
// first to claim the target (its staging directory) restores; the other is refused at once, exit 3, that another
// restore is in progress, and leaves nothing of its own: whether it starts once the first holds the target, or found
// it empty as well and reaches for it after the first.
func TestTwoRestoresIntoOneTargetAtOnce(t *testing.T) {
	backup := filepath.Join(t.TempDir(), "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	key := []byte(strings.Repeat("k", 32))
	require.NoError(t, os.WriteFile(filepath.Join(backup, serverKeyFile), key, 0o600))
	keyless := filepath.Join(t.TempDir(), "keyless")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", keyless, "--data", scenarioData(t)).code)
	require.NoFileExists(t, filepath.Join(keyless, serverKeyFile))
	was := reached
	t.Cleanup(func() { reached = was })
	for _, c := range []struct {
		name   string
		second string // the second restore's backup
		// bothEmpty: the second found the target empty too, and reaches for it once the first holds it
		bothEmpty bool
	}{
		{"of one backup, once the first holds the target", backup, false},
		{"of one backup, both finding it empty", backup, true},
		{"of a backup without a key, once the first holds the target", keyless, false},
		{"of a backup without a key, both finding it empty", keyless, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "restored")
			restoreSecond := func() result { return crewctlWith(nil, nil, "restore", c.second, "--data", target) }
			var (
				second   *result
				claiming int
				// the second, run on a goroutine of its own when bothEmpty, says it is about to claim the target and
				// waits to be let go; then it reports its result
				secondClaiming = make(chan struct{})
				letSecondGo    = make(chan struct{})
				secondDone     = make(chan result, 1)
			)
			reached = func(point string) {
				switch {
				case point == atClaiming && c.bothEmpty:
					if claiming++; claiming == 1 { // the first, past its look at the target
						go func() { secondDone <- restoreSecond() }()
						<-secondClaiming
						return
					}
					close(secondClaiming) // the second, past its look at the target too
					<-letSecondGo
				case point == atTargetChecked && second == nil: // the first holds the target
					second = &result{}
					if !c.bothEmpty {
						*second = restoreSecond()
					} else if claiming > 0 { // NB: else no second runs, and the test fails on its result
						close(letSecondGo)
						*second = <-secondDone
					}
				}
			}
			first := crewctl(t, nil, "restore", backup, "--data", target)
			require.NotNil(t, second)
			require.Equal(t, exitOpen, second.code, second.out+second.err)
			require.Contains(t, second.err, "another restore into "+target+" is in progress")
			require.Equal(t, exitOK, first.code, first.out+first.err)
			require.ElementsMatch(t, []string{storeDir, serverKeyFile}, stagingtest.Names(t, target))
			got, err := os.ReadFile(filepath.Join(target, serverKeyFile))
			require.NoError(t, err)
			require.Equal(t, key, got, "the key beside the store is the first's")
		})
	}
}
