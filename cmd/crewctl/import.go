package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/migrations/picrew"
)

func (a *app) importCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "import",
		Short: "Import state from another runtime into the store",
	}
	var dryRun, follow bool
	pc := &cobra.Command{
		Use:   "picrew STATE_ROOT",
		Short: "Import a pi-crew crew root (runs, tasks, events, mailboxes, steering)",
		Long: `import picrew reads the pi-crew crew root STATE_ROOT (the directory holding
state/runs/<runId>/ and artifacts/) and appends the equivalent crewlog events,
keeping pi-crew's run ids, task ids, times, statuses, allocations and delegate
events. pi-crew's event log may be compacted; its manifest.json and
tasks.json decide where each run, task and delegation ended.

It is idempotent: every write carries a command id import:<runId>:<what>, so
a second import of the same root adds nothing. Corrupt lines, seq gaps,
quarantined .corrupt-* files, lock files and anything else left out are listed
one per line at the end (and in --json). A run a file of which could not be
read (a failing disk, a full descriptor table) is not imported, nothing of it
recorded: the command exits 1 naming it, and an import run again once it can
be read imports it whole. The store is created when absent.

The store must not be held by a running crewd: stop it first.

With --follow it imports through the running crewd instead (import.append
over its socket, with the admin token; the store stays the daemon's), then
keeps importing as pi-crew writes — new runs, new event, mailbox and
steering lines, rewrites of manifest.json, tasks.json and delivery.json —
until interrupted. Each file's progress is checkpointed in the log, so a
restart of crewd or of the follower resumes where it stopped, with no
duplicate and no gap (the command ids are the one-shot import's). Problems
(a corrupt or partial line, a truncated or rotated file, a run directory
removed by pi-crew's retention) are printed as they are met and never stop
it; so are, at most once a second, calls to crewd that failed (crewd stopped,
or refusing every import.append), whose writes are kept and sent again.`,
		Args: args(1, "the pi-crew crew root"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if follow {
				if dryRun {
					return usagef("import picrew: --dry-run and --follow do not go together")
				}
				return a.followPicrew(cmd.Context(), argv[0])
			}
			return a.importPicrew(cmd.Context(), argv[0], dryRun)
		},
	}
	pc.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be imported without writing")
	pc.Flags().BoolVar(&follow, "follow", false,
		"import through the running crewd and keep importing as pi-crew writes, until interrupted")
	c.AddCommand(pc)
	return c
}

// dryRunStaging prefixes the name of the temporary directory that holds the empty store a dry run into a data
// directory without one plans against. NB: a staging directory (eventlog.NewStagingDir), so that the next dry run
// removes those a crewctl killed while it planned (kill -9, a crash) left there.
const dryRunStaging = "crewctl-dry-run-"

func (a *app) importPicrew(ctx context.Context, root string, dryRun bool) error {
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return usagef("import picrew: %s is not a directory", root)
	}
	store := storePath(a.dataDir)
	if store == "" {
		return usagef("no data directory: pass --data")
	}
	if !eventlog.IsStore(store) {
		// A new data directory gets its store where crewd looks for it.
		store = filepath.Join(a.dataDir, storeDir)
	}
	var l *eventlog.Log
	if eventlog.IsStore(store) {
		// An existing store: the read-only open names a running crewd, a
		// damaged store or one that needs a migration before anything else,
		// and is all a dry run needs.
		ro, err := a.open(store)
		if err != nil {
			return err
		}
		if dryRun {
			l = ro
		} else {
			ro.Close()
		}
	}
	if l == nil {
		if dryRun {
			// No store yet: a dry run plans against an empty one of its
			// own, removed after, and creates nothing in the data directory.
			tmp, err := eventlog.NewStagingDir(os.TempDir(), dryRunStaging, storeDir)
			if err != nil {
				return openErr(fmt.Errorf("crewctl: import picrew: %w", err))
			}
			defer tmp.Remove()
			store = filepath.Join(tmp.Dir, storeDir)
		}
		var err error
		if l, err = a.openWritable(ctx, store, eventlog.Options{}); err != nil {
			return openErr(fmt.Errorf("crewctl: import picrew: %w", err))
		}
		if dryRun {
			reached(atDryRun)
		}
	}
	defer l.Close()
	bar := newProgress(a.io, "import")
	sum, err := picrew.Import(l, root, &picrew.Options{DryRun: dryRun, Progress: bar.update})
	bar.finish()
	if err != nil {
		return problemf("%v", err)
	}
	return a.printImport(sum, dryRun)
}

// printImport prints what an import (a dry run: one planned) did.
func (a *app) printImport(sum picrew.Summary, dryRun bool) error {
	if a.json {
		if err := a.printJSON(sum); err != nil {
			return err
		}
		return unreadRuns(sum)
	}
	w := a.stdout()
	verb := "appended"
	if dryRun {
		verb = "would append"
	}
	for _, r := range sum.Runs {
		w.printf("run %s (%s): %d task(s), %d shadow(s), %d event(s), %d message(s), %d steer(s): %s %d event(s), "+
			"%d write(s) already imported\n",
			r.RunID, r.Status, r.Tasks, r.Shadows, r.Events, r.Messages, r.Steers, verb, r.Appended, r.Existing)
	}
	w.printf("%d run(s): %s %d event(s); %d write(s) already imported; %d item(s) skipped\n",
		len(sum.Runs), verb, sum.Appended, sum.Existing, len(sum.Skipped))
	for _, s := range sum.Skipped {
		w.printf("  skipped %s\n", s)
	}
	return unreadRuns(sum)
}

// unreadRuns is the error of an import that left runs out because a file of theirs could not be read: it did not
// import them, and one run again once they can be read does.
func unreadRuns(sum picrew.Summary) error {
	if len(sum.Unread) == 0 {
		return nil
	}
	return hinted(problemf("import picrew: %d run(s) not imported, a file of theirs could not be read: %s",
		len(sum.Unread), strings.Join(sum.Unread, ", ")), "mend what keeps them from being read and run the import again")
}
