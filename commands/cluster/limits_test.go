package cluster

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// A command whose event the engine's own log takes but no message of the
// NATS servers can carry (larger than their maximum payload) is refused
// bad-params, as a command whose event the log refuses is, and the writer
// goes on: it used to be decided and published, the publish failed, and
// the writer failed stop — and so did every writer after it, as the
// client sent the command again.
func TestWriterRefusesACommandNoMessageCanCarry(t *testing.T) {
	const maxPayload = 64 << 10
	srv := startNATSWithMaxPayload(t, maxPayload)
	w := startWriterOn(t, srv, Options{Name: "w", Log: natslog.Config{Stream: "CREWLOG", Replicas: 1}, LeaseTTL: time.Second})

	submit := func(id, goal string) (commands.Reply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return w.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(), CommandID: id,
			Actor: events.Actor{Role: events.RoleAdmin}, Command: &commands.RunCreate{RunID: id, Team: "t", Goal: goal, Cwd: "/w"}})
	}
	r, err := submit("big", strings.Repeat("g", maxPayload+1))
	require.NoError(t, err)
	require.NotNil(t, r.Rejected)
	require.Equal(t, "bad-params", r.Rejected.Code)
	require.Nil(t, w.Err())
	require.True(t, w.Writer())

	r, err = submit("small", "g")
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
}

// A follower whose request is larger than a NATS message may be sent
// nothing, and says so at once (bad-params, nothing recorded), as the
// writer refuses a command no message can carry: it took the refused send
// for a request in doubt, sent it again until its time was up and
// answered that no writer answered, which a client retries for ever.
func TestFollowerRefusesARequestNoMessageCanCarry(t *testing.T) {
	const maxPayload = 64 << 10
	srv := startNATSWithMaxPayload(t, maxPayload)
	f, asked := followerOfAFakeWriterOn(t, srv, func(int32) error { return nil })
	for _, id := range []string{"with-id", ""} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r, err := f.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(), CommandID: id,
			Actor: events.Actor{Role: events.RoleAdmin}, Command: &commands.RunCreate{RunID: "r", Team: "t",
				Goal: strings.Repeat("g", maxPayload+1), Cwd: "/w"}})
		cancel()
		require.NoError(t, err, "command id %q", id)
		require.NotNil(t, r.Rejected, "command id %q", id)
		require.Equal(t, commands.CodeBadParams, r.Rejected.Code)
	}
	require.Zero(t, asked.Load(), "nothing reached the writer")
}

// startNATSWithMaxPayload is startNATS with a maximum payload of maxPayload
// bytes.
func startNATSWithMaxPayload(t *testing.T, maxPayload int32) *server.Server {
	t.Helper()
	srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: filepath.Join(t.TempDir(), "nats"),
		MaxPayload: maxPayload})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// A command larger than one NATS message (the servers' max_payload, here below crewd's --max-frame, which let it
// through) is refused with a message that names the limit it met, by the servers' setting and its value, and what to
// change: on the writer (its event) and on a follower (its request). They said "max payload" and "invalid append",
// which read as the client's mistake, not the operator's.
func TestACommandLargerThanANATSMessageIsRefusedNamingTheLimit(t *testing.T) {
	const maxPayload = 64 << 10
	srv := startNATSWithMaxPayload(t, maxPayload)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second})
	f := startOn(t, srv, Options{Name: "f", Log: cfg, LeaseTTL: time.Second})
	for _, via := range []struct {
		name string
		n    *Node
	}{{"the writer", w}, {"a follower", f}} {
		t.Run(via.name, func(t *testing.T) {
			rep, err := submitTo(t, via.n, commands.Request{Principal: events.AdminPrincipal(), CommandID: "big",
				Actor: events.Actor{Role: events.RoleAdmin}, Command: &commands.RunCreate{RunID: "r", Team: "t",
					Goal: strings.Repeat("g", maxPayload+1), Cwd: "/w"}})
			require.NoError(t, err)
			require.NotNil(t, rep.Rejected)
			require.Equal(t, commands.CodeBadParams, rep.Rejected.Code)
			for _, says := range []string{"max_payload", strconv.Itoa(maxPayload), "--max-frame"} {
				require.Contains(t, rep.Rejected.Message, says)
			}
		})
	}
	require.Nil(t, w.Err())
	require.Zero(t, w.Engine().Head(), "nothing was recorded")
}

// With a small max_payload, a refusal's outcome may not fit a batch's manifest (half a NATS message). A refusal
// without a command id records nothing, so it is answered as decided, whatever its size; one with a command id, which
// is recorded, is refused bad-params naming the servers' max_payload and what to change. The first was size-checked
// as a write too, and both came back saying that "a command's events need more messages than one atomic batch may
// hold", where a command with no events had an outcome too large for the manifest.
func TestARefusalTooLargeForTheManifestIsAnsweredNamingTheLimit(t *testing.T) {
	const maxPayload = 2 << 10
	srv := startNATSWithMaxPayload(t, maxPayload)
	w := startWriterOn(t, srv, Options{Name: "w", Log: natslog.Config{Stream: "CREWLOG", Replicas: 1}, LeaseTTL: time.Second})
	transition := func(id string) *commands.RejectedError {
		rep, err := submitTo(t, w, commands.Request{Principal: events.AdminPrincipal(), CommandID: id,
			Actor: events.Actor{Role: events.RoleAdmin}, Command: &commands.RunTransition{RunID: strings.Repeat("r", 900),
				To: "running"}})
		require.NoError(t, err)
		require.NotNil(t, rep.Rejected)
		return rep.Rejected
	}
	unrecorded := transition("")
	require.Equal(t, commands.CodeNoManifest, unrecorded.Code, "%s", unrecorded.Message)
	require.Contains(t, unrecorded.Message, "not found")

	recorded := transition("c1")
	require.Equal(t, commands.CodeBadParams, recorded.Code)
	for _, says := range []string{"max_payload", strconv.Itoa(maxPayload), "--max-frame", "outcome"} {
		require.Contains(t, recorded.Message, says)
	}
	require.NotContains(t, recorded.Message, "more messages")
	require.Nil(t, w.Err())
	require.Zero(t, w.Engine().Head(), "nothing was recorded")
}
