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
	"github.com/crewlog/crewlog/eventlog"
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
	w := startWriterOn(t, srv, Options{Name: "w", Log: natslog.Config{Stream: "CREWLOG", Replicas: 1},
		LeaseTTL: time.Second})

	submit := func(id, goal string) (commands.Reply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return w.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(), CommandID: id,
			Actor:   events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunCreate{RunID: id, Team: "t", Goal: goal, Cwd: "/w"}})
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
	w := startWriterOn(t, srv, Options{Name: "w", Log: natslog.Config{Stream: "CREWLOG", Replicas: 1},
		LeaseTTL: time.Second})
	runID := strings.Repeat("r", 900)
	unrecorded := refusedTransition(t, w, "", runID)
	require.Equal(t, commands.CodeNoManifest, unrecorded.Code, "%s", unrecorded.Message)
	require.Contains(t, unrecorded.Message, "not found")

	recorded := refusedTransition(t, w, "c1", runID)
	require.Equal(t, commands.CodeBadParams, recorded.Code)
	for _, says := range []string{"max_payload", strconv.Itoa(maxPayload), "--max-frame", "outcome"} {
		require.Contains(t, recorded.Message, says)
	}
	require.NotContains(t, recorded.Message, "more messages")
	require.Nil(t, w.Err())
	require.Zero(t, w.Engine().Head(), "nothing was recorded")
}

// With a max_payload so small that the bad-params outcome recorded in place of a refused write (its command id, its
// principal and the message naming the limit) does not fit a batch's manifest either, the command is answered that
// refusal unrecorded, and the writer goes on to record the next: the replacement was recorded unchecked, the group's
// batch could not be planned, and the writer failed stop on a client's request.
func TestARefusalWhoseReplacementDoesNotFitIsAnsweredUnrecorded(t *testing.T) {
	const maxPayload = 1 << 10
	srv := startNATSWithMaxPayload(t, maxPayload)
	w := startWriterOn(t, srv, Options{Name: "w", Log: natslog.Config{Stream: "CREWLOG", Replicas: 1},
		LeaseTTL: time.Second})
	id := strings.Repeat("c", eventlog.MaxIDLen)
	for range 2 { // the second is a retry: nothing was recorded, so it is decided again
		refused := refusedTransition(t, w, id, strings.Repeat("r", 300))
		require.Equal(t, commands.CodeBadParams, refused.Code)
		for _, says := range []string{"max_payload", strconv.Itoa(maxPayload), "outcome"} {
			require.Contains(t, refused.Message, says)
		}
		require.Nil(t, w.Err())
		require.True(t, w.Writer())
	}
	// NB: a command whose outcome fits is recorded as before (no event fits a message of 1 KiB with its envelope).
	require.Equal(t, commands.CodeNoManifest, refusedTransition(t, w, "c2", "r").Code)
	require.Nil(t, w.Err())
	var recorded []string
	require.NoError(t, w.jl.Local().Outcomes(func(o eventlog.Outcome) error {
		recorded = append(recorded, o.CommandID)
		return nil
	}))
	require.Equal(t, []string{"c2"}, recorded)
}

// refusedTransition submits to w the admin's run.transition of runID to running under command id id, and returns its
// refusal.
func refusedTransition(t *testing.T, w *Node, id, runID string) *commands.RejectedError {
	t.Helper()
	rep, err := submitTo(t, w, commands.Request{Principal: events.AdminPrincipal(), CommandID: id,
		Actor: events.Actor{Role: events.RoleAdmin}, Command: &commands.RunTransition{RunID: runID, To: "running"}})
	require.NoError(t, err)
	require.NotNil(t, rep.Rejected)
	return rep.Rejected
}
