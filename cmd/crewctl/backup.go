package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/eventlog"
)

// backupOutput is the --json document of backup and restore.
type backupOutput struct {
	From      string       `json:"from"`
	To        string       `json:"to"`
	Head      uint64       `json:"head"`
	Online    bool         `json:"online"`
	ServerKey bool         `json:"serverKey"`
	Verify    verifyOutput `json:"verify"`
}

func (a *app) backupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "backup DIR",
		Short: "Write a consistent, verified copy of the store to DIR",
		Long: `backup writes a consistent checkpoint of the store to DIR (which must not
exist, nor lie inside the store) as a data directory (DIR/store, and
DIR/server.key so the tokens crewd minted stay valid after a restore; the
admin token is not copied), then verifies the copy. The copy is built in
a hidden staging directory beside DIR (.crewlog-backup-N, in DIR's parent)
and renamed to DIR only once it is whole (its store and server.key), synced
and verified: DIR holds a whole, verified backup or does not exist. A backup
that fails (among them one whose copy fails verification, or whose copy's
head is below the one crewd answered for its checkpoint) leaves nothing
behind. One killed part-way (kill -9, a crash) leaves its staging directory,
which the next backup beside it removes once no process holds it.

While crewd runs (its socket answers the admin token) the daemon writes the
checkpoint itself (admin.checkpoint) and keeps serving, and names its
server.key: backup fails, leaving nothing behind, when the key in --data is
not crewd's. crewd refuses (disk-full) a checkpoint its disks have no room
for: beside the store, one whose copied write-ahead logs and MANIFEST would
take the free space below its --min-free-mib (the tables are hard links);
on another file system, one whose whole store does not fit in what is free
there. Otherwise backup opens the store directly. With --nats it copies a
JetStream cluster's stream.`,
		Args: args(1, "the backup directory"),
		RunE: func(cmd *cobra.Command, argv []string) error { return a.backup(cmd.Context(), argv[0]) },
	}
}

func (a *app) backup(ctx context.Context, dest string) error {
	if err := dropAbandoned(dest); err != nil {
		return openErr(fmt.Errorf("crewctl: backup: %w", err))
	}
	if _, err := os.Lstat(dest); err == nil {
		return usagef("backup: %s exists; name a new directory", dest)
	}
	// NB: crewd resolves the path, and its working directory is not ours.
	abs, err := filepath.Abs(dest)
	if err != nil {
		return usagef("backup: %v", err)
	}
	if a.fromStream() {
		return a.backupStream(ctx, abs)
	}
	// NB: Pebble's directory holds nothing but its files: restore, which copies them one by one, refuses a store
	// that holds a directory, and a backup there goes when the store is removed.
	if store := storePath(a.dataDir); store != "" && eventlog.Inside(abs, store) {
		return usagef("backup: %s is inside the store %s; name a directory outside it", dest, store)
	}
	b, unreached := a.reachDaemon(ctx)
	if unreached == nil {
		defer b.Close()
		return a.backupOnline(ctx, b, abs)
	}
	return a.backupOffline(ctx, abs, unreached)
}

// backupStaging prefixes the name of the staging directory a backup is built in, beside its DIR. It holds one entry,
// backupCopy, the backup (its store and server.key) that is renamed to DIR once whole and verified. NB: the copy is a
// directory of its own rather than the staging directory itself, whose lock (eventlog.StagingDir) would stop the
// checkpoint written into it, which locks its parent while it makes a staging directory of its own there.
const backupStaging = ".crewlog-backup-"

const backupCopy = "backup"

