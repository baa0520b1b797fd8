package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/natslog"
)

// migrateStoreOutput is what migrate-store reports.
type migrateStoreOutput struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Head     uint64 `json:"head"`
	Groups   int    `json:"groups,omitempty"`
	Outcomes int    `json:"outcomes,omitempty"`
	Verified bool   `json:"verified"`
}

func (a *app) migrateStoreCmd() *cobra.Command {
	var to string
	var replicas int
	c := &cobra.Command{
		Use:   "migrate-store --to jetstream|pebble",
		Short: "Copy a Pebble store into a JetStream stream, or a stream into a Pebble store, and verify the copy",
		Long: `migrate-store moves crewlog's log between its two backends.

--to jetstream copies --data's store (crewd stopped) into a new, empty stream
(--nats, --stream, --replicas): every event in order, regrouped by the
outcomes that recorded them, and every outcome. It then checks that a copy of
the stream has the store's head and hash (so every record and the hash chain
are identical) and as many outcomes. Snapshots are not copied: crewds rebuild
their state from the log. Until that check passed the stream is marked as an
unfinished import, which crewd and crewctl refuse: one stopped part-way
(kill -9, a lost connection) holds part of the store at most, and is not
resumed; delete the stream (nats stream rm) and run the command again.
Then start each crewd (--store jetstream) on an empty data directory holding
only server.key and admin.token copied from --data: a crewd refuses to join
with a store that is not a copy of the stream, --data's own included.

--to pebble copies the stream (--nats, --stream) into --data, a new data
directory, and verifies it as 'crewctl verify' does. A copy killed part-way
(kill -9, a crash) leaves the data directory holding a hidden staging
directory (.crewlog-stream-N), on which crewd refuses to start: the same
command removes both and copies again.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !a.fromStream() {
				return usagef("migrate-store: --nats is required")
			}
			switch to {
			case "jetstream":
				return a.migrateToStream(cmd.Context(), replicas)
			case "pebble":
				if cmd.Flags().Changed("replicas") {
					return usagef("migrate-store: --replicas applies only with --to jetstream")
				}
				return a.migrateToPebble(cmd.Context())
			}
			return usagef("migrate-store: --to must be jetstream or pebble, got %q", to)
		},
	}
	c.Flags().StringVar(&to, "to", "",
		"jetstream (from --data's store into the stream) or pebble (from the stream into --data's store)")
	c.Flags().IntVar(&replicas, "replicas", 3,
		"replicas of the stream --to jetstream creates, 1..5 (refused with --to pebble)")
	return c
}

func (a *app) migrateToStream(ctx context.Context, replicas int) error {
	src, err := a.open(storePath(a.dataDir))
	if err != nil {
		return err
	}
	defer src.Close()
	cfg := natslog.Config{Stream: a.nats.stream, Replicas: replicas}
	if err := cfg.Validate(); err != nil {
		return usagef("migrate-store: %v", err)
	}
	nc, err := natslog.Connect(a.nats.urls, natslog.ConnectOptions{Name: "crewctl", Creds: a.nats.creds})
	if err != nil {
		return openErr(fmt.Errorf("crewctl: %w", err))
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return openErr(fmt.Errorf("crewctl: %w", err))
	}
	// The copy a crewd would make, built while publishing: what Import
	// checks against the source.
	tmp, err := newTempCopy()
	if err != nil {
		return err
	}
	defer tmp.Remove()
	scratch, err := eventlog.Open(filepath.Join(tmp.Dir, storeDir), nil)
	if err != nil {
		return openErr(fmt.Errorf("crewctl: %w", err))
	}
	defer scratch.Close()
	dst, err := natslog.Open(ctx, js, scratch, cfg)
	if err != nil {
		return openErr(fmt.Errorf("crewctl: %w", err))
	}
	rep, err := natslog.Import(ctx, src, dst)
	if err != nil {
		return problemf("migrate-store: %v", err)
	}
	reached(atStaged)
	out := migrateStoreOutput{From: storePath(a.dataDir), To: "stream " + cfg.Stream, Head: rep.Events,
		Groups: rep.Groups, Outcomes: rep.Outcomes, Verified: true}
	if a.json {
		return a.printJSON(out)
	}
	a.stdout().printf("copied %s to %s: %d event(s) in %d group(s), %d outcome(s); a copy of the stream has the "+
		"store's head and hash\n",
		out.From, out.To, out.Head, out.Groups, out.Outcomes)
	return nil
}

func (a *app) migrateToPebble(ctx context.Context) error {
	if err := dropAbandoned(a.dataDir); err != nil {
		return openErr(fmt.Errorf("crewctl: migrate-store: %w", err))
	}
	target := storePath(a.dataDir)
	if _, err := os.Lstat(target); err == nil {
		return usagef("migrate-store: %s exists; name a new data directory", target)
	}
	// NB: where crewd opens the store of a data directory; storePath names the directory itself while it holds no
	// store, and a crewd started on a copy written there made a new, empty store beside it.
	store := filepath.Join(a.dataDir, storeDir)
	reached(atMakingDataDir)
	if err := daemon.MakePrivateDir(a.dataDir); err != nil { // as crewd makes it: this user's alone
		return openErr(fmt.Errorf("crewctl: %w", err))
	}
	// NB: the copy's own sync is of the data directory, not of its entry in its parent, which was just made: a copy
	// reported written that a crash undoes is no copy at all.
	if err := syncDir(filepath.Dir(a.dataDir)); err != nil {
		os.Remove(a.dataDir) // made above and still empty: the same command can run again
		return problemf("migrate-store: %v", err)
	}
	head, err := a.copyStreamStaged(ctx, store)
	if err != nil {
		os.Remove(a.dataDir) // made above and still empty: the same command can run again
		return err
	}
	v, err := a.verifyStore(store, "verify")
	if err != nil {
		return err
	}
	if !v.OK {
		printVerify(a.stdout(), v)
		return found(fmt.Sprintf("the copy %s has problems (%s)", store, v.firstBad()))
	}
	out := migrateStoreOutput{From: "stream " + a.nats.stream, To: store, Head: head, Verified: true}
	if a.json {
		return a.printJSON(out)
	}
	a.stdout().printf("copied %s to %s at head %d\n", out.From, out.To, out.Head)
	printVerify(a.stdout(), v)
	return nil
}
