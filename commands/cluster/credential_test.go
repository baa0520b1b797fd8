package cluster

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// A worker's command sent through a follower whose copy has not yet folded the end of the worker's credential (a
// revocation, the end of its task) is refused by the writer with the error a single crewd gives — the same
// *commands.CredentialEndedError, which the broker answers revoked or stale-token — and nothing is recorded: the
// writer checks the credential against the state it decides on, not the follower's copy, however far behind it is.
// The follower answers the refusal once its copy holds the end, as it answers any refusal: it answered at once, and
// a worker told its credential had ended was admitted again by a hello on the same crewd, and read its task running.
func TestWriterRefusesACredentialEndedBehindTheFollowersCopy(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second})
	admin := adminOf(t, w)
	digest := seedRunningWorkers(admin, "T1", "T2", "T3")
	for _, tc := range []struct {
		task string
		end  commands.Command
		want commands.CredentialEnd
	}{
		{"T1", &commands.CredentialRevoke{RunID: "R", TaskID: "T1"}, commands.CredentialRevoked},
		{"T2", &commands.TaskTransition{RunID: "R", TaskID: "T2", To: "completed"}, commands.CredentialTaskEnded},
	} {
		t.Run(tc.task, func(t *testing.T) {
			f, hold, release, waiting := startFollowerHoldingItsFold(t, srv, cfg)
			waitHead(t, f, w.Engine().Head())
			hold.Store(true) // from here on the follower copies the stream but its state stays where it is
			admin(tc.end)
			before := w.Engine().Head()

			cred := &commands.Credential{RunID: "R", Key: tc.task, Digest: digest, TaskID: tc.task}
			checked := func() (end commands.CredentialEnd) {
				f.Engine().Read(func(s *projections.State) { end = commands.CheckCredential(s, *cred) })
				return end
			}
			require.Equal(t, commands.CredentialLive, checked(),
				"the follower's copy (what its broker checks) admits it")
			answered := submitHeldBack(t, f, waiting,
				commands.Request{Principal: events.WorkerPrincipal("R", tc.task),
					CommandID: "m-" + tc.task, Actor: events.Actor{Role: events.RoleWorker, TaskID: tc.task},
					Command:    &commands.MessageSend{RunID: "R", FromTask: tc.task, To: []string{"T3"}, Body: "hi"},
					Credential: cred})
			require.Equal(t, commands.CredentialLive, checked(), "the fold is still held")
			release()
			err := (<-answered).err
			// NB: as the broker tells it (a type assertion, not errors.As): the client must hear the very answer of
			// one crewd.
			ended, ok := err.(*commands.CredentialEndedError)
			require.True(t, ok, "want a *commands.CredentialEndedError, got %T: %v", err, err)
			require.Equal(t, tc.want, ended.End)
			require.Equal(t, tc.want, checked(),
				"the follower's copy, once it answered, refuses the credential so too")
			require.Equal(t, before, w.Engine().Head(), "the writer recorded the refused command")
			waitHead(t, f, w.Engine().Head())
			require.Equal(t, w.Engine().Head(), f.Engine().Head(),
				"the follower's copy holds what the writer's does, no more")
		})
	}
}