// stageBackup makes the staging directory the backup to dest is built in, in dest's parent (made when missing), after
// removing those a backup killed part-way left there, and returns it with the directory the copy is built in. NB:
// dest itself is made only by placeBackup, once the copy is whole and verified: a backup that fails or is killed
// leaves no dest, nor a copy that looks like a backup there.
func stageBackup(dest string) (sd *eventlog.StagingDir, copyDir string, err error) {
	parent := filepath.Dir(dest)
	made := daemon.MissingDirs(parent)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, "", openErr(fmt.Errorf("crewctl: backup: %w", err))
	}
	// NB: placeBackup syncs dest's parent once the backup is in place; the parents made here are synced now, or a
	// crash after the backup was reported written could take one away, and the backup with it.
	for _, d := range made {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return nil, "", problemf("backup: %v", err)
		}
	}
	if sd, err = eventlog.NewStagingDir(parent, backupStaging, backupCopy); err != nil {
		return nil, "", openErr(fmt.Errorf("crewctl: backup: %w", err))
	}
	copyDir = filepath.Join(sd.Dir, backupCopy)
	if err := os.Mkdir(copyDir, 0o700); err != nil {
		sd.Remove()
		return nil, "", openErr(fmt.Errorf("crewctl: backup: %w", err))
	}
	return sd, copyDir, nil
}

// placeBackup moves the whole, verified backup built in copyDir to dest, and makes it durable: the entries of copyDir
// (its server.key's among them, which the checkpoint's own sync came before) and dest's entry in its parent. NB: a
// backup reported written is one a crash keeps. A dest made since backup checked (by another user, in a shared
// directory such as the temp directory) is refused rather than replaced, as rename replaces an empty directory: the
// move is eventlog.RenameNoReplace's.
func placeBackup(copyDir, dest string) error {
	if err := syncDir(copyDir); err != nil {
		return problemf("backup: %v", err)
	}
	reached(atPlacing)
	if err := eventlog.RenameNoReplace(copyDir, dest); errors.Is(err, fs.ErrExist) {
		return usagef("backup: %s exists; name a new directory", dest)
	} else if err != nil {
		return problemf("backup: %v", err)
	}
	if err := syncDir(filepath.Dir(dest)); err != nil {
		if rerr := os.RemoveAll(dest); rerr != nil {
			return problemf("backup: %v (and removing %s: %v)", err, dest, rerr)
		}
		return problemf("backup: %v", err)
	}
	return nil
}

// dropAbandoned removes the directory dir that a copy killed part-way (kill -9, a crash) made and left holding
// nothing but its stale staging directories (eventlog.RemoveStaleStagingDirs): a checkpoint's or a copy of a
// stream's. Such a copy (migrate-store's data directory; a backup's DIR, which backups once built in DIR itself)
// makes dir itself and refuses one that exists, so its next run was refused too. NB: a dir that held no stale staging
// directory, or holds anything else, is left as it is.
func dropAbandoned(dir string) error {
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		return nil // none, or not a directory crewctl made (a symbolic link, a file): refused as existing
	}
	checkpoints, err := eventlog.RemoveStaleCheckpoints(dir)
	if err != nil {
		return err
	}
	streams, err := eventlog.RemoveStaleStagingDirs(dir, streamStaging, storeDir)
	if err != nil {
		return err
	}
	if checkpoints+streams == 0 {
		return nil
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) == 0 {
		_ = os.Remove(dir) // NB: one that cannot go (a mount point) is refused as existing, as before
	}
	return nil
}

// reachDaemon connects to crewd when it is running, or says why it did not: without a token or an answering
// socket, backup takes the offline path (which tells a store held by an unreachable daemon apart by its lock).
func (a *app) reachDaemon(ctx context.Context) (Broker, error) {
	if a.dial == nil {
		return nil, errors.New("no way to dial crewd")
	}
	return a.connect(ctx)
}

// checkpointResult is the answer of admin.checkpoint.
type checkpointResult struct {
	Dir  string `json:"dir"`
	Head uint64 `json:"head"`
	// ServerKeyID names the running daemon's server key (broker.ServerKeyID); a
	// daemon older than it answers none.
	ServerKeyID string `json:"serverKeyId"`
}

