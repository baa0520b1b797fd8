package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// failHub makes the stream hub's next read of the log panic, publishes an event for it to read, and waits until
// the hub has stopped (a guard of a minute against a hang, not a timing assertion).
func failHub(t testing.TB, f *fixture) {
	t.Helper()
	h := &f.srv.streams.hub
	h.pulling.Store(new(func() { panic("httpapi test: the hub's read of the log fails") }))
	usage(f, 99)
	recv(t, h.stopped, "stop of the hub")
}

// resyncOf decodes a resync frame's data.
func resyncOf(t testing.TB, fr sseFrame) (fromPosition uint64, reason string) {
	t.Helper()
	require.Equal(t, "resync", fr.event, "%+v", fr)
	var rs struct {
		FromPosition uint64 `json:"fromPosition"`
		Reason       string `json:"reason"`
	}
	require.NoError(t, json.Unmarshal([]byte(fr.data), &rs))
	return rs.FromPosition, rs.Reason
}

// TestStreamsAfterTheHubFailed: once the hub that follows the log for every stream has stopped after a failure, a
// stream open then gets a resync that says so and ends, and a new stream, live or resumed, is refused at once with
// 503 unavailable, never opened: a client is not left on a stream that will never carry an event (it once got
// keep-alives forever), nor sent resyncs it would reconnect after in a loop. Other routes still answer.
func TestStreamsAfterTheHubFailed(t *testing.T) {
	f := newFixture(t, Options{})
	open := f.openStream("/api/v1/stream", nil)
	require.Equal(t, "hello", next(t, open).event)
	usage(f, 1)
	delivered := next(t, open)
	require.Equal(t, "task.usage", delivered.event, "the stream is live")

	failHub(t, f)
	from, reason := resyncOf(t, next(t, open))
	pos, err := strconv.ParseUint(delivered.id, 10, 64)
	require.NoError(t, err)
	require.Equal(t, pos+1, from, "the first position not sent")
	require.Contains(t, reason, "stopped following the log")
	ends(t, open)

	for _, path := range []string{"/api/v1/stream", "/api/v1/stream?after=0", "/api/v1/stream?after=" + delivered.id} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard: a stream opened would never end
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.web.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+roToken)
		resp, err := f.web.Client().Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "GET %s: the stream was opened", path)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		require.NoError(t, err)
		var body errorBody
		require.NoError(t, json.Unmarshal(b, &body), "body %s", b)
		require.Equal(t, codeUnavailable, body.Error.Code)
		require.Contains(t, body.Error.Message, "stopped following the log")
	}
	require.Zero(t, f.srv.streams.open(), "no stream holds a place")
	f.ok("/api/v1/runs/" + liveRun + "/credentials")
}

// TestStreamReplayingWhenTheHubFailsEnds: a stream replaying the log from far back (after=0) when the hub fails
// ends with the resync at once, its first position not sent, rather than reaching the head and then waiting
// forever for a hub that will never append again.
func TestStreamReplayingWhenTheHubFailsEnds(t *testing.T) {
	f := newFixture(t, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard: a stream left waiting never ends
	defer cancel()
	w := &gateWriter{ResponseRecorder: httptest.NewRecorder()}
	w.onFirst = func() { failHub(t, f) } // during the hello, before the replay's first read
	req := httptest.NewRequest(http.MethodGet, "/api/v1/stream?after=0", nil).WithContext(ctx)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+adminToken)
	f.srv.Handler().ServeHTTP(w, req)
	require.NoError(t, ctx.Err(), "the stream did not end")

	frames := make(chan sseFrame, 1024)
	readFrames(bytes.NewReader(w.Body.Bytes()), frames)
	var got []sseFrame
	for fr := range frames {
		got = append(got, fr)
	}
	require.Len(t, got, 2, "hello, then the resync: %+v", got)
	require.Equal(t, "hello", got[0].event)
	from, reason := resyncOf(t, got[1])
	require.Equal(t, uint64(1), from)
	require.Contains(t, reason, "stopped following the log")
}
