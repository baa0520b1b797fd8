package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

func usage(f *fixture, n int64) {
	f.do(audittest.Orchestrator, &commands.TaskUsage{RunID: liveRun, TaskID: "01_lead", Input: n, Output: 1})
}

// TestStreamReplaysThenLive: from after=0 every event arrives once, in position order, then live ones.
func TestStreamReplaysThenLive(t *testing.T) {
	f := newFixture(t, Options{})
	h := head(f)
	frames := f.openStream("/api/v1/stream?after=0", nil)
	hello := next(t, frames)
	require.Equal(t, "hello", hello.event)
	require.Empty(t, hello.id, "hello has no id, so it never moves Last-Event-ID")
	for want := uint64(1); want <= h; want++ {
		fr := next(t, frames)
		require.Equal(t, strconv.FormatUint(want, 10), fr.id)
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(fr.data), &ev))
		require.Equal(t, fr.event, ev["type"])
		require.Equal(t, float64(want), ev["metadata"].(map[string]any)["position"])
	}
	usage(f, 7)
	fr := next(t, frames)
	require.Equal(t, strconv.FormatUint(h+1, 10), fr.id)
	require.Equal(t, "task.usage", fr.event)
}

// TestStreamResumesAfterLastEventID: a reconnect with Last-Event-ID continues after it, without a repeat.
func TestStreamResumesAfterLastEventID(t *testing.T) {
	f := newFixture(t, Options{})
	frames := f.openStream("/api/v1/stream", http.Header{"Last-Event-Id": {"20"}})
	require.Equal(t, "hello", next(t, frames).event)
	require.Equal(t, "21", next(t, frames).id)
	// Without a position the stream starts live, at the head.
	h := head(f)
	live := f.openStream("/api/v1/stream", nil)
	require.Equal(t, "hello", next(t, live).event)
	usage(f, 1)
	require.Equal(t, strconv.FormatUint(h+1, 10), next(t, live).id)
}

