package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
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

func TestStreamLimits(t *testing.T) {
	f := newFixture(t, Options{MaxStreamsPerPrincipal: 1})
	frames := f.openStream("/api/v1/stream", nil)
	require.Equal(t, "hello", next(t, frames).event)
	f.fails("/api/v1/stream", http.StatusTooManyRequests, codeTooManyStreams)
	code, _ := f.getAs("/api/v1/runs", "Bearer "+roToken)
	require.Equal(t, http.StatusOK, code)
}

// stalledWriter is a client that reads nothing until released: every write waits for the gate.
type stalledWriter struct {
	h    http.Header
	gate chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

func (w *stalledWriter) Header() http.Header { return w.h }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Flush()              {}
func (w *stalledWriter) Write(b []byte) (int, error) {
	<-w.gate
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(b)
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
			w := &stalledWriter{h: http.Header{}, gate: make(chan struct{})}
			req := httptest.NewRequest(http.MethodGet, "/api/v1/stream", nil).WithContext(context.Background())
			req.Host = "127.0.0.1"
			req.Header.Set("Authorization", "Bearer "+adminToken)
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.srv.Handler().ServeHTTP(w, req)
			}()
			// Wait until the stream has joined the hub (it then blocks writing its first line), then publish until
			// it is behind, waiting on the hub's own signal for each event to be rendered.
			hub := &f.srv.streams.hub
			for i := 0; ; i++ {
				require.Less(t, i, 1000)
				hub.mu.Lock()
				joined, behind, ch := hub.streams > 0, tc.behind(hub, start), hub.notify
				hub.mu.Unlock()
				if behind {
					break
				}
				if joined {
					usage(f, int64(i))
				}
				<-ch
			}
			close(w.gate)
			<-done
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