// A worker's command forwarded from a follower whose broker checked its credential before the run ended, and decided
// by the writer after the run was reopened, is refused by the writer as one crewd refuses it (stale-token, run
// terminal), nothing recorded: the credential's bind position (commands.Credential.Since) travels with the request,
// and the writer checks the run's last end against it, where the writer knew no such position and the reopened run's
// status admitted the command. A request without the position — a follower of the build before, or a credential
// that has none — is decided as before it, and one bound after the reopening is admitted.
func TestAReopenedRunRefusesAForwardedCommandItsEndOvertook(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second})
	admin := adminOf(t, w)
	digest := seedRunningWorkers(admin, "T1", "T2")

	for _, tc := range []struct {
		name string
		// since is the credential's bind position, given the follower's head when its broker checked it and the
		// writer's once the run was ended and reopened.
		since func(checked, reopened uint64) uint64
		want  commands.CredentialEnd
	}{
		{"bound before the end", func(checked, _ uint64) uint64 { return checked }, commands.CredentialRunEnded},
		{"no position", func(uint64, uint64) uint64 { return 0 }, commands.CredentialLive},
		{"bound after the reopening", func(_, reopened uint64) uint64 { return reopened }, commands.CredentialLive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, hold, release, waiting := startFollowerHoldingItsFold(t, srv, cfg)
			waitHead(t, f, w.Engine().Head())
			checked := f.Engine().Head()
			hold.Store(true) // the follower's state stays where its broker checked the credential
			admin(&commands.RunTransition{RunID: "R", To: "completed"})
			admin(&commands.RunTransition{RunID: "R", To: "running"})
			before := w.Engine().Head()

			cred := &commands.Credential{RunID: "R", Key: "T1", Digest: digest, TaskID: "T1",
				Since: tc.since(checked, before)}
			f.Engine().Read(func(s *projections.State) {
				require.Equal(t, commands.CredentialLive, commands.CheckCredential(s, *cred),
					"the follower's copy (what its broker checks) admits it")
			})
			answered := submitHeldBack(t, f, waiting, commands.Request{Principal: events.WorkerPrincipal("R", "T1"),
				CommandID: "m-" + tc.name, Actor: events.Actor{Role: events.RoleWorker, TaskID: "T1"},
				Command:    &commands.MessageSend{RunID: "R", FromTask: "T1", To: []string{"T2"}, Body: "hi"},
				Credential: cred})
			release()
			a := <-answered
			if tc.want == commands.CredentialLive {
				require.NoError(t, a.err, "decided as before the position travelled")
				require.Nil(t, a.rep.Rejected)
				require.Greater(t, w.Engine().Head(), before, "the admitted command was recorded")
				return
			}
			// NB: as the broker tells it (a type assertion, not errors.As): the client must hear the very answer of
			// one crewd.
			ended, ok := a.err.(*commands.CredentialEndedError)
			require.True(t, ok, "want a *commands.CredentialEndedError, got %T: %v (%s)", a.err, a.err,
				a.rep.Result)
			require.Equal(t, tc.want, ended.End)
			require.Equal(t, before, w.Engine().Head(), "the writer recorded the refused command")
		})
	}
}

// adminOf submits a command to w's engine as the admin and requires it to be accepted.
func adminOf(t *testing.T, w *Node) func(commands.Command) {
	return func(c commands.Command) {
		t.Helper()
		require.Nil(t, submitAsAdmin(t, w, c).Rejected, c.Kind())
	}
}

// seedRunningWorkers creates run R, running, with each of tasks running and holding a worker credential: the digest
// returned.
func seedRunningWorkers(admin func(commands.Command), tasks ...string) (digest string) {
	digest = strings.Repeat("ab", 32)
	admin(&commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w",
		OrchestratorDigest: strings.Repeat("cd", 32)})
	admin(&commands.RunTransition{RunID: "R", To: "running"})
	for _, task := range tasks {
		admin(&commands.TaskCreate{RunID: "R", TaskID: task, Role: "executor", Agent: "a", Title: "t", Cwd: "/w"})
		admin(&commands.TaskTransition{RunID: "R", TaskID: task, To: "running"})
		admin(&commands.CredentialIssue{RunID: "R", TaskID: task, Digest: digest})
	}
	return digest
}

// startFollowerHoldingItsFold starts a follower whose engine stops folding what it copies once hold is set, until
// release is called: its state (what its broker checks a credential against, and serves reads from) stays behind the
// stream. waiting receives each position the answer to a forwarded request waits for its copy to hold.
func startFollowerHoldingItsFold(t *testing.T, srv *server.Server, cfg natslog.Config) (f *Node, hold *atomic.Bool,
	release func(), waiting <-chan uint64) {
	t.Helper()
	hold = new(atomic.Bool)
	released := make(chan struct{})
	waits := make(chan uint64, 16)
	f = startOn(t, srv, Options{Name: "f", Log: cfg, LeaseTTL: time.Second, beforeFold: func(ctx context.Context) {
		if hold.Load() {
			select {
			case <-released:
			case <-ctx.Done():
			}
		}
	}, beforeCopyWait: func(pos uint64) {
		select {
		case waits <- pos:
		default:
		}
	}})
	return f, hold, sync.OnceFunc(func() { close(released) }), waits
}

// submitted is what a submission answered.
type submitted struct {
	rep commands.Reply
	err error
}

// submitHeldBack submits r to f on its own goroutine and requires that its answer waits for f's copy (waiting, of
// startFollowerHoldingItsFold, receives the position it waits for) rather than come first; the answer comes on the
// channel returned. NB: the follower's wait, not a time window: the writer's answer is in its hand then, so a
// follower that answers before its copy holds what the writer decided on has answered by then, however slow the
// machine.
func submitHeldBack(t *testing.T, f *Node, waiting <-chan uint64, r commands.Request) <-chan submitted {
	t.Helper()
	answered := make(chan submitted, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rep, err := f.Engine().Submit(ctx, r)
		answered <- submitted{rep, err}
	}()
	select {
	case a := <-answered:
		t.Fatalf("answered %+v, %v while the follower's copy does not hold what the writer decided on",
			a.rep.Rejected, a.err)
	case pos := <-waiting:
		require.Greater(t, pos, f.Engine().Head(), "waits for a position its copy has not folded")
	case <-time.After(30 * time.Second):
		t.Fatal("the follower neither answered nor waited for its copy")
	}
	return answered
}

