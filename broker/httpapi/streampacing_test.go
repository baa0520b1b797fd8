package httpapi

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// openStreamLines opens the stream at path with the read-only token and returns its lines as sent, keep-alive
// comments included (openStream's frames leave them out); it ends with the test.
func openStreamLines(t *testing.T, f *fixture, path string) <-chan string {
	t.Helper()
	return openStreamLinesWith(t, f, path, http.Header{"Authorization": {"Bearer " + roToken}})
}

// openStreamLinesWith is openStreamLines with the credential in header.
func openStreamLinesWith(t *testing.T, f *fixture, path string, header http.Header) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.web.URL+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := f.web.Client().Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// nextLine is the stream's next line that is not empty, failing the test if none comes within a minute (a guard
// against a hang, not a timing assertion).
func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the stream ended")
			if l != "" {
				return l
			}
		case <-time.After(time.Minute):
			t.Fatal("no line within a minute")
			return ""
		}
	}
}

// awaitLine reads the stream's lines up to the first that starts with prefix, and returns the ones before it.
func awaitLine(t *testing.T, lines <-chan string, prefix string) []string {
	t.Helper()
	var before []string
	for l := nextLine(t, lines); !strings.HasPrefix(l, prefix); l = nextLine(t, lines) {
		before = append(before, l)
	}
	return before
}

const keepAliveLine = ": keep-alive"

// TestAPacedStreamSendsKeepAlivesWhileItWaits: a read-only token's stream waiting out the token's debt sent
// nothing (replaying the log), or did not wait at all (live), so a proxy or a browser could drop a paced stream as
// dead, and its client could not tell it from a hung one. Now the stream sends its keep-alive while it waits, and
// reads nothing, of the log or of the hub's ring, until the token's bucket holds a unit again.
func TestAPacedStreamSendsKeepAlivesWhileItWaits(t *testing.T) {
	ro := keyReadOnlyPrefix + digestOf(roToken)
	for _, tc := range []struct {
		name string
		path string
		// owe makes the token owe an hour once the stream has said hello, and returns the first line of the event
		// the stream must not send while the token owes it.
		owe func(t *testing.T, f *fixture, pacer *fakePacer, waiting <-chan struct{}) string
	}{
		{"replaying the log", "/api/v1/stream?after=0", func(_ *testing.T, _ *fixture, _ *fakePacer,
			_ <-chan struct{}) string {
			return "id: 1"
		}},
		{"live", "/api/v1/stream", func(t *testing.T, f *fixture, pacer *fakePacer, waiting <-chan struct{}) string {
			pacer.delay.Store(int64(time.Hour))
			select {
			case <-waiting: // NB: the event comes once the stream waits, so no take of the ring precedes the debt
			case <-time.After(time.Minute): // a guard against a hang, not a timing
				t.Fatal("the live stream never waited for its token's bucket")
			}
			usage(f, 1)
			return "id: " + strconv.FormatUint(f.eng.Head(), 10)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer, KeepAlive: 20 * time.Millisecond})
			waiting := watchPacing(f)
			f.srv.catchingUp = func(key string) {
				if key == ro && pacer.delay.Load() > 0 {
					t.Error("the stream read the log while its token owed an hour")
				}
			}
			if tc.name == "replaying the log" {
				pacer.debt.Store(int64(time.Hour)) // from the stream's opening on
			}
			lines := openStreamLines(t, f, tc.path)
			awaitLine(t, lines, "event: hello")
			held := tc.owe(t, f, pacer, waiting)
			for range 3 {
				l := nextLine(t, lines)
				require.True(t, l == keepAliveLine || strings.HasPrefix(l, "data: "), "while the token owes: %q", l)
				if l != keepAliveLine {
					require.Equal(t, keepAliveLine, nextLine(t, lines), "after the hello's data")
				}
			}
			pacer.debt.Store(0)
			pacer.delay.Store(0)
			before := awaitLine(t, lines, held)
			for _, l := range before {
				require.Equal(t, keepAliveLine, l, "the event comes first once the token owes nothing")
			}
		})
	}
}

// TestALiveStreamIsChargedTheEventsItIsSent: a read-only token's live stream took every event the hub read for it
// free of charge, where a socket subscription is charged every event it reads, so the token's streams cost nothing
// of its pace however much they were sent. The hub reads each event once for every stream, so each stream is
// charged what it looks at of that read, here, without a filter, what it is sent: one unit per event (those its
// filter leaves out: TestALiveStreamIsChargedTheEventsItsFilterLeavesOut).
func TestALiveStreamIsChargedTheEventsItIsSent(t *testing.T) {
	ro := keyReadOnlyPrefix + digestOf(roToken)
	pacer := newFakePacer()
	f := newFixture(t, Options{Pacer: pacer})
	frames := f.openStream("/api/v1/stream", http.Header{"Authorization": {"Bearer " + roToken}})
	require.Equal(t, "hello", next(t, frames).event)
	for n := range int64(3) {
		usage(f, n+1)
		require.Equal(t, "task.usage", next(t, frames).event)
	}
	charged := func() int {
		n := 0
		for _, c := range pacer.charges()[ro] {
			n += c
		}
		return n
	}
	require.Eventually(t, func() bool { return charged() >= 1+3 }, time.Minute, 5*time.Millisecond,
		"the stream was not charged the events it was sent")
	require.Equal(t, 1+3, charged(), "its opening, and each event sent charged once")
}

