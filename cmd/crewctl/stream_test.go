package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/eventlog/stagingtest"
)

// A Pebble store moved into a JetStream stream verifies there, backs up
// from there, and moves back into a Pebble store with the same head and
// hash.
func TestMigrateStoreVerifyAndBackupOnAStream(t *testing.T) {
	data := t.TempDir()
	head := audittest.Scenario(t, filepath.Join(data, storeDir))
	stream := streamOf(t, data)
	r := crewctl(t, nil, append([]string{"migrate-store", "--to", "jetstream", "--replicas", "1", "--data", data}, stream...)...)
	require.Equal(t, exitProblem, r.code, "a second import into the same stream is refused")
	require.Contains(t, r.err, "not empty")

	r = crewctl(t, nil, append([]string{"verify", "--json"}, stream...)...)
	require.Equal(t, exitOK, r.code, r.err)
	var fromStream verifyOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &fromStream))
	require.True(t, fromStream.OK)
	require.Equal(t, head, fromStream.Head)
	r = crewctl(t, nil, "verify", "--json", "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	var fromStore verifyOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &fromStore))
	require.Equal(t, fromStore.HeadHash, fromStream.HeadHash, "the same hash chain")

	backup := filepath.Join(t.TempDir(), "b")
	r = crewctl(t, nil, append([]string{"backup", backup}, stream...)...)
	require.Equal(t, exitOK, r.code, r.err)
	back := filepath.Join(t.TempDir(), "back")
	r = crewctl(t, nil, append([]string{"migrate-store", "--to", "pebble", "--data", back}, stream...)...)
	require.Equal(t, exitOK, r.code, r.err)
	// crewd keeps its store in <data>/store: a copy written as the data directory itself was passed over by a crewd
	// started on it, which made a new, empty store beside it.
	require.DirExists(t, filepath.Join(back, storeDir))
	for _, d := range []string{backup, back} {
		r = crewctl(t, nil, "verify", "--json", "--data", d)
		require.Equal(t, exitOK, r.code, r.err)
		var out verifyOutput
		require.NoError(t, json.Unmarshal([]byte(r.out), &out))
		require.Equal(t, fromStore.HeadHash, out.HeadHash, d)
	}
	r = crewctl(t, nil, append([]string{"replay"}, stream...)...)
	require.Equal(t, exitOK, r.code, r.err)
}

// streamCopies are the commands that copy a stream into a new store: the arguments that copy it to dir.
var streamCopies = []struct {
	name string
	args func(dir string) []string
}{
	{"backup", func(dir string) []string { return []string{"backup", dir} }},
	{"migrate-store", func(dir string) []string { return []string{"migrate-store", "--to", "pebble", "--data", dir} }},
}

// TestStreamCopyFailingLeavesNoStore: backup --nats and migrate-store --to pebble copy a stream into a store that
// crewd would start on. A copy that fails (here a stream that does not exist; a connection lost part-way does the
// same after some events) left the store it had begun, empty or holding a prefix of the log, without a word of it:
// the same command, run again, was refused because the target existed, and crewd started on the prefix.
func TestStreamCopyFailingLeavesNoStore(t *testing.T) {
	srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: t.TempDir(), Listen: true})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	r := crewctl(t, nil, "migrate-store", "--to", "jetstream", "--replicas", "1", "--data", data, "--nats", srv.ClientURL(), "--stream", "CREW")
	require.Equal(t, exitOK, r.code, r.err)

	for _, tc := range streamCopies {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "copy")
			r := crewctl(t, nil, append(tc.args(dir), "--nats", srv.ClientURL(), "--stream", "NOPE")...)
			require.NotEqual(t, exitOK, r.code, r.out+r.err)
			require.NoDirExists(t, filepath.Join(dir, storeDir), "no store is left of a copy that failed")

			r = crewctl(t, nil, append(tc.args(dir), "--nats", srv.ClientURL(), "--stream", "CREW")...)
			require.Equal(t, exitOK, r.code, r.out+r.err)
		})
	}
}