// backupOnline has crewd write the checkpoint while it keeps committing.
func (a *app) backupOnline(ctx context.Context, b Broker, dest string) error {
	sd, copyDir, err := stageBackup(dest)
	if err != nil {
		return err
	}
	defer sd.Remove()
	var res checkpointResult
	err = call(ctx, b, "admin.checkpoint", map[string]any{"dir": filepath.Join(copyDir, storeDir)}, &res)
	if err != nil {
		// NB: cut off (call's exitOpen), crewctl cannot stop crewd writing the checkpoint, nor wait for it: what
		// crewd leaves in the staging directory, which this backup removes as it ends, is a stale one the next
		// backup removes.
		if codeOf(err) == exitOpen {
			return hinted(err, fmt.Sprintf("crewd may still be writing its checkpoint beside %s (in %s*): %s was "+
				"not made, and the next backup there removes what crewd leaves", dest, backupStaging, dest))
		}
		return err
	}
	reached(atStoreStaged)
	out := backupOutput{From: a.dataDir, To: dest, Head: res.Head, Online: true}
	if out.ServerKey, err = copySecret(filepath.Join(a.dataDir, serverKeyFile),
		filepath.Join(copyDir, serverKeyFile)); err != nil {
		return problemf("backup: %v", err)
	}
	if err := a.checkServerKey(res.ServerKeyID, filepath.Join(copyDir, serverKeyFile), out.ServerKey); err != nil {
		return problemf("%v", err)
	}
	return a.finishBackup(out, copyDir)
}

// checkServerKey checks that the server key backup copied to path (copied
// false: none was found) is the running daemon's, which admin.checkpoint
// named by want (empty: a daemon that names none, whose key cannot be
// checked). crewctl takes the key from its own --data, while the daemon
// that wrote the checkpoint was reached through --socket and may keep its
// key elsewhere.
func (a *app) checkServerKey(want, path string, copied bool) error {
	if want == "" {
		return nil
	}
	if !copied {
		return fmt.Errorf("backup: crewd has a server.key and %s holds none: pass crewd's data directory as --data "+
			"(without its key, the tokens crewd minted would not validate after a restore)", a.dataDir)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("backup: %v", err)
	}
	if broker.ServerKeyID(key) != want {
		return fmt.Errorf("backup: the server.key in %s is not the running crewd's: pass crewd's data directory as --data "+
			"(with another key, the tokens crewd minted would not validate after a restore)", a.dataDir)
	}
	return nil
}

// backupOffline opens the store itself: crewd was not reached, for the reason unreached.
func (a *app) backupOffline(ctx context.Context, dest string, unreached error) error {
	src := storePath(a.dataDir)
	// Read-only first: it tells a missing, locked or damaged store apart
	// without creating anything. Pebble refuses a checkpoint of a
	// read-only database, so the copy is then taken from a writable open
	// (which only flushes what the WAL holds).
	ro, err := a.open(src)
	if errors.Is(err, audit.ErrLocked) {
		// NB: crewd holds the store, so the backup had to go through it: why it could not is the cause to mend.
		return hinted(openErr(fmt.Errorf("crewctl: backup: %s is held by a running crewd, and backup could not reach "+
			"crewd: %w", src, unreached)),
			"pass crewd's --socket and its admin token (--token-file, or the --data that holds admin.token)")
	}
	if err != nil {
		return err
	}
	ro.Close()
	// NB: a store at an older format (one crewd refuses until migrate brings it up) is backed up as it is: the
	// checkpoint appends nothing to it, and the copy keeps its format.
	l, err := a.openWritable(ctx, src, eventlog.Options{AllowOlderFormat: true})
	if err != nil {
		return openErr(fmt.Errorf("crewctl: backup: %w", err))
	}
	head, _ := l.Head()
	sd, copyDir, err := stageBackup(dest)
	if err != nil {
		l.Close()
		return err
	}
	defer sd.Remove()
	err = l.Checkpoint(filepath.Join(copyDir, storeDir))
	l.Close()
	if err != nil {
		return problemf("backup: %v", err)
	}
	reached(atStoreStaged)
	out := backupOutput{From: a.dataDir, To: dest, Head: head}
	if out.ServerKey, err = copySecret(filepath.Join(a.dataDir, serverKeyFile),
		filepath.Join(copyDir, serverKeyFile)); err != nil {
		return problemf("backup: %v", err)
	}
	return a.finishBackup(out, copyDir)
}

