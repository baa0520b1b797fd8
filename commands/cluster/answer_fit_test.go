package cluster

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// A writer's answer larger than one NATS message (the servers' max_payload, set low) reaches its follower cut to
// fit, with what it means kept and the limit named: a refusal keeps its code, a failure its cause. It was logged and
// dropped, and the follower waited for it until its time was up, to answer its client that no writer answered.
func TestAnAnswerLargerThanANATSMessageIsAnsweredCutToFit(t *testing.T) {
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	t.Run("a recorded refusal", func(t *testing.T) {
		// NB: a refusal's message quotes the run id as Go quotes it, four bytes for each control byte: a request
		// of about 300 bytes is answered about 1 KiB, recorded while the servers' max_payload was larger and
		// answered again, to its retry, once it was lowered.
		const maxPayload = 1024
		dir := filepath.Join(t.TempDir(), "nats")
		req := commands.Request{Principal: events.AdminPrincipal(), CommandID: "c-1",
			Actor:   events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunTransition{RunID: strings.Repeat("\x01", 250), To: "done"}}
		data, err := commands.EncodeRequest(req)
		require.NoError(t, err)
		before, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: dir})
		require.NoError(t, err)
		w := startWriterOn(t, before, Options{Name: "before", Log: cfg, LeaseTTL: time.Second})
		rep, err := submitTo(t, w, req)
		require.NoError(t, err)
		require.NotNil(t, rep.Rejected)
		require.Equal(t, commands.CodeNoManifest, rep.Rejected.Code)
		require.NoError(t, w.Close())
		before.Shutdown()
		before.WaitForShutdown()

		srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: dir, MaxPayload: maxPayload})
		require.NoError(t, err)
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		w = startWriterOn(t, srv, Options{Name: "after", Log: cfg, LeaseTTL: time.Second})
		require.NoError(t, w.o.Conn.Flush())
		ans, err := connectTo(t, srv).Request(cfg.CommandSubject(), data, 5*time.Second)
		require.NoError(t, err, "no answer")
		rep, err = commands.DecodeReply(ans.Data)
		require.NoError(t, err)
		require.NotNil(t, rep.Rejected)
		require.Equal(t, commands.CodeNoManifest, rep.Rejected.Code, "the recorded refusal's own code")
		require.True(t, strings.HasPrefix(rep.Rejected.Message, `run "\x01\x01`), "its message, cut: %s",
			rep.Rejected.Message)
		requireNamesTheLimit(t, rep.Rejected.Message, maxPayload)
	})
	t.Run("a failure", func(t *testing.T) {
		// NB: the writer's refusal of a credential whose attempt is no number quotes it, four bytes for each control
		// byte: a request of about 10 KiB is answered about 24 KiB.
		const maxPayload = 16 << 10
		srv := startNATSWithMaxPayload(t, maxPayload)
		w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second})
		require.NoError(t, w.o.Conn.Flush())
		data, err := commands.EncodeRequest(commands.Request{Principal: events.AdminPrincipal(), CommandID: "c-1",
			Actor:   events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w"}})
		require.NoError(t, err)
		cred, err := msgpack.Marshal([]string{"r", "k", "d", "t", strings.Repeat("\x01", 6000)})
		require.NoError(t, err)
		m := nats.NewMsg(cfg.CommandSubject())
		m.Data = data
		m.Header.Set(credentialHeader, base64.RawURLEncoding.EncodeToString(cred))
		ans, err := connectTo(t, srv).RequestMsg(m, 5*time.Second)
		require.NoError(t, err, "no answer")
		require.LessOrEqual(t, len(ans.Data), maxPayload)
		_, err = commands.DecodeReply(ans.Data)
		require.ErrorIs(t, err, commands.ErrRemote, "the writer's failure, in doubt")
		requireNamesTheLimit(t, err.Error(), maxPayload)
	})
}

// requireNamesTheLimit requires text to name the servers' max_payload and its value.
func requireNamesTheLimit(t *testing.T, text string, maxPayload int) {
	t.Helper()
	for _, says := range []string{"max_payload", strconv.Itoa(maxPayload)} {
		require.Contains(t, text, says)
	}
}

// fitAnswer cuts each kind of answer to its room and keeps what it means: a refusal its code, a failure its cause,
// and an accepted command's result, which cannot be cut, becomes the writer's failure (in doubt: it was decided),
// each naming the limit; text is cut between runes.
func TestFitAnswerKeepsWhatTheAnswerMeans(t *testing.T) {
	const room, maxPayload = 600, 700
	long := strings.Repeat("é", 1000)
	for _, tc := range []struct {
		name  string
		rep   commands.Reply
		err   error
		check func(t *testing.T, rep commands.Reply, err error)
	}{
		{"a refusal", commands.Reply{Rejected: &commands.RejectedError{Code: commands.CodeNoManifest,
			Reason: "no-manifest", Message: long}, Position: 7}, nil,
			func(t *testing.T, rep commands.Reply, err error) {
				require.NoError(t, err)
				require.Equal(t, commands.CodeNoManifest, rep.Rejected.Code)
				require.Equal(t, uint64(7), rep.Position)
				require.True(t, utf8.ValidString(rep.Rejected.Message))
				requireNamesTheLimit(t, rep.Rejected.Message, maxPayload)
			}},
		{"the writer's low space", commands.Reply{}, fmt.Errorf("%w: %s", commands.ErrNoSpace, long),
			func(t *testing.T, _ commands.Reply, err error) {
				require.ErrorIs(t, err, commands.ErrNoSpace, "its cause")
				requireNamesTheLimit(t, err.Error(), maxPayload)
			}},
		{"a failure", commands.Reply{}, errors.New(long), func(t *testing.T, _ commands.Reply, err error) {
			require.ErrorIs(t, err, commands.ErrRemote)
			require.True(t, utf8.ValidString(err.Error()))
			requireNamesTheLimit(t, err.Error(), maxPayload)
		}},
		{"an accepted command", commands.Reply{Result: json.RawMessage(`"` + long + `"`), Position: 7}, nil,
			func(t *testing.T, _ commands.Reply, err error) {
				require.ErrorIs(t, err, commands.ErrRemote, "the writer's failure, in doubt")
				require.Contains(t, err.Error(), "decided")
				requireNamesTheLimit(t, err.Error(), maxPayload)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, err := commands.EncodeReply(tc.rep, tc.err)
			require.NoError(t, err)
			require.Greater(t, len(full), room)
			b, err := fitAnswer(tc.rep, tc.err, len(full), room, maxPayload)
			require.NoError(t, err)
			require.LessOrEqual(t, len(b), room)
			rep, err := commands.DecodeReply(b)
			tc.check(t, rep, err)
		})
	}
	_, err := fitAnswer(commands.Reply{}, errors.New(long), 2000, 100, maxPayload)
	require.ErrorIs(t, err, errAnswerTooLarge, "a room too small even for the note")
}
