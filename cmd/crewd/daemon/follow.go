package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/migrations/picrew"
)

// checkPicrewRoot refuses a --follow-picrew directory that is not a pi-crew crew root, before anything starts.
func checkPicrewRoot(root string) error {
	if st, err := os.Stat(filepath.Join(root, "state", "runs")); err != nil || !st.IsDir() {
		return fmt.Errorf("daemon: --follow-picrew: %s is not a pi-crew crew root (no state/runs directory)", root)
	}
	return nil
}

// followPicrew runs the pi-crew follower against crewd's own socket with the admin token, as `crewctl import
// picrew ROOT --follow` would, until stop is called (or ctx ends). It goes through the socket like any client, so
// it is paced and bounded as one, and what it imports reaches subscribers the same way. Problems in the files are
// logged as warnings; none stops crewd. Its requests are sized by picrew.BatchBytesFor to maxFrame, crewd's frame
// cap (--max-frame), as picrew.DefaultMaxBatchBytes is to the default cap. NB: sized to
// the default cap, a request to a crewd with a smaller one was refused whole at every pass, and the run's writes
// after it were never imported.
func followPicrew(ctx context.Context, root, socket, token string, maxFrame int, lg *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sink := picrew.NewDaemonSink(func(ctx context.Context) (picrew.Caller, error) {
		return client.Dial(ctx, socket, client.Hello{Role: "admin", Token: token}, &client.Options{MaxFrame: maxFrame})
	})
	f := picrew.NewFollower(root, sink, &picrew.FollowOptions{Logger: lg, MaxBatchBytes: picrew.BatchBytesFor(maxFrame)})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer sink.Close()
		lg.Info("following pi-crew's files", "root", root)
		if err := f.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			lg.Error("the pi-crew follower stopped", "err", err)
		}
		st := f.Stats()
		lg.Info("pi-crew follower stopped", "appended", st.Appended, "replayed", st.Replayed, "refused", st.Refused,
			"reported", st.Reported, "checkpoints", st.Checkpoints)
	}()
	return func() {
		cancel()
		<-done
	}
}