// TestCopyOfStreamKilledWhileStagingRunsAgain: a migrate-store --to pebble or a backup of a stream killed (kill -9, a
// crash) once its copy was built left the copy's staging directory, a whole store, hidden in the directory it made:
// the same command run again was refused, the directory existing. migrate-store removes a directory that a dead copy
// left holding nothing but its staging directory, and copies; a backup, built beside DIR, leaves no DIR, and the next
// removes its staging directory.
func TestCopyOfStreamKilledWhileStagingRunsAgain(t *testing.T) {
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	stream := streamOf(t, data)
	dir := filepath.Join(t.TempDir(), "dir")
	for _, tc := range []struct {
		args []string
		left string // the directory the killed copy left its staging directory in
	}{
		{[]string{"migrate-store", "--to", "pebble", "--data", dir}, dir},
		{[]string{"backup", dir}, filepath.Dir(dir)},
	} {
		require.NoError(t, os.RemoveAll(dir))
		killedWhileStaging(t, append(tc.args, stream...)...)
		require.Len(t, stagingtest.Names(t, tc.left), 1, "%s: the killed copy left its staging directory", tc.args[0])
		r := crewctl(t, nil, append(tc.args, stream...)...)
		require.Equal(t, exitOK, r.code, r.err)
		require.Equal(t, []string{storeDir}, stagingtest.Names(t, dir), tc.args[0])
		require.Equal(t, []string{"dir"}, stagingtest.Names(t, filepath.Dir(dir)), tc.args[0])
	}
	// A DIR that is a symbolic link is refused as existing, even one to a directory a dead copy left: nothing reached
	// through a link is removed.
	require.NoError(t, os.RemoveAll(dir))
	killedWhileStaging(t, append([]string{"migrate-store", "--to", "pebble", "--data", dir}, stream...)...)
	target := dir + ".target"
	require.NoError(t, os.Rename(dir, target))
	require.NoError(t, os.Symlink(target, dir))
	r := crewctl(t, nil, append([]string{"backup", dir}, stream...)...)
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "exists")
	require.Len(t, stagingtest.Names(t, target), 1)
}

// newStream starts a JetStream server and returns the flags that name the stream CREW there, which does not exist.
func newStream(t *testing.T) []string {
	t.Helper()
	srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: t.TempDir(), Listen: true})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	return []string{"--nats", srv.ClientURL(), "--stream", "CREW"}
}

// streamOf moves data's store into the stream CREW of a new JetStream server (migrate-store --to jetstream) and
// returns the flags that name the stream.
func streamOf(t *testing.T, data string) []string {
	t.Helper()
	stream := newStream(t)
	r := crewctl(t, nil, append([]string{"migrate-store", "--to", "jetstream", "--replicas", "1", "--data", data}, stream...)...)
	require.Equal(t, exitOK, r.code, r.err)
	return stream
}

// TestTempCopyOfStreamKilledIsRemovedByTheNext: verify (or replay) of a stream and migrate-store --to jetstream copy
// the log into the temporary directory; one killed (kill -9, a crash) while its copy was there left it, a whole
// copy of the log, for good, and every such kill took as much space again. The next copy removes those a dead
// crewctl left.
func TestTempCopyOfStreamKilledIsRemovedByTheNext(t *testing.T) {
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	for _, tc := range []struct {
		name string
		args func(stream []string) []string
	}{
		{"verify", func(stream []string) []string { return append([]string{"verify"}, stream...) }},
		{"migrate-store", func(stream []string) []string {
			return append([]string{"migrate-store", "--to", "jetstream", "--replicas", "1", "--data", data}, stream...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := newStream(t)
			if tc.name == "verify" {
				stream = streamOf(t, data)
			}
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			killedWhileStaging(t, tc.args(stream)...)
			require.Len(t, stagingtest.Names(t, tmp), 1, "the killed crewctl left its copy")
			r := crewctl(t, nil, append([]string{"verify"}, stream...)...)
			require.Equal(t, exitOK, r.code, r.err)
			require.Empty(t, stagingtest.Names(t, tmp))
		})
	}
}

// TestStreamCopyWhoseSyncFailsLeavesNothing: backup --nats and migrate-store --to pebble made their target directory
// and reported the copy written without syncing that directory's entry in its parent, so a crash right after could
// leave no copy at all. A sync that fails now fails the command, which leaves nothing.
func TestStreamCopyWhoseSyncFailsLeavesNothing(t *testing.T) {
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	stream := streamOf(t, data)
	for _, tc := range streamCopies {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "copy")
			failDirSync(t, filepath.Dir(target))
			r := crewctl(t, nil, append(tc.args(target), stream...)...)
			require.Equal(t, exitProblem, r.code, r.out+r.err)
			require.Contains(t, r.err, syscall.EIO.Error())
			require.NoDirExists(t, target, "nothing is left behind")
		})
	}
}