func (a *app) restoreCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "restore BACKUP --data DIR",
		Short: "Verify a backup, then restore it into an empty data directory",
		Long: `restore verifies BACKUP (integrity and invariants) and copies it into the data
directory named by --data, which must be empty or absent, and outside the
backup's store: restore never overwrites a store. A restore that fails
before its copy is whole leaves nothing in DIR (nor DIR, if it made it);
one killed before it is done (kill -9, a crash) leaves a hidden staging
directory there (.crewlog-restore-N), which the next restore into DIR
removes, and perhaps the backup's server.key, which the next restore of the
same backup into DIR keeps as its own; crewd refuses to start on a DIR so
left. A second restore into DIR while one runs is refused (exit 3) before it
copies anything. Start crewd on DIR afterwards.`,
		Args: args(1, "the backup directory"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if !cmd.Flags().Changed("data") {
				return usagef("restore: name the target with --data")
			}
			return a.restore(argv[0], a.dataDir)
		},
	}
}

func (a *app) restore(backup, target string) (err error) {
	// NB: made before the copy, a directory there would be one more entry of the store it copies, which holds only
	// files: the copy failed on it, and every later restore of the backup too.
	if store := storePath(backup); eventlog.Inside(target, store) {
		return usagef("restore: %s is inside the backup's store %s; name a directory outside it", target, store)
	}
	// NB: a restore killed while it copied (kill -9, a crash) left its staging directory in target, which was not
	// empty from then on.
	if _, err := eventlog.RemoveStaleStagingDirs(target, restoreStaging, restoreStaged...); err != nil {
		return openErr(fmt.Errorf("crewctl: restore: %w", err))
	}
	if err := checkRestoreTarget(backup, target, ""); err != nil {
		return err
	}
	// NB: a restore that fails (a backup that does not verify, say) leaves no data directory it made: it is made
	// before the claim below, which lives in it. NB: Lstat, not Stat: a symbolic link to nothing is there, not made
	// by the restore (which fails on it), and not its to take out.
	if _, serr := os.Lstat(target); errors.Is(serr, os.ErrNotExist) {
		defer func() {
			if err != nil {
				os.Remove(target) // NB: empty only: a directory anyone else put something in stays
			}
		}()
	}
	// NB: as crewd makes a data directory (daemon.MakePrivateDir): one that is not this user's alone would be
	// refused by crewd at its start, after the copy; refused here, nothing is copied into it.
	if err := daemon.MakePrivateDir(target); err != nil {
		return openErr(fmt.Errorf("crewctl: restore: %w", err))
	}
	reached(atClaiming)
	// The restore's staging directory is its claim on target, held until it is done: of two restores into one target
	// at once, both found it empty above, only one gets it, and the other is refused before it copies anything. NB:
	// without it both copied, then raced to move a server.key and a store in: one whose backup has no key put its
	// store in place while the other moved its key beside it, and that one, killed before it took the key out again,
	// left the store with another backup's key (the tokens minted before no longer validate).
	sd, err := eventlog.NewSoleStagingDir(target, restoreStaging, restoreStaged...)
	if errors.Is(err, eventlog.ErrStagingInUse) {
		return restoreInProgress(target)
	} else if err != nil {
		return openErr(fmt.Errorf("crewctl: restore: %w", err))
	}
	defer sd.Remove()
	if err := checkRestoreTarget(backup, target, filepath.Base(sd.Dir)); err != nil {
		return err
	}
	reached(atTargetChecked)
	check, err := a.verifyStore(storePath(backup), "verify backup")
	if err != nil {
		return err
	}
	if !check.OK {
		if a.json {
			_ = a.printJSON(backupOutput{From: backup, To: target, Verify: check})
		} else {
			printVerify(a.stdout(), check)
		}
		return found(fmt.Sprintf("restore: backup %s failed verification; nothing restored", backup))
	}
	// The backup is a closed store: a plain copy of its files is a
	// consistent one, and the backup is left untouched.
	out := backupOutput{From: backup, To: target, Head: check.Head}
	if out.ServerKey, err = restoreFiles(sd, backup, target); errors.As(err, new(notEmptyError)) {
		return usagef("restore: %v", err)
	} else if err != nil {
		return problemf("restore: %v", err)
	}
	return a.finishCopy(out, filepath.Join(target, storeDir), "verify restore")
}

