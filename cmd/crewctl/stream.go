package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/natslog"
)

// streamFlags name a crewlog log in a JetStream cluster (--nats): verify,
// replay and backup then read the stream instead of a local store.
type streamFlags struct {
	urls   string
	creds  string
	stream string
}

// streamCommands are the commands that read a JetStream stream when --nats is given.
var streamCommands = []string{"verify", "replay", "backup", "migrate-store"}

// checkStreamFlags refuses a stream flag cmd would not use: without --nats, --stream and --nats-creds name nothing
// and the command would read --data's store in their place; --nats on a command that reads no stream would be
// ignored, and its answer taken for the cluster's.
func (a *app) checkStreamFlags(cmd *cobra.Command) error {
	if !a.fromStream() {
		for _, name := range []string{"stream", "nats-creds"} {
			if cmd.Flags().Changed(name) {
				return usagef("--%s applies only with --nats", name)
			}
		}
		return nil
	}
	for _, name := range streamCommands {
		if cmd.CommandPath() == "crewctl "+name {
			return nil
		}
	}
	return usagef("%s: --nats applies only to verify, replay, backup and migrate-store",
		strings.TrimPrefix(cmd.CommandPath(), "crewctl "))
}

// fromStream reports whether --nats was given.
func (a *app) fromStream() bool { return a.nats.urls != "" }

// copyStream copies the whole stream into a new store at dest and returns
// its head: the same records, outcomes and hash chain as every crewd's
// copy.
func (a *app) copyStream(ctx context.Context, dest string) (uint64, error) {
	nc, err := natslog.Connect(a.nats.urls, natslog.ConnectOptions{Name: "crewctl", Creds: a.nats.creds})
	if err != nil {
		return 0, openErr(fmt.Errorf("crewctl: %w", err))
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, openErr(fmt.Errorf("crewctl: %w", err))
	}
	l, err := eventlog.Open(dest, nil)
	if err != nil {
		return 0, openErr(fmt.Errorf("crewctl: %w", err))
	}
	defer l.Close()
	jl, err := natslog.Open(ctx, js, l, natslog.Config{Stream: a.nats.stream, Existing: true})
	if err != nil {
		return 0, openErr(fmt.Errorf("crewctl: %w", err))
	}
	if _, err := jl.CatchUp(ctx); err != nil {
		return 0, problemf("copy stream %s: %v", a.nats.stream, err)
	}
	head, _ := l.Head()
	return head, nil
}

// streamStaging prefixes the name of the staging directory a copy of the stream is built in, beside its store.
const streamStaging = daemon.StreamStaging

// copyStreamStaged copies the whole stream into the new store dest as copyStream does, in a staging directory beside
// it, and moves the copy to dest only once it is whole. NB: a copy that failed (the stream missing, the connection
// lost part-way) is a store all the same, empty or holding a prefix of the log, on which crewd would start: what is
// at dest is whole or not there. Whatever is made at dest meanwhile is refused as existing and left as it is
// (eventlog.RenameNoReplace), where a rename replaces an empty directory.
func (a *app) copyStreamStaged(ctx context.Context, dest string) (uint64, error) {
	sd, err := eventlog.NewStagingDir(filepath.Dir(dest), streamStaging, storeDir)
	if err != nil {
		return 0, openErr(fmt.Errorf("crewctl: %w", err))
	}
	defer sd.Remove()
	stage := sd.Dir
	head, err := a.copyStream(ctx, filepath.Join(stage, storeDir))
	if err != nil {
		return 0, err
	}
	reached(atStaged)
	if err := eventlog.RenameNoReplace(filepath.Join(stage, storeDir), dest); errors.Is(err, fs.ErrExist) {
		return 0, usagef("copy stream %s: %s exists; name a new data directory", a.nats.stream, dest)
	} else if err != nil {
		return 0, problemf("copy stream %s: %v", a.nats.stream, err)
	}
	if err := syncDir(filepath.Dir(dest)); err != nil {
		return 0, problemf("copy stream %s: %v", a.nats.stream, err)
	}
	return head, nil
}

// tempCopyStaging prefixes the name of the temporary directory that holds a copy of the log crewctl reads or checks
// against, in the temporary directory.
const tempCopyStaging = "crewctl-stream-"

// newTempCopy makes a directory for a copy of the log (its store) in the temporary directory, after removing those
// that a crewctl killed while it used them (kill -9, a crash) left there, each a whole copy of the log.
func newTempCopy() (*eventlog.StagingDir, error) {
	sd, err := eventlog.NewStagingDir(os.TempDir(), tempCopyStaging, storeDir)
	if err != nil {
		return nil, openErr(fmt.Errorf("crewctl: %w", err))
	}
	return sd, nil
}

// storeToRead is the store verify and replay read: the data directory's,
// or with --nats a temporary copy of the stream (removed by done).
func (a *app) storeToRead(ctx context.Context) (dir string, done func(), err error) {
	if !a.fromStream() {
		return storePath(a.dataDir), func() {}, nil
	}
	tmp, err := newTempCopy()
	if err != nil {
		return "", nil, err
	}
	done = func() { tmp.Remove() }
	dir = filepath.Join(tmp.Dir, storeDir)
	if _, err := a.copyStream(ctx, dir); err != nil {
		done()
		return "", nil, err
	}
	reached(atStaged)
	return dir, done, nil
}

// backupStream writes a copy of the stream to dest as a data directory
// (dest/store), then verifies it. A crewd restored from it is a Pebble
// crewd; joining a cluster again, it resumes copying where the copy ends.
func (a *app) backupStream(ctx context.Context, dest string) error {
	sd, copyDir, err := stageBackup(dest)
	if err != nil {
		return err
	}
	defer sd.Remove()
	head, err := a.copyStream(ctx, filepath.Join(copyDir, storeDir))
	if err != nil {
		return err
	}
	reached(atStoreStaged)
	return a.finishBackup(backupOutput{From: "stream " + a.nats.stream, To: dest, Head: head}, copyDir)
}