// TestAStreamInDebtEndsWithTheHubOrItsClient: a read-only token's stream waiting out its token's debt noticed that
// the hub feeding every stream had stopped only once the debt was paid (an hour here), keeping its goroutine, its
// place among the credential's streams and its buffers that long, sending keep-alives on a stream that would never
// carry an event again. It now ends as every other stream does when the hub stops: its resync says so, at once.
// A stream in debt whose client goes ends at once too, live or replaying.
func TestAStreamInDebtEndsWithTheHubOrItsClient(t *testing.T) {
	for _, path := range []string{"/api/v1/stream", "/api/v1/stream?after=0"} {
		for _, end := range []string{"the hub stops", "the client goes"} {
			t.Run(path+": "+end, func(t *testing.T) {
				pacer := newFakePacer()
				// NB: no keep-alive within the test's guards, which read frames only.
				f := newFixture(t, Options{Pacer: pacer, KeepAlive: time.Hour})
				waiting := watchPacing(f)
				live := path == "/api/v1/stream"
				if !live {
					pacer.debt.Store(int64(time.Hour)) // owed from its opening on, before its replay's first read
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				frames := f.openStreamVia(ctx, f.web.Client(), f.web.URL, path,
					http.Header{"Authorization": {"Bearer " + roToken}})
				require.Equal(t, "hello", next(t, frames).event)
				if live {
					pacer.delay.Store(int64(time.Hour))
					usage(f, 1) // wakes the stream, which finds its token owing before it takes the event
				}
				recv(t, waiting, "wait of the stream for its token's bucket")
				if end == "the client goes" {
					cancel()
				} else {
					failHub(t, f)
					_, reason := resyncOf(t, next(t, frames))
					require.Contains(t, reason, "stopped following the log")
					ends(t, frames)
				}
				require.Eventually(t, func() bool { return f.srv.streams.open() == 0 }, time.Minute,
					5*time.Millisecond, "the stream in debt held its place")
			})
		}
	}
}

// TestALiveStreamIsChargedTheEventsItsFilterLeavesOut: a read-only token's live stream was charged only the events
// it was sent, where a socket subscription is charged every event it reads, pushed or filtered out, and a replaying
// stream every event it read from the log: a type filter that keeps little had the token's streams look at every
// event the daemon wrote for free. A live stream is now charged, as its replay is, every event of its run (every
// run's, without one) that it looked at in the hub's ring, sent or left out by its type filter; not the other runs'
// events a run's stream skips, which a subscription and a run's replay never read.
func TestALiveStreamIsChargedTheEventsItsFilterLeavesOut(t *testing.T) {
	ro := keyReadOnlyPrefix + digestOf(roToken)
	for _, path := range []string{
		"/api/v1/stream?type=task.usage",
		"/api/v1/stream?run=" + liveRun + "&type=task.usage",
		"/api/v1/stream?run=" + liveRun,
	} {
		t.Run(path, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer})
			frames := f.openStream(path, http.Header{"Authorization": {"Bearer " + roToken}})
			require.Equal(t, "hello", next(t, frames).event)
			from := f.eng.Head()
			f.do(audittest.Admin, &commands.RunCreate{RunID: "other_run", Team: "t", Goal: "g", Cwd: "/srv/o"})
			f.do(audittest.Orchestrator, &commands.TaskCreate{RunID: liveRun, TaskID: "04_more", Role: "executor",
				Agent: "executor", Title: "more", Cwd: "/srv/live/more", StepID: "04_more"})
			usage(f, 1)
			last := f.eng.Head()
			var fr sseFrame
			for fr.event != "task.usage" {
				fr = next(t, frames)
			}
			require.Equal(t, strconv.FormatUint(last, 10), fr.id)

			runOnly := strings.Contains(path, "run=")
			want := 0
			it := f.log.Read(from + 1)
			for it.Next() && it.Event().Position <= last {
				if !runOnly || it.Event().Stream == liveRun {
					want++
				}
			}
			require.NoError(t, it.Close())
			require.Greater(t, want, 1, "the filter leaves some out")
			charged := 0
			for _, c := range pacer.charges()[ro] {
				charged += c
			}
			// NB: a stream is charged before it writes: the charges of what it looked at are in once the frame is.
			require.Equal(t, 1+want, charged, "its opening, and the events of its run it looked at, sent or left out")
		})
	}
}