// TestAStartPastTheHeadIsTheHead: a stream asked to start after a position the log has not reached (by after or
// Last-Event-ID) starts after the head, as its hello says, and sends the next event, rather than waiting silently
// for a position that may never come.
func TestAStartPastTheHeadIsTheHead(t *testing.T) {
	f := newFixture(t, Options{})
	for _, tc := range []struct {
		name   string
		path   string
		header http.Header
	}{
		{"after", "/api/v1/stream?after=18446744073709551615", nil},
		{"Last-Event-ID", "/api/v1/stream", http.Header{"Last-Event-Id": {"18446744073709551615"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := head(f)
			frames := f.openStream(tc.path, tc.header)
			hello := next(t, frames)
			require.Equal(t, "hello", hello.event)
			var data helloData
			require.NoError(t, json.Unmarshal([]byte(hello.data), &data))
			require.Equal(t, helloData{Head: h, After: h}, data)
			usage(f, 1)
			require.Equal(t, strconv.FormatUint(h+1, 10), next(t, frames).id)
		})
	}
}

// TestStreamFilters: ?run= keeps one run's events, type= some types.
func TestStreamFilters(t *testing.T) {
	f := newFixture(t, Options{})
	frames := f.openStream("/api/v1/stream?after=0&run="+audittest.RunUnlimited, nil)
	require.Equal(t, "hello", next(t, frames).event)
	first := next(t, frames)
	require.Equal(t, "run.created", first.event)
	var ev map[string]any
	require.NoError(t, json.Unmarshal([]byte(first.data), &ev))
	require.Equal(t, audittest.RunUnlimited, ev["runId"])

	typed := f.openStream("/api/v1/stream?after=0&type=delegate.rejected", nil)
	require.Equal(t, "hello", next(t, typed).event)
	for i := 0; i < 4; i++ {
		require.Equal(t, "delegate.rejected", next(t, typed).event)
	}
	usage(f, 1)
	f.do(audittest.Worker("01_lead"), &commands.DelegateRequest{RunID: liveRun, TaskID: "01_lead", Prompt: "x",
		Role: audittest.Ptr("reviewer")})
	fr := next(t, typed)
	require.Equal(t, "delegate.rejected", fr.event, "the usage event in between was filtered out")
}

// flushMeter is a stream's client that keeps what it was sent and how many bytes each flush carried (what the
// stream held for that write), and ends the request once it was sent the frame of position last.
type flushMeter struct {
	h       http.Header
	mu      sync.Mutex
	out     bytes.Buffer
	pending int
	flushes []int
	last    string
	cancel  context.CancelFunc
}

func (w *flushMeter) Header() http.Header { return w.h }
func (w *flushMeter) WriteHeader(int)     {}
func (w *flushMeter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending += len(b)
	return w.out.Write(b)
}
func (w *flushMeter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushes = append(w.flushes, w.pending)
	w.pending = 0
	if strings.Contains(w.out.String(), "id: "+w.last+"\n") {
		w.cancel()
	}
}

// TestStreamCatchUpDeliversLargeEventsOnceInBoundedBatches: a stream that resumes before 32 messages of 200 KiB
// reads them back from the log in several writes of at most streamBatchBytes of frames (plus the one frame a
// write always carries), and gets every event after its start exactly once, in position order — with no filter,
// one run's stream, and a type filter that leaves events out between the batches.
func TestStreamCatchUpDeliversLargeEventsOnceInBoundedBatches(t *testing.T) {
	f := newFixture(t, Options{})
	start := head(f)
	const n, size = 32, 200 << 10
	for i := 0; i < n; i++ {
		r := f.do(audittest.Worker("02_help"), &commands.MessageSend{RunID: liveRun, FromTask: "02_help",
			To: []string{"parent"}, Body: strings.Repeat(strconv.Itoa(i%10), size)})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
		usage(f, int64(i+1)) // a small event between two large ones
	}
	end := head(f)
	for _, tc := range []struct {
		name, query string
		keep        func(typ string) bool
	}{
		{"every event", "", func(string) bool { return true }},
		{"one run", "&run=" + liveRun, func(string) bool { return true }},
		{"one type", "&type=" + events.TypeMailboxAppended, func(typ string) bool { return typ == events.TypeMailboxAppended }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			it := f.log.Read(start + 1)
			for it.Next() {
				if rec := it.Event(); rec.Position <= end && tc.keep(rec.Type) {
					want = append(want, strconv.FormatUint(rec.Position, 10))
				}
			}
			require.NoError(t, it.Close())
			require.GreaterOrEqual(t, len(want), n)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := &flushMeter{h: http.Header{}, last: want[len(want)-1], cancel: cancel}
			req := httptest.NewRequest(http.MethodGet, "/api/v1/stream?after="+strconv.FormatUint(start, 10)+tc.query,
				nil).WithContext(ctx)
			req.Host = "127.0.0.1"
			req.Header.Set("Authorization", "Bearer "+roToken)
			f.srv.Handler().ServeHTTP(w, req)

			frames := make(chan sseFrame, 16)
			go readFrames(bytes.NewReader(w.out.Bytes()), frames)
			var got []string
			for fr := range frames {
				if fr.id != "" {
					got = append(got, fr.id)
				}
			}
			require.Equal(t, want, got, "every event after the start once, in order")
			batches := 0
			for _, b := range w.flushes {
				require.LessOrEqual(t, b, streamBatchBytes+size+4096,
					"one write held %d bytes of frames; the bound is streamBatchBytes (%d) plus one frame", b, streamBatchBytes)
				if b > size {
					batches++
				}
			}
			require.Greater(t, batches, n/2, "the messages came in several writes")
		})
	}
}

func TestStreamLimits(t *testing.T) {
	f := newFixture(t, Options{MaxStreamsPerPrincipal: 1})
	frames := f.openStream("/api/v1/stream", nil)
	require.Equal(t, "hello", next(t, frames).event)
	f.fails("/api/v1/stream", http.StatusTooManyRequests, codeTooManyStreams)
	code, _ := f.getAs("/api/v1/runs", "Bearer "+roToken)
	require.Equal(t, http.StatusOK, code)
}