// checkRestoreTarget refuses a target that holds anything but a server.key a killed restore of backup left
// (keyLeftByRestore) and staging, the restore's own staging directory ("": none yet): a staging directory of another
// restore there is one in progress (the stale ones are removed first). A target that does not exist is empty.
func checkRestoreTarget(backup, target, staging string) error {
	entries, err := os.ReadDir(target)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return openErr(fmt.Errorf("crewctl: restore: %w", err))
	}
	entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == staging })
	for _, e := range entries {
		if e.IsDir() && eventlog.IsStagingDirName(e.Name(), restoreStaging) {
			return restoreInProgress(target)
		}
	}
	if len(entries) > 0 && !keyLeftByRestore(entries, backup, target) {
		return usagef("restore: %v", notEmpty(target))
	}
	return nil
}

// restoreInProgress is restore's refusal of a target another restore is copying into: exit 3, as a store held by
// crewd is refused (nothing was done; the same command may run again once the other is done).
func restoreInProgress(target string) error {
	return hinted(openErr(fmt.Errorf("crewctl: restore: another restore into %s is in progress", target)),
		"wait for it to finish, or restore into another directory")
}

// keyLeftByRestore reports whether entries, those of target, are a server.key alone that is the backup's, as a
// restore of it killed between its two moves into place (the key, then the store) left it: the restore keeps it, the
// same bytes (placeKey). NB: any other key, or anything more, is not a restore's, and target is not empty.
func keyLeftByRestore(entries []os.DirEntry, backup, target string) bool {
	if len(entries) != 1 || entries[0].Name() != serverKeyFile || !entries[0].Type().IsRegular() {
		return false
	}
	if st, err := os.Lstat(filepath.Join(backup, serverKeyFile)); err != nil || !st.Mode().IsRegular() {
		return false
	}
	left, err := os.ReadFile(filepath.Join(target, serverKeyFile))
	if err != nil {
		return false
	}
	want, err := os.ReadFile(filepath.Join(backup, serverKeyFile))
	return err == nil && bytes.Equal(left, want)
}

// restoreStaging prefixes the name of the staging directory restore copies into, in its target; what it copies there
// is restoreStaged.
const restoreStaging = daemon.RestoreStaging

var restoreStaged = []string{storeDir, serverKeyFile}