// TestAStreamsReplayIsChargedTheEventItLeavesForItsNextBatch: a stream replaying the log reads, and renders, the
// event that does not fit in the rest of its batch, and leaves it for its next batch, where it reads it again; it was
// charged only the events it sent, so a replay of events of about a batch each read and rendered each twice for one
// unit, where the socket's events.since is charged the event it read past its page too. Each read of the log is now
// charged every event it read.
func TestAStreamsReplayIsChargedTheEventItLeavesForItsNextBatch(t *testing.T) {
	ro := keyReadOnlyPrefix + digestOf(roToken)
	pacer := newFakePacer()
	f := newFixture(t, Options{Pacer: pacer})
	start := f.eng.Head()
	const large = 3
	body := strings.Repeat("x", 200<<10) // NB: one frame to a batch (streamBatchBytes)
	for range large {
		r := f.do(audittest.Worker("02_help"), &commands.MessageSend{RunID: liveRun, FromTask: "02_help",
			To: []string{"parent"}, Body: body})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
	}
	h := &f.srv.streams.hub
	// NB: the hub, idle, moves its ring's start past the messages, so the stream reads them from the log.
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.first > f.eng.Head()
	}, time.Minute, 5*time.Millisecond)

	frames := f.openStream("/api/v1/stream?after="+strconv.FormatUint(start, 10),
		http.Header{"Authorization": {"Bearer " + roToken}})
	require.Equal(t, "hello", next(t, frames).event)
	for range large {
		require.Equal(t, events.TypeMailboxAppended, next(t, frames).event)
	}
	charged := 0
	for _, c := range pacer.charges()[ro] {
		charged += c
	}
	// Its opening; each batch read its message and the next one, which did not fit; the last read its message alone.
	require.Equal(t, 1+2*large-1, charged)
}

// TestOpeningAStreamIsChargedAsARead: a read-only token's stream was charged nothing to open (a run looked up, a
// stream set up, its hello written), where every other read costs one unit, as a socket subscription's request does,
// so a token could open and close streams, or ask for runs that are not there, in a loop for free. Opening a stream
// now costs one unit, answered or refused; its reads are charged as they go (the events it looks at).
func TestOpeningAStreamIsChargedAsARead(t *testing.T) {
	ro := keyReadOnlyPrefix + digestOf(roToken)
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/api/v1/stream", http.StatusOK},
		{"/api/v1/stream?run=" + liveRun, http.StatusOK},
		{"/api/v1/stream?run=no-such-run", http.StatusNotFound},
	} {
		t.Run(tc.path, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer})
			if tc.status == http.StatusOK {
				frames := f.openStream(tc.path, http.Header{"Authorization": {"Bearer " + roToken}})
				require.Equal(t, "hello", next(t, frames).event)
			} else {
				status, _ := f.getAs(tc.path, "Bearer "+roToken)
				require.Equal(t, tc.status, status)
			}
			// NB: charged before its hello is written, or its refusal: nothing was committed for it to read since.
			require.Equal(t, map[string][]int{ro: {1}}, pacer.charges())
		})
	}
}

// TestOpeningAStreamWaitsForItsTokensBucket: a read-only token in debt opened its streams at once (a run looked up,
// a place among its streams taken, its answer and hello written), where its every other read waits for its bucket,
// so a token in debt for hours kept opening streams at full speed; its stream then waited before its first read. The
// opening now waits, holding no stream's place and writing nothing, as a read does; one whose token is revoked
// meanwhile is answered 401 auth, as a read is, and one whose client goes is answered nothing. One waiting as the hub
// stops is refused 503 unavailable at once, as a stream in debt ends at once with its resync, where it waited out
// its debt (an hour here) to be refused.
func TestOpeningAStreamWaitsForItsTokensBucket(t *testing.T) {
	for _, end := range []string{"the token is revoked", "the client goes", "the debt is paid", "the hub stops"} {
		t.Run(end, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer, KeepAlive: time.Hour})
			waiting := watchPacing(f)
			pacer.delay.Store(int64(time.Hour))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.web.URL+"/api/v1/stream?run="+liveRun, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+roToken)
			type answer struct {
				resp *http.Response
				err  error
			}
			answered := make(chan answer, 1)
			go func() {
				resp, err := f.web.Client().Do(req)
				answered <- answer{resp, err}
			}()
			recv(t, waiting, "wait of the stream for its token's bucket")
			require.Zero(t, f.srv.streams.open(), "a stream waiting to open holds no place")
			require.Empty(t, pacer.charges(), "nothing charged before it is served")
			switch end {
			case "the token is revoked":
				f.tokens.set(roToken, false)
			case "the client goes":
				cancel()
			case "the debt is paid":
				pacer.delay.Store(0)
			case "the hub stops":
				failHub(t, f)
			}
			a := recv(t, answered, "answer")
			if a.err == nil {
				defer a.resp.Body.Close()
			}
			switch end {
			case "the token is revoked":
				require.NoError(t, a.err)
				require.Equal(t, http.StatusUnauthorized, a.resp.StatusCode)
			case "the client goes":
				require.ErrorIs(t, a.err, context.Canceled)
			case "the debt is paid":
				require.NoError(t, a.err)
				require.Equal(t, http.StatusOK, a.resp.StatusCode)
			case "the hub stops":
				require.NoError(t, a.err)
				require.Equal(t, http.StatusServiceUnavailable, a.resp.StatusCode)
			}
		})
	}
}