// TestStreamHelloIsAsDocumented: the hello frame of a run's stream carries the fields docs/dashboard-api.md shows.
func TestStreamHelloIsAsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/dashboard-api.md")
	require.NoError(t, err)
	m := regexp.MustCompile("event: hello\ndata: (\\{.*\\})\n").FindSubmatch(doc)
	require.NotNil(t, m, "the documented hello frame")
	var documented map[string]any
	require.NoError(t, json.Unmarshal(m[1], &documented))

	f := newFixture(t, Options{})
	hello := next(t, f.openStream("/api/v1/stream?run="+liveRun, nil))
	require.Equal(t, "hello", hello.event)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(hello.data), &got))
	require.ElementsMatch(t, slices.Collect(maps.Keys(documented)), slices.Collect(maps.Keys(got)), "hello %s", hello.data)
}

// TestAStreamAskedForAsTheServerClosesIsUnavailable: a stream request that came just before Close began passes the
// server's door, and may ask for its place once Close has shut the streams (Close then waits for it). It is
// answered as every request that comes once crewd is stopping: 503 unavailable (docs/dashboard-api.md), not as a
// failure of the server (internal).
func TestAStreamAskedForAsTheServerClosesIsUnavailable(t *testing.T) {
	f := newFixture(t, Options{})
	f.srv.streams.shut() // NB: what Close does while the request is on its way from the door to its place
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/stream", nil)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+adminToken)
	f.srv.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "%s", rec.Body)
	require.Equal(t, codeUnavailable, jsonBody(t, rec)["error"].(map[string]any)["code"])
}

// stalledWriter is a client that reads nothing until released: every write waits for the gate.
type stalledWriter struct {
	h      http.Header
	gate   chan struct{}
	opened sync.Once
	mu     sync.Mutex
	out    bytes.Buffer
	// wrote is signalled after each write, so a test waits for the next one rather than polling out.
	wrote chan struct{}
}

func (w *stalledWriter) Header() http.Header { return w.h }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Flush()              {}
func (w *stalledWriter) Write(b []byte) (int, error) {
	<-w.gate
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.out.Write(b)
	select {
	case w.wrote <- struct{}{}:
	default: // a signal is pending already: the waiter reads out after it, this write included
	}
	return n, err
}

// framesWritten waits until the stream has written at least n frames (comments aside) and returns all it wrote:
// read on the server's side as the stream writes them, not as and when a client's socket delivers them.
func (w *stalledWriter) framesWritten(t *testing.T, n int) []sseFrame {
	t.Helper()
	for {
		w.mu.Lock()
		out := bytes.Clone(w.out.Bytes())
		w.mu.Unlock()
		frames := make(chan sseFrame, bytes.Count(out, []byte("\n\n")))
		readFrames(bytes.NewReader(out), frames)
		var got []sseFrame
		for fr := range frames {
			got = append(got, fr)
		}
		if len(got) >= n {
			return got
		}
		select {
		case <-w.wrote:
		case <-time.After(time.Minute): // a guard against a hang, not a timing
			t.Fatalf("%d of %d frames written within a minute", len(got), n)
		}
	}
}

// open lets the stream's writes through; a second call does nothing.
func (w *stalledWriter) open() { w.opened.Do(func() { close(w.gate) }) }

// openStalled opens an admin's stream whose client reads nothing until w is opened (at the latest as the test ends,
// so that a test that fails first leaves no handler blocked for ever): the stream joins the hub, then blocks in its
// first write. done is closed once its handler has returned.
func openStalled(f *fixture) (w *stalledWriter, done <-chan struct{}) {
	w = &stalledWriter{h: http.Header{}, gate: make(chan struct{}), wrote: make(chan struct{}, 1)}
	f.t.Cleanup(w.open)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/stream", nil)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+adminToken)
	served := make(chan struct{})
	go func() {
		defer close(served)
		f.srv.Handler().ServeHTTP(w, req)
	}()
	return w, served
}