// restoreFiles copies the store and server.key of backup into the data directory target, and reports whether there
// was a key. NB: both are copied into the staging directory sd in target and moved into place only once whole: a store
// copied part-way (a full disk, an entry it cannot copy) lacks files, its manifest marker among them when the copy
// stopped before it, and crewd started on that as a new, empty store; and a failure leaves nothing in target, so the
// same restore can run again. Whatever is made in their places meanwhile is refused, target not empty, and left as it
// is (eventlog.RenameNoReplace, placeKey).
func restoreFiles(sd *eventlog.StagingDir, backup, target string) (serverKey bool, err error) {
	stage := sd.Dir
	if err := copyDir(storePath(backup), filepath.Join(stage, storeDir)); err != nil {
		return false, err
	}
	if serverKey, err = copySecret(filepath.Join(backup, serverKeyFile),
		filepath.Join(stage, serverKeyFile)); err != nil {
		return false, err
	}
	reached(atStaged)
	// NB: target's own entry, which MakePrivateDir may just have made, is made durable before anything is moved into
	// it: a restore reported done that a crash undoes is a data directory without its store, on which crewd starts
	// a new, empty one.
	if err := syncDir(filepath.Dir(target)); err != nil {
		return false, err
	}
	// The key before the store: a store in place without its key would have crewd mint a new one, and the tokens
	// minted before would not validate.
	key := filepath.Join(target, serverKeyFile)
	keyPlaced := false
	if serverKey {
		if keyPlaced, err = placeKey(filepath.Join(stage, serverKeyFile), key); errors.Is(err, fs.ErrExist) {
			return false, notEmpty(target)
		} else if err != nil {
			return false, err
		}
		reached(atKeyPlaced)
	}
	err = eventlog.RenameNoReplace(filepath.Join(stage, storeDir), filepath.Join(target, storeDir))
	if err != nil {
		// NB: only the key placed above: one kept there (placeKey) is not this restore's to take out.
		if keyPlaced {
			os.Remove(key)
		}
		if errors.Is(err, fs.ErrExist) {
			return false, notEmpty(target)
		}
		return false, err
	}
	// NB: moved in but not durably so, the copy is taken out again: a restore that fails leaves nothing in target,
	// so the same restore can run again, where a target left holding the copy is refused as not empty.
	if err := syncDir(target); err != nil {
		if rerr := os.RemoveAll(filepath.Join(target, storeDir)); rerr != nil {
			return false, fmt.Errorf("%w (and removing %s: %v)", err, filepath.Join(target, storeDir), rerr)
		}
		if serverKey {
			if rerr := os.Remove(key); rerr != nil {
				return false, fmt.Errorf("%w (and removing %s: %v)", err, key, rerr)
			}
		}
		return false, err
	}
	return serverKey, nil
}

// placeKey moves the staged server.key to key unless something is there (eventlog.RenameNoReplace: an error wrapping
// fs.ErrExist), where a rename replaces a file, and reports whether it moved it: a key made there since restore found
// target empty (by another process: no other restore, which its claim keeps out) is not the restore's to replace. NB:
// a key there that holds the staged key's bytes is the backup's, as a restore of it killed between its two moves left
// it (keyLeftByRestore): it stays, as good as placed, but not by this one.
func placeKey(staged, key string) (placed bool, err error) {
	err = eventlog.RenameNoReplace(staged, key)
	if !errors.Is(err, fs.ErrExist) {
		return err == nil, err
	}
	if st, serr := os.Lstat(key); serr != nil || !st.Mode().IsRegular() {
		return false, err
	}
	there, rerr := os.ReadFile(key)
	want, werr := os.ReadFile(staged)
	if rerr != nil || werr != nil || !bytes.Equal(there, want) {
		return false, err
	}
	return false, nil
}

// notEmpty is restore's refusal of a target that holds something: found so before the copy, or made there since.
// NB: a usage error (exit 2), as backup's and migrate-store's refusal of a destination that exists.
func notEmpty(target string) error { return notEmptyError(target) }

// notEmptyError is notEmpty's refusal of the target it names, which restore answers as a usage error.
type notEmptyError string

func (e notEmptyError) Error() string {
	return string(e) + " is not empty; restore only into an empty or new directory"
}

// reached is called at the points where a crash leaves a copy half done; a test kills crewctl there, as a crash or
// kill -9 would.
var reached = func(point string) {}

// The points reached names.
const (
	atStaged    = "staged"     // the copy whole in its staging or temporary directory, not yet moved into place or read
	atKeyPlaced = "key placed" // restore's server.key moved into place, its store not yet
	atDryRun    = "dry run"    // import --dry-run's store open in its temporary directory, not yet removed
)

// atPlacing is reached once a backup is whole, verified and synced, right before it is moved to its DIR.
const atPlacing = "placing"

// atTargetChecked is reached once restore holds its target and found it empty, before it verifies the backup and
// copies it.
const atTargetChecked = "target checked"

// atClaiming is reached once restore found its target empty, before it claims it (its staging directory).
const atClaiming = "claiming"

// atStoreStaged is reached once a backup's store is in its staging directory, its server.key not yet.
const atStoreStaged = "store staged"

