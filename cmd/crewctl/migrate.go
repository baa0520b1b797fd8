package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/migrations"
)

// migrateOutput is migrate's --json document.
type migrateOutput struct {
	migrations.Report
	Backup string `json:"backup,omitempty"`
}

func (a *app) migrateCmd() *cobra.Command {
	var dryRun, allowDamaged bool
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Bring the store up to this build's format (backup first)",
		Long: `migrate upgrades the store to the format this crewlog writes, one step at a
time, and records each step as a store.migrated event. crewd refuses to start
on a store that needs this.

Before the first step it writes a checkpoint of the store to
<data>/backups/pre-migrate-<format>-<time> (next to a bare store:
<store>.backups/...; a store itself: crewctl restore it into a data
directory, as crewd refuses to start on it), with -2, -3, ... after it when an earlier
migrate took that name in the same second. A migrate killed while it
writes the backup leaves a hidden staging directory there
(.crewlog-checkpoint-N), which the next migrate removes. Every step is
idempotent and commits its format marker with its last write, so an
interrupted migrate is finished by running it again. --dry-run lists the
pending steps and writes nothing.

migrate first verifies the store as 'crewctl verify' does, and refuses one
that is damaged (a record that fails its checksum, a broken hash chain, a
missing record), naming the damage and writing nothing: its steps would be
chained onto records no writer wrote there. --allow-damaged migrates such a
store all the same (backup first); verify still reports the damage after.

The store must not be held by a running crewd: stop it first.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.migrate(cmd.Context(), dryRun, allowDamaged) },
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "list the pending steps without running them")
	c.Flags().BoolVar(&allowDamaged, "allow-damaged", false,
		"migrate a store that verify finds damaged, rather than refuse it (backup first)")
	return c
}

func (a *app) migrate(ctx context.Context, dryRun, allowDamaged bool) error {
	store := storePath(a.dataDir)
	// Read-only first: it tells a missing, locked, damaged or too new store
	// apart without writing, and is all a dry run needs.
	ro, err := a.open(store)
	if err != nil {
		return err
	}
	if dryRun {
		rep, err := migrations.Run(ro, &migrations.Options{DryRun: true})
		ro.Close()
		if err != nil {
			return problemf("migrate: %v", err)
		}
		return a.printMigrate(migrateOutput{Report: rep})
	}
	format, err := ro.Format()
	if err != nil {
		ro.Close()
		return problemf("migrate: %v", err)
	}
	if format == eventlog.CurrentFormat {
		ro.Close()
		return a.printMigrate(migrateOutput{Report: migrations.Report{From: format, To: format,
			Applied: []migrations.Applied{}}})
	}
	// NB: verified read-only, a damaged store is refused with nothing written (a writable open flushes the WAL); no
	// crewd writes meanwhile, as crewd refuses a store at an older format.
	if !allowDamaged {
		err = a.refuseDamaged(ro, store)
	}
	ro.Close()
	if err != nil {
		return err
	}
	l, err := a.openWritable(ctx, store, eventlog.Options{AllowOlderFormat: true})
	if err != nil {
		return openErr(fmt.Errorf("crewctl: migrate: %w", err))
	}
	defer l.Close()
	backups := a.backupsDir(store)
	if err := os.MkdirAll(backups, 0o700); err != nil {
		return openErr(fmt.Errorf("crewctl: migrate: %w", err))
	}
	// NB: the checkpoint syncs the backups directory, not its entry in its parent, which MkdirAll may just have made:
	// without this a crash while the store is migrated could leave no backup of it.
	if err := syncDir(filepath.Dir(backups)); err != nil {
		return problemf("migrate: no backup, nothing migrated: %v", err)
	}
	backup, err := newBackupName(backups,
		fmt.Sprintf("pre-migrate-%d-%s", format, a.clock().UTC().Format("20060102T150405Z")))
	if err != nil {
		return problemf("migrate: no backup, nothing migrated: %v", err)
	}
	if err := l.Checkpoint(backup); err != nil {
		return problemf("migrate: no backup, nothing migrated: %v", err)
	}
	var bar *progress
	rep, err := migrations.Run(l, &migrations.Options{Progress: func(m migrations.Migration, done, total uint64) {
		if bar == nil {
			bar = newProgress(a.io, "migrate "+m.Name)
		}
		bar.update(done, total)
	}})
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		if errors.Is(err, eventlog.ErrCorrupt) {
			return problemf("migrate: %v (backup in %s)", err, backup)
		}
		return hinted(problemf("migrate: %v", err),
			"the store is at the format of the last finished step; run migrate again (backup in "+backup+")")
	}
	return a.printMigrate(migrateOutput{Report: rep, Backup: backup})
}

// refuseDamaged verifies the store l, open read-only, and refuses it when it is damaged. NB: migrate's steps are
// appended after its head, chained onto the records before them: on a damaged store they would build on records no
// writer wrote there, and a store reported migrated would still be reported damaged by verify. Broken invariants are
// not damage (the records are those written) and are left to verify.
func (a *app) refuseDamaged(l *eventlog.Log, store string) error {
	v, err := a.verifyLog(l, store, "verify before migrate")
	if err != nil {
		return err
	}
	if v.Corrupt == nil {
		return nil
	}
	return hinted(problemf("migrate: store %s is %s; nothing migrated, no backup taken", store, v.Corrupt),
		"'crewctl verify' names the damage; restore a backup taken before it, or pass --allow-damaged to migrate "+
			"the store as it is (backup first)")
}

// newBackupName is dir/name, or dir/name-2, -3, … when that is taken: a name has one-second resolution, and a second
// migrate in the same second (a store put back from its backup and migrated again, a rerun after a failed step) found
// it taken and made no backup. NB: no other migrate can take the name before the checkpoint does, since each holds
// the store's lock, and the checkpoint refuses a name that exists rather than write over an earlier backup.
func newBackupName(dir, name string) (string, error) {
	for i := 1; i <= 1000; i++ {
		p := filepath.Join(dir, name)
		if i > 1 {
			p = fmt.Sprintf("%s-%d", p, i)
		}
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			return p, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("%s: a thousand backups named %s", dir, name)
}

// backupsDir is <data>/backups for a data directory, and <store>.backups
// beside a bare store: a Pebble directory must hold nothing but Pebble's
// files.
func (a *app) backupsDir(store string) string {
	if filepath.Clean(store) == filepath.Clean(a.dataDir) {
		return filepath.Clean(store) + ".backups"
	}
	return filepath.Join(a.dataDir, "backups")
}

func (a *app) printMigrate(out migrateOutput) error {
	if a.json {
		return a.printJSON(out)
	}
	w := a.stdout()
	switch {
	case len(out.Applied) == 0:
		w.printf("store is at format %d, the current one: nothing to do\n", out.To)
		return nil
	case out.DryRun:
		w.printf("store is at format %d; %d step(s) pending (dry run, nothing written):\n", out.From, len(out.Applied))
	default:
		w.printf("backup written to %s\n", out.Backup)
	}
	for _, m := range out.Applied {
		if out.DryRun {
			w.printf("  %d → %d %s: %s\n", m.From, m.To, m.Name, m.Doc)
		} else {
			w.printf("  %d → %d %s: done, %d key(s) written, recorded at position %d\n", m.From, m.To, m.Name, m.Changed,
				m.Position)
		}
	}
	if !out.DryRun {
		w.printf("store is now at format %d\n", out.To)
	}
	return nil
}