// TestStreamFlagsOnlyWhereTheyApply: a stream setting a command would not use is a usage error naming it, where the
// command ran without it: verify --stream PROD without --nats verified --data's store and said it was sound.
func TestStreamFlagsOnlyWhereTheyApply(t *testing.T) {
	data := scenarioData(t)
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--data", data, "--stream", "PROD"}, "--stream applies only with --nats"},
		{[]string{"replay", "--data", data, "--nats-creds", "crewd.creds"}, "--nats-creds applies only with --nats"},
		{[]string{"runs", "--nats", "nats://127.0.0.1:1", "--token-file", tok}, "runs: --nats applies only to verify, replay, backup and migrate-store"},
		{[]string{"migrate-store", "--nats", "nats://127.0.0.1:1", "--to", "pebble", "--replicas", "5", "--data", filepath.Join(t.TempDir(), "d")},
			"migrate-store: --replicas applies only with --to jetstream"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			f := newFake(t)
			r := crewctl(t, f.dial, tc.args...)
			require.Equal(t, exitUsage, r.code, r.err)
			require.Contains(t, r.err, tc.want)
			require.Empty(t, f.calls)
		})
	}
}

// TestStreamCopyDoesNotReplaceWhatIsMadeBeforeItsPlace: migrate-store --to pebble made its data directory, copied the
// stream beside its store and renamed the copy onto DIR/store, where an empty directory made there meanwhile was
// refused only by os.Rename's own check, a moment before rename(2) replaced one made after it, with a bare "file
// exists" (exit 1), and a file made there failed it as "not a directory". Whatever is made there since is refused as
// existing (exit 2), in the rename itself, and left as it was, and the copy leaves no staging directory behind.
func TestStreamCopyDoesNotReplaceWhatIsMadeBeforeItsPlace(t *testing.T) {
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir))
	stream := streamOf(t, data)
	for _, tc := range []struct {
		name string
		make func(p string) error
		left func(t *testing.T, p string) // requires that what was made is left as it was
	}{
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }, func(t *testing.T, p string) {
			require.Empty(t, stagingtest.Names(t, p))
		}},
		{"a file", func(p string) error { return os.WriteFile(p, []byte("theirs"), 0o644) }, func(t *testing.T, p string) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.Equal(t, "theirs", string(b))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			store := filepath.Join(dir, storeDir)
			was := reached
			t.Cleanup(func() { reached = was })
			var made error
			reached = func(point string) {
				if point == atStaged {
					made = tc.make(store) // after migrate-store's check, before the move
				}
			}
			r := crewctl(t, nil, append([]string{"migrate-store", "--to", "pebble", "--data", dir}, stream...)...)
			require.NoError(t, made)
			require.Equal(t, exitUsage, r.code, r.out+r.err)
			require.Contains(t, r.err, store+" exists; name a new data directory")
			tc.left(t, store)
			require.Equal(t, []string{storeDir}, stagingtest.Names(t, dir), "no staging is left")
		})
	}
}

// TestMigrateStoreHelpSaysWhereTheCrewdsStart: a crewd joining a stream refuses a data directory whose store is not a
// copy of the stream (it holds no stream sequence), --data's own store that --to jetstream copied included, so the
// help says where the crewds start instead: an empty data directory with --data's server.key and admin.token, where
// it said nothing of the next step and an operator restarted crewd on --data, to be refused with "copy a Pebble store
// in with migrate-store".
func TestMigrateStoreHelpSaysWhereTheCrewdsStart(t *testing.T) {
	r := crewctl(t, nil, "migrate-store", "--help")
	require.Equal(t, exitOK, r.code, r.err)
	for _, want := range []string{"empty data directory", "server.key", "admin.token", "--data's own"} {
		require.Contains(t, r.out, want)
	}
}

// TestMigrateStoreIntoADataDirectoryNotTheUsersAloneCopiesNothing: migrate-store --to pebble refuses a data directory
// that exists, and makes its own as crewd does: one that another user made at its path after that check (in a shared
// parent), and that group or others may reach, is refused before anything is copied into it, as crewd would refuse to
// start on it, rather than taken as made.
func TestMigrateStoreIntoADataDirectoryNotTheUsersAloneCopiesNothing(t *testing.T) {
	stream := streamOf(t, scenarioData(t))
	was := reached
	t.Cleanup(func() { reached = was })
	for _, mode := range []os.FileMode{0o777, 0o750, 0o701} {
		t.Run(mode.String(), func(t *testing.T) {
			shared := filepath.Join(t.TempDir(), "shared")
			reached = func(point string) {
				if point == atMakingDataDir {
					require.NoError(t, os.Mkdir(shared, 0o700))
					require.NoError(t, os.Chmod(shared, mode))
				}
			}
			r := crewctl(t, nil, append([]string{"migrate-store", "--to", "pebble", "--data", shared}, stream...)...)
			require.Equal(t, exitOpen, r.code, r.out+r.err)
			require.Contains(t, r.err, fmt.Sprintf("has mode %04o", mode))
			entries, err := os.ReadDir(shared)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing is copied into it")
		})
	}
}