// atMakingDataDir is reached once migrate-store --to pebble found nothing at its data directory, right before it makes
// it: another user may make one there first, in a shared parent.
const atMakingDataDir = "making data directory"

// finishCopy verifies a written copy and reports it.
func (a *app) finishCopy(out backupOutput, store, label string) error {
	if err := a.verifyCopy(&out, store, label); err != nil {
		return err
	}
	if err := a.printCopy(out); err != nil {
		return err
	}
	if !out.Verify.OK {
		return found("the copy failed verification")
	}
	return nil
}

// finishBackup verifies the backup built whole in copyDir, in its staging directory, moves it into place at out.To
// only when it verifies, and reports it. NB: one that fails verification is not placed, where a reader of DIR would
// take it for a backup; it goes with its staging directory.
func (a *app) finishBackup(out backupOutput, copyDir string) error {
	reached(atStaged)
	if err := a.verifyCopy(&out, filepath.Join(copyDir, storeDir), "backup"); err != nil {
		return err
	}
	if !out.Verify.OK {
		if a.json {
			_ = a.printJSON(out)
		} else {
			printVerify(a.stdout(), out.Verify)
		}
		return found(fmt.Sprintf("backup: the copy failed verification (%s); nothing written to %s",
			out.Verify.firstBad(), out.To))
	}
	if err := placeBackup(copyDir, out.To); err != nil {
		return err
	}
	return a.printCopy(out)
}

// verifyCopy verifies the copy of a store written to store into out.Verify, and names the copy's head in out.Head.
// NB: the head named is the copy's: crewd answers an online checkpoint with its head when the checkpoint began, and
// the copy holds what it committed until the copy was taken too. A copy short of the head its source named (crewd's
// answer, the store's head when an offline backup began, the backup's verified head) lacks events that were
// acknowledged: it is no copy, whatever its verification says.
func (a *app) verifyCopy(out *backupOutput, store, label string) error {
	v, err := a.verifyStore(store, label)
	if err != nil {
		return err
	}
	out.Verify = v
	if v.OK && v.Head < out.Head {
		return found(fmt.Sprintf("the copy's head %d is below head %d, %s: acknowledged events are missing from it",
			v.Head, out.Head, headSource(*out)))
	}
	if v.Corrupt == nil && v.Head > out.Head {
		out.Head = v.Head
	}
	return nil
}

// printCopy reports the copy out.
func (a *app) printCopy(out backupOutput) error {
	if a.json {
		return a.printJSON(out)
	}
	how := "offline checkpoint"
	if out.Online {
		how = "online checkpoint by crewd"
	}
	a.stdout().printf("copied %s to %s at head %d (%s)\n", out.From, out.To, out.Head, how)
	if out.ServerKey {
		a.stdout().printf("server.key copied (0600): tokens crewd minted stay valid\n")
	} else {
		a.stdout().printf("no server.key copied: crewd makes a new one, and no token minted before validates\n")
	}
	printVerify(a.stdout(), out.Verify)
	return nil
}

// headSource names where the head a copy must reach came from.
func headSource(out backupOutput) string {
	if out.Online {
		return "which crewd answered for its checkpoint"
	}
	return "which " + out.From + " had when the copy began"
}

// copyDir copies the regular files of a store directory (Pebble keeps no
// subdirectories) into a new directory, syncing each.
func copyDir(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	if err := os.Mkdir(to, 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file", from, e.Name())
		}
		if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name()), 0o600); err != nil {
			return err
		}
	}
	return syncDir(to)
}

// syncDir makes the entries just made in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncDirFile(d)
}

// syncDirFile is (*os.File).Sync; tests replace it to make a directory's sync fail, which no file system does on
// demand.
var syncDirFile = (*os.File).Sync

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copySecret copies a 0600 secret file when it exists; it never reads
// through a symlink and never widens the mode.
func copySecret(from, to string) (bool, error) {
	st, err := os.Lstat(from)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("%s is not a regular file", from)
	}
	return true, copyFile(from, to, 0o600)
}