// TestStreamResyncWhenBehindItsBudget: a client that reads nothing while more than its byte budget of events is
// published gets ONE resync naming the first position it was not sent, and the stream ends; the engine never
// waited for it (every command below was answered while the client was stalled). Both ways of falling behind are
// covered: unsent bytes over the budget while the server still holds them, and events dropped from its buffer.
func TestStreamResyncWhenBehindItsBudget(t *testing.T) {
	const budget = 2048
	for _, tc := range []struct {
		name   string
		behind func(h *hub, start uint64) bool // under h.mu
		reason string
	}{
		{"over budget", func(h *hub, start uint64) bool { return unsent(h, start) > budget }, "byte budget"},
		{"out of the buffer", func(h *hub, start uint64) bool { return h.first > start+1 }, "buffer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{StreamBytes: budget})
			start := head(f)
			w, done := openStalled(f)
			publishUntil(t, f, func(h *hub) bool { return tc.behind(h, start) })
			w.open()
			recv(t, done, "end of the stalled stream's handler")
			frames := make(chan sseFrame, 16)
			readFrames(bytes.NewReader(w.out.Bytes()), frames)
			var got []sseFrame
			for fr := range frames {
				got = append(got, fr)
			}
			require.Len(t, got, 2, "hello, then the resync: nothing was sent while the client stalled")
			require.Equal(t, "hello", got[0].event)
			require.Equal(t, "resync", got[1].event)
			var rs struct {
				FromPosition uint64 `json:"fromPosition"`
				Reason       string `json:"reason"`
			}
			require.NoError(t, json.Unmarshal([]byte(got[1].data), &rs))
			require.Equal(t, start+1, rs.FromPosition)
			require.Contains(t, rs.Reason, tc.reason)
			require.Equal(t, uint64(1), f.srv.streams.resyncs.Load())
		})
	}
}

// publishUntil waits until a stalled stream has joined the hub (it then blocks writing its first line), then
// publishes events until done (under the hub's lock) holds, waiting on the hub's own signal for each event to be
// rendered.
func publishUntil(t *testing.T, f *fixture, done func(h *hub) bool) {
	t.Helper()
	h := &f.srv.streams.hub
	awaitHub(t, h, func() bool { return done(h) }, func(i int) {
		h.mu.Lock()
		joined := h.streams > 0
		h.mu.Unlock()
		if joined {
			usage(f, int64(i))
		}
	})
}

// TestARunsStreamCatchingUpSkipsNoEventTheHubDropped: a run's stream older than the hub's ring replays the run's
// events from the log. When the log holds none of the run's after the cursor up to the head it read, the stream
// moves to that head; if, meanwhile, the run's next events were published and the hub dropped them from its ring
// (more than the ring's bytes published in between), they are in the log only, and the stream must still read them
// there: moving past them, to where the ring now starts, would skip them without a resync.
func TestARunsStreamCatchingUpSkipsNoEventTheHubDropped(t *testing.T) {
	f := newFixture(t, Options{StreamBytes: 2048})
	hub := &f.srv.streams.hub
	// Another client's stream, stalled in its first write, keeps the hub following (and dropping) while the run's
	// stream opens.
	stalled, stalledDone := openStalled(f)
	defer func() {
		stalled.open()
		recv(t, stalledDone, "end of the stalled stream's handler")
	}()

	// The run's last event is at the head; other runs' events then push the ring past it.
	last := head(f)
	awaitHub(t, hub, func() bool { return hub.streams > 0 && hub.first > last+1 }, func(i int) {
		f.do(audittest.Admin, &commands.RunCreate{RunID: fmt.Sprintf("other_%d", i), Team: "other", Goal: "g", Cwd: "/o"})
	})

	// The run's stream opens after its last event: older than the ring, so it catches up from the log. Its first
	// read of the log finds nothing of the run up to the head it read; while it reads, the run's next events are
	// published and dropped from the ring.
	reached, resume := make(chan struct{}), make(chan struct{})
	var once, resumed sync.Once
	f.srv.catchingUp = func(string) { once.Do(func() { close(reached); <-resume }) }
	resumeCatchUp := func() { resumed.Do(func() { close(resume) }) }
	t.Cleanup(resumeCatchUp) // before the fixture's, which closes the server: on a failure too
	frames := f.openStream(fmt.Sprintf("/api/v1/stream?run=%s&after=%d", liveRun, last), nil)
	require.Equal(t, "hello", next(t, frames).event)
	recv(t, reached, "catch-up of the stream")
	var first uint64
	awaitHub(t, hub, func() bool { return first != 0 && hub.first > first }, func(i int) {
		usage(f, int64(i))
		if first == 0 {
			first = head(f)
		}
	})
	resumeCatchUp()

	fr := next(t, frames)
	require.Equal(t, strconv.FormatUint(first, 10), fr.id, "the run's next event, not skipped: %+v", fr)
}

