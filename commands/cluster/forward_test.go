package cluster

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// lowSpace is a commands.SpaceGuard that reports too little free space.
type lowSpace struct{}

var errLowSpace = errors.New("test: 1 MiB free, below the minimum")

func (lowSpace) CheckSpace() error { return errLowSpace }

// A writer whose disk is short of space refuses a command before deciding
// it (commands.ErrNoSpace); a follower that forwarded it answers the same
// at once — the disk-full a single crewd gives — instead of sending it
// again until its time is up and answering that no writer answered.
func TestFollowerAnswersTheWritersLowSpace(t *testing.T) {
	srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: filepath.Join(t.TempDir(), "nats")})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	w := startOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second, Engine: commands.Options{Space: lowSpace{}}})
	select {
	case <-w.Elected():
	case <-time.After(20 * time.Second):
		t.Fatal("no writer")
	}
	f := startOn(t, srv, Options{Name: "f", Log: cfg, LeaseTTL: time.Second})

	for _, id := range []string{"with-id", ""} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := f.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(), CommandID: id,
			Actor: events.Actor{Role: events.RoleAdmin}, Command: &commands.RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w"}})
		cancel()
		require.ErrorIs(t, err, commands.ErrNoSpace, "command id %q", id)
		require.NotErrorIs(t, err, ErrNoWriter)
	}
	require.Zero(t, f.Engine().Head(), "nothing was decided")
}
