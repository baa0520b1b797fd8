package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// A message on the commands subject that asks for no answer (a publish, not a request: no follower sends one) is not
// decided, and the writer logs it: it decided it, and its answer, which RespondMsg could not send, was dropped
// unlogged — a change made for no one to hear.
func TestWriterDecidesNoRequestItCannotAnswer(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	logs := &lockedBuffer{}
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})

	data, err := commands.EncodeRequest(commands.Request{Principal: events.AdminPrincipal(), CommandID: "c1",
		Actor:   events.Actor{Role: events.RoleAdmin},
		Command: &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}})
	require.NoError(t, err)
	nc := connectTo(t, srv)
	require.NoError(t, nc.Publish(cfg.CommandSubject(), data))
	require.NoError(t, nc.Flush())

	// NB: the log line first: the writer has handled the message then, however slow the machine, so a decision made
	// before it is in the state below, where a window counted from the publish would pass a writer slower than the
	// window; the window after it is for a decision made after the line.
	require.Eventually(t, func() bool { return bytes.Contains(logs.Bytes(), []byte("asks for no answer")) },
		20*time.Second, 10*time.Millisecond, "not logged: %s", logs.Bytes())
	require.Contains(t, logs.String(), "lost=1")
	require.Never(t, func() bool {
		created := false
		w.Engine().Read(func(s *projections.State) { _, created = s.Run("R") })
		return created
	}, 500*time.Millisecond, 10*time.Millisecond, "decided a request nobody hears the answer to")
}

// lockedBuffer is a bytes.Buffer a logger writes to from any goroutine while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *lockedBuffer) String() string { return string(b.Bytes()) }

// Messages on the commands subject that ask for no answer, sent as fast as a peer (or a misconfigured client) can,
// are logged one line per interval, not one each: a line for each flooded crewd's log.
func TestAFloodOfUnanswerableMessagesIsLoggedBounded(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	logs := &lockedBuffer{}
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second, warnEvery: time.Hour,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	nc := connectTo(t, srv)
	const flood = 500
	for range flood {
		require.NoError(t, nc.Publish(cfg.CommandSubject(), []byte("x")))
	}
	require.NoError(t, nc.Flush())
	require.Eventually(t, func() bool { return w.lostAnswers.Load() == flood }, 20*time.Second, 10*time.Millisecond,
		"the writer handled %d of %d messages", w.lostAnswers.Load(), flood)
	require.Equal(t, 1, bytes.Count(logs.Bytes(), []byte("asks for no answer")), "lines logged:\n%s", logs)
}

// warnBound logs a kind of warning once an interval, the next line with how many went unlogged, and each kind apart.
func TestWarnBoundLogsAKindOnceAnInterval(t *testing.T) {
	logs := &lockedBuffer{}
	lg := slog.New(slog.NewTextHandler(logs, nil))
	now := time.Unix(1000, 0)
	b := newWarnBound(10 * time.Second)
	b.now = func() time.Time { return now }
	for range 5 {
		b.warn(lg, "kind a", "n", 1)
	}
	b.warn(lg, "kind b")
	now = now.Add(9 * time.Second)
	b.warn(lg, "kind a")
	now = now.Add(time.Second)
	b.warn(lg, "kind a")
	b.warn(lg, "kind a")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 3, "%s", logs)
	require.Contains(t, lines[0], `msg="kind a" n=1`)
	require.NotContains(t, lines[0], "suppressed")
	require.Contains(t, lines[1], `msg="kind b"`)
	require.NotContains(t, lines[1], "suppressed")
	require.Contains(t, lines[2], `msg="kind a" suppressed=5`)
}