// awaitHub waits on the hub's own signal until cond, called under the hub's lock, holds, publishing with publish
// before each wait (nil: the hub has what it needs, and only its following is waited for).
func awaitHub(t *testing.T, hub *hub, cond func() bool, publish func(i int)) {
	t.Helper()
	for i := 0; ; i++ {
		require.Less(t, i, 1000)
		hub.mu.Lock()
		ok, ch := cond(), hub.notify
		hub.mu.Unlock()
		if ok {
			return
		}
		if publish != nil {
			publish(i)
		}
		recv(t, ch, "signal of the hub")
	}
}

// unsent is the frame bytes the hub holds after position start.
func unsent(h *hub, start uint64) int {
	n := 0
	for _, e := range h.entries {
		if e.pos > start {
			n += len(e.frame)
		}
	}
	return n
}

// TestHeadOfTheStreamOpensNoStream: a HEAD request's answer ends with its header, and net/http drops whatever its
// handler writes, so a stream opened for one would go on for nobody: its place held, its log replayed and every
// write "taken" at once, neither its write deadline nor its byte budget ever ending it. HEAD of the stream is
// refused 405, and opens nothing.
func TestHeadOfTheStreamOpensNoStream(t *testing.T) {
	f := newFixture(t, Options{MaxStreamsPerPrincipal: 1})
	req, err := http.NewRequest(http.MethodHead, f.web.URL+"/api/v1/stream?after=0", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	// NB: a connection of its own, kept open: were a stream going on for the HEAD, the client would hold its
	// connection as idle and send the next request on it, which would wait for that stream to end.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	frames := f.openStream("/api/v1/stream", nil)
	require.Equal(t, "hello", next(t, frames).event, "the credential's one stream place is free")
}

// TestAStreamExactlyAtItsByteBudgetGoesOn: the byte budget is the most a stream may have unsent: a client that
// stalled while exactly StreamBytes of frames were published is sent them all when it reads again, and one a byte
// further behind is resynced.
func TestAStreamExactlyAtItsByteBudgetGoesOn(t *testing.T) {
	const published = 3
	for _, tc := range []struct {
		name   string
		behind int // bytes unsent past the budget
		resync bool
	}{
		{"at the budget", 0, false},
		{"a byte over", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{StreamBytes: 1 << 20})
			start := head(f)
			w, done := openStalled(f)
			publishUntil(t, f, func(h *hub) bool {
				return len(h.entries) > 0 && h.entries[len(h.entries)-1].pos == start+published
			})
			hub := &f.srv.streams.hub
			hub.mu.Lock()
			budget := unsent(hub, start) - tc.behind
			hub.mu.Unlock()
			f.srv.opts.StreamBytes = budget // NB: before the gate opens, the stream's next read of it
			w.open()
			sent := func() string {
				w.mu.Lock()
				defer w.mu.Unlock()
				return w.out.String()
			}
			// NB: at the budget the stream goes on after its last event; over it, the resync ends it.
		sending:
			for !strings.Contains(sent(), fmt.Sprintf("id: %d\n", start+published)) {
				select {
				case <-done:
					break sending
				case <-w.wrote:
				case <-time.After(time.Minute): // a guard against a hang, not a timing
					t.Fatalf("neither the last event nor the stream's end within a minute: %s", sent())
				}
			}
			require.Equal(t, tc.resync, strings.Contains(sent(), "event: resync"), "%s", sent())
			if !tc.resync {
				for pos := start + 1; pos <= start+published; pos++ {
					require.Contains(t, sent(), fmt.Sprintf("id: %d\n", pos))
				}
			}
		})
	}
}