// submitAsAdmin submits c to n's engine as the admin, without a command id, and requires an answer.
func submitAsAdmin(t *testing.T, n *Node, c commands.Command) commands.Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := n.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(),
		Actor: events.Actor{Role: events.RoleAdmin}, Command: c})
	require.NoError(t, err, c.Kind())
	return rep
}

// waitHead waits until n's engine has folded position pos.
func waitHead(t *testing.T, n *Node, pos uint64) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		ch := n.Engine().Changed()
		if n.Engine().Head() >= pos {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s did not fold position %d (at %d)", n.o.Name, pos, n.Engine().Head())
		}
	}
}

// A forwarded request's credential travels in a header beside the request's bytes, which are what a follower of the
// build before forwarded credentials sends: a writer of that build reads the bytes alone, as it read every forwarded
// request, and a writer of this build reads the credential from the header. A request without a credential has no
// header. The request is sent once: no answer makes a follower send it again without its credential.
func TestForwardedCredentialTravelsBesideTheRequest(t *testing.T) {
	for _, cred := range []*commands.Credential{
		{RunID: "R", Key: "T1", Digest: strings.Repeat("ab", 32), TaskID: "T1"},
		{RunID: "R", Key: "T1", Digest: strings.Repeat("ab", 32), TaskID: "T1", Attempt: 2, Since: 17},
		nil,
	} {
		var mu sync.Mutex
		var asked []*nats.Msg
		f := followerOfAFakeWriterReplying(t, startNATS(t), func(m *nats.Msg) []byte {
			mu.Lock()
			asked = append(asked, m)
			mu.Unlock()
			b, _ := commands.EncodeReply(commands.Reply{Result: []byte(`{"ok":true}`)}, nil)
			return b
		})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r := commands.Request{Principal: events.WorkerPrincipal("R", "T1"), CommandID: "m1",
			Actor: events.Actor{Role: events.RoleWorker, TaskID: "T1"}, MaxResultBytes: 4096, Credential: cred,
			Command: &commands.MessageSend{RunID: "R", FromTask: "T1", To: []string{"T2"}, Body: "hi"}}
		rep, err := f.Engine().Submit(ctx, r)
		cancel()
		require.NoError(t, err)
		require.JSONEq(t, `{"ok":true}`, string(rep.Result))
		mu.Lock()
		require.Len(t, asked, 1, "sent once")
		m := asked[0]
		mu.Unlock()

		got, err := commands.DecodeRequest(m.Data)
		require.NoError(t, err)
		plain := r
		plain.Credential = nil
		require.Equal(t, plain, got, "the bytes are the request without its credential")
		want, err := commands.EncodeRequest(plain)
		require.NoError(t, err)
		require.Equal(t, want, m.Data, "the bytes a follower of the build before sends")
		h := m.Header.Get(credentialHeader)
		if cred == nil {
			require.Empty(t, h, "no credential, no header")
			require.Empty(t, m.Header.Values(credentialSinceHeader), "no credential, no bind position")
			continue
		}
		gotCred, err := credentialOfHeaders(m.Header)
		require.NoError(t, err)
		require.Equal(t, cred, gotCred, "the credential, in its headers")
		if cred.Since == 0 {
			require.Empty(t, m.Header.Values(credentialSinceHeader), "no bind position, no header: as the build "+
				"before sends it")
			continue
		}
		plainCred, err := credentialOfHeader(h)
		require.NoError(t, err)
		require.Zero(t, plainCred.Since, "the credential's own header, what a writer of the build before reads")
		require.Equal(t, []string{"17"}, m.Header.Values(credentialSinceHeader))
	}
}

// A follower answers the writer's refusal of an ended credential as itself — unless an earlier attempt of the same
// request went unanswered: the writer checks the credential before it looks the command id up, so that attempt may
// have been decided, and every later one is refused all the same. Then it answers in doubt at once.
func TestFollowerInDoubtDoesNotAnswerCredentialEnded(t *testing.T) {
	ended := &commands.CredentialEndedError{End: commands.CredentialTaskEnded}
	f, asked := followerOfAFakeWriter(t, func(int32) error { return ended })
	_, err := submitRunCreate(f, "c-1")
	require.Equal(t, ended, err)
	require.Equal(t, int32(1), asked.Load())

	f, asked = followerOfAFakeWriter(t, func(n int32) error {
		if n == 1 {
			return commands.ErrFailed
		}
		return ended
	})
	_, err = submitRunCreate(f, "c-1")
	require.ErrorIs(t, err, ErrNoWriter)
	var got *commands.CredentialEndedError
	require.NotErrorAs(t, err, &got)
	require.Equal(t, int32(2), asked.Load(), "in doubt at once, not sent again")
}

// A writer refuses a forwarded request whose credential header (or its bind position's) it cannot read, before
// deciding anything, as a failure (in doubt for the follower, never a definitive answer): it is not read as no
// credential, which would decide the request unchecked, nor as no bind position.
func TestWriterRefusesAnUnreadableCredentialHeader(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second})
	data, err := commands.EncodeRequest(commands.Request{Principal: events.AdminPrincipal(), CommandID: "c-1",
		Actor:   events.Actor{Role: events.RoleAdmin},
		Command: &commands.RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w"}})
	require.NoError(t, err)
	head := w.Engine().Head()
	// NB: the writer subscribes to the commands subject before it says it is elected; a request before the server
	// has that subscription has no responder, so the writer's connection is flushed (the server has read its SUB).
	require.NoError(t, w.o.Conn.Flush())
	nc := connectTo(t, srv)
	valid, err := credentialHeaderOf(&commands.Credential{RunID: "r", Key: "t", Digest: "ab", TaskID: "t"})
	require.NoError(t, err)
	for name, h := range map[string]nats.Header{
		"no base64":                          {credentialHeader: {"!!"}},
		"no credential":                      {credentialHeader: {"wcE"}},
		"past its bound":                     {credentialHeader: {strings.Repeat("A", 20000)}},
		"a bind position with a leading 0":   {credentialHeader: {valid}, credentialSinceHeader: {"07"}},
		"a bind position of 0":               {credentialHeader: {valid}, credentialSinceHeader: {"0"}},
		"a negative bind position":           {credentialHeader: {valid}, credentialSinceHeader: {"-7"}},
		"a bind position without credential": {credentialSinceHeader: {"7"}},
	} {
		m := nats.NewMsg(cfg.CommandSubject())
		m.Data = data
		m.Header = h
		ans, err := nc.RequestMsg(m, 5*time.Second)
		require.NoError(t, err, name)
		_, err = commands.DecodeReply(ans.Data)
		require.ErrorIs(t, err, commands.ErrRemote, "%s: a failure", name)
		require.Contains(t, err.Error(), "credential", name)
	}
	require.Equal(t, head, w.Engine().Head(), "nothing decided")
}

// A credential's header is a header's value whatever the credential's strings hold (no byte but the URL-safe base64
// alphabet: no CR, LF or NUL a client put in a run or task id), read back as the same credential; no credential is
// no header. A value that does not decode is refused, never read as no credential.
func TestCredentialHeaderIsAHeadersValue(t *testing.T) {
	c := &commands.Credential{RunID: "run\r\nX-Injected: 1", Key: "t\x00é", Digest: strings.Repeat("ab", 32),
		TaskID: "t\x00é"}
	h, err := credentialHeaderOf(c)
	require.NoError(t, err)
	for _, b := range []byte(h) {
		require.True(t, b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '-' || b == '_',
			"%q holds %q", h, b)
	}
	got, err := credentialOfHeader(h)
	require.NoError(t, err)
	require.Equal(t, c, got)
	none, err := credentialHeaderOf(nil)
	require.NoError(t, err)
	require.Empty(t, none)
	got, err = credentialOfHeader("")
	require.NoError(t, err)
	require.Nil(t, got)
	for _, bad := range []string{"!!", h + "=", h[:len(h)-2], strings.Repeat("A", 20000), "wcE"} {
		got, err := credentialOfHeader(bad)
		require.Error(t, err, "%.8q", bad)
		require.Nil(t, got)
	}
}

// A credential's bind position travels in its own header, in decimal, and reads back as the same credential; a
// credential without one (0), and no credential, send no such header. A position that is not what a follower sends
// (one positive decimal uint64 of no sign, leading zero or space), or one without a credential, is refused, never
// read as no position, which would decide the request as if its run had never ended since the worker's hello.
func TestCredentialSinceHeaderRoundTrips(t *testing.T) {
	for _, c := range []*commands.Credential{
		{RunID: "R", Key: "T1", Digest: strings.Repeat("ab", 32), TaskID: "T1", Since: 1},
		{RunID: "R", Key: "T1", Digest: strings.Repeat("ab", 32), TaskID: "T1", Attempt: 3, Since: 12345},
		{RunID: "R", Key: "T1", Digest: strings.Repeat("ab", 32), TaskID: "T1", Since: math.MaxUint64},
		{RunID: "R", Key: "T1", Digest: strings.Repeat("ab", 32), TaskID: "T1"},
		{RunID: "R", Key: events.OrchestratorKey, Digest: strings.Repeat("cd", 32)},
		nil,
	} {
		h := credentialHeadersOf(t, c)
		if c == nil || c.Since == 0 {
			require.NotContains(t, h, credentialSinceHeader, "%+v", c)
		} else {
			require.Equal(t, []string{strconv.FormatUint(c.Since, 10)}, h.Values(credentialSinceHeader))
		}
		got, err := credentialOfHeaders(h)
		require.NoError(t, err, "%+v", c)
		require.Equal(t, c, got)
	}
	got, err := credentialOfHeaders(nil)
	require.NoError(t, err, "a message without headers: no credential")
	require.Nil(t, got)

	valid := credentialHeadersOf(t, &commands.Credential{RunID: "R", Key: "T1", Digest: "ab", TaskID: "T1"})
	for _, tc := range []struct {
		name  string
		since []string
		cred  bool
	}{
		{"empty", []string{""}, true},
		{"zero", []string{"0"}, true},
		{"a leading zero", []string{"07"}, true},
		{"a plus sign", []string{"+7"}, true},
		{"a minus sign", []string{"-7"}, true},
		{"a leading space", []string{" 7"}, true},
		{"a trailing space", []string{"7 "}, true},
		{"a space inside", []string{"7 7"}, true},
		{"hexadecimal", []string{"0x7"}, true},
		{"an underscore", []string{"1_000"}, true},
		{"a fraction", []string{"7.0"}, true},
		{"an exponent", []string{"7e3"}, true},
		{"past uint64", []string{"18446744073709551616"}, true},
		{"a word", []string{"seven"}, true},
		{"a digit of another script", []string{"\u0667"}, true},
		{"two values", []string{"7", "7"}, true},
		{"no credential", []string{"7"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := nats.Header{credentialSinceHeader: tc.since}
			if tc.cred {
				h[credentialHeader] = valid.Values(credentialHeader)
			}
			got, err := credentialOfHeaders(h)
			require.Error(t, err)
			require.Contains(t, err.Error(), "credential")
			require.Nil(t, got)
		})
	}
}

// credentialHeadersOf is the headers a follower sends c in.
func credentialHeadersOf(t testing.TB, c *commands.Credential) nats.Header {
	t.Helper()
	cred, err := credentialHeaderOf(c)
	require.NoError(t, err)
	h := nats.Header{}
	if cred != "" {
		h.Set(credentialHeader, cred)
	}
	if since := sinceHeaderOf(c); since != "" {
		h.Set(credentialSinceHeader, since)
	}
	return h
}

// FuzzCredentialOfHeaders: no credential header and bind position make credentialOfHeaders panic, and what it
// accepts a follower sends as the same headers, which read back as the same credential.
func FuzzCredentialOfHeaders(f *testing.F) {
	c := &commands.Credential{RunID: "R", Key: "T1", Digest: strings.Repeat("ab", 32), TaskID: "T1", Attempt: 2,
		Since: 17}
	cred, err := credentialHeaderOf(c)
	require.NoError(f, err)
	f.Add(cred, "17", true)
	f.Add(cred, "", false)
	f.Add(cred, "017", true)
	f.Add("", "17", true)
	f.Add("", "", false)
	f.Fuzz(func(t *testing.T, cred, since string, hasSince bool) {
		h := nats.Header{}
		if cred != "" {
			h.Set(credentialHeader, cred)
		}
		if hasSince {
			h.Set(credentialSinceHeader, since)
		}
		c, err := credentialOfHeaders(h)
		if err != nil {
			require.Nil(t, c)
			return
		}
		require.False(t, hasSince && c == nil, "a bind position without a credential was read")
		again := credentialHeadersOf(t, c)
		if hasSince {
			require.Equal(t, h.Values(credentialSinceHeader), again.Values(credentialSinceHeader),
				"the bind position reads back only as a follower sends it")
		}
		back, err := credentialOfHeaders(again)
		require.NoError(t, err)
		require.Equal(t, c, back)
	})
}
