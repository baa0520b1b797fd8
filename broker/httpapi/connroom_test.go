package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
)

// roomBound bounds a legitimate request while a hostile client holds every place. It is a guard, not a
// measure: without making room, a place frees only at ReadHeaderTimeout (10 s) or IdleTimeout (2 min); with it,
// at once (an idle victim) or after ConnGrace (a new one, a few ms in these tests).
const roomBound = 5 * time.Second

// roomOptions: streams may hold 4 places, and there is one more than a credential can hold (its 4 streams and
// its reads in progress or waiting): the fewest validate accepts.
var roomOptions = Options{MaxConns: maxReadsPerCredential + maxWaitingReadsPerCredential + 4 + 1, MaxStreams: 4,
	MaxStreamsPerPrincipal: 4, ConnGrace: 20 * time.Millisecond}

// listening serves f's server through Listen's own listener (the fixture's httptest server does not use it) on
// a loopback port, and returns the listener and its base URL.
func listening(t *testing.T, f *fixture) (*limitListener, string) {
	t.Helper()
	return listeningVia(t, f, nil)
}

// listeningVia is listening with the listener's connections accepted through wrap (nil: as they are).
func listeningVia(t *testing.T, f *fixture, wrap func(net.Listener) net.Listener) (*limitListener, string) {
	t.Helper()
	require.NoError(t, f.srv.Listen("127.0.0.1:0"))
	if wrap != nil {
		f.srv.ln.Listener = wrap(f.srv.ln.Listener)
	}
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(context.Background()) }()
	t.Cleanup(func() {
		require.NoError(t, closeWithin(t, f.srv))
		require.NoError(t, recv(t, served, "return from Serve once the server closed"))
	})
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	return f.srv.ln, f.srv.baseURL
}

// awaitListener waits until cond, read under the listener's lock, holds; a connection's release and its
// entering the idle or new list wake it.
func awaitListener(t *testing.T, l *limitListener, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang, not a timing
	defer cancel()
	l.mu.Lock()
	for !cond() {
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the listener never reached the state awaited")
		}
		l.mu.Lock()
	}
	l.mu.Unlock()
}

// requireNoPlaceHeld waits, once every client closed, for the listener to hold no place and list no connection.
func requireNoPlaceHeld(t *testing.T, l *limitListener) {
	t.Helper()
	awaitListener(t, l, func() bool { return l.held == 0 })
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Zero(t, l.idle.n)
	require.Zero(t, l.fresh.n)
	require.Nil(t, l.idle.head)
	require.Nil(t, l.fresh.head)
}

func dial(t *testing.T, base string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// idler is a hostile client's connection: one unauthenticated request, its 401 read, then left idle.
func idler(t *testing.T, base string) net.Conn {
	t.Helper()
	c := dial(t, base)
	_, err := io.WriteString(c, "GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(guard)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "the unauthenticated request's answer")
	require.NoError(t, c.SetReadDeadline(time.Time{})) // left idle: the test decides when it reads again
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	return c
}

// closedByServer requires the server to close c: a read ends with EOF.
func closedByServer(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // a guard against a hang
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
}

// legit is an authenticated request on a connection of its own, which stays open idle after it; it must be
// answered within roomBound.
func legit(t *testing.T, base string) *http.Transport {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(t.Context(), roomBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/runs", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err, "every place is held by the hostile client")
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return tr
}

func (l *limitListener) evicted() (idle, fresh uint64) {
	return l.evictedIdle.Load(), l.evictedNew.Load()
}

// TestHostileConnectionsMakeRoom: a hostile client holds every place, with idle keep-alive connections (one
// unauthenticated request each) or with connections that never send a byte; an authenticated request still gets
// in, in the place of the connection idle the longest, or of the oldest silent one once past ConnGrace.
func TestHostileConnectionsMakeRoom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hostile func(t *testing.T, base string) net.Conn
		listed  func(l *limitListener) int
		evicted string // the state of the one closed to make room
	}{
		{"idle", idler, func(l *limitListener) int { return l.idle.n }, "idle"},
		{"silent", dial, func(l *limitListener) int { return l.fresh.n }, "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := roomOptions
			opts.Metrics = NewMetrics()
			f := newFixture(t, opts)
			l, base := listening(t, f)
			var hostile []net.Conn
			for i := range roomOptions.MaxConns {
				hostile = append(hostile, tc.hostile(t, base))
				// One at a time, so the order they are listed in is theirs.
				awaitListener(t, l, func() bool { return tc.listed(l) == i+1 })
			}
			tr := legit(t, base)
			closedByServer(t, hostile[0])
			text := metricsText(t, f)
			for _, state := range []string{"idle", "new"} {
				n := 0
				if state == tc.evicted {
					n = 1
				}
				require.Contains(t, text, fmt.Sprintf(`crewlog_http_connections_evicted_total{state=%q} %d`, state, n))
			}

			for _, c := range hostile {
				c.Close()
			}
			tr.CloseIdleConnections()
			requireNoPlaceHeld(t, l)
		})
	}
}

// TestStreamsAreNeverClosedToMakeRoom: streams fill what the stream limits allow, idle connections the rest;
// requests beyond close idle connections (the hostile ones first, then the legitimate ones gone idle), never a
// stream: each still delivers the next event.
func TestStreamsAreNeverClosedToMakeRoom(t *testing.T) {
	f := newFixture(t, roomOptions)
	l, base := listening(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	streamsTr := &http.Transport{}
	defer streamsTr.CloseIdleConnections()
	var streams []<-chan sseFrame
	for range roomOptions.MaxStreams {
		frames := f.openStreamVia(ctx, &http.Client{Transport: streamsTr}, base, "/api/v1/stream", nil)
		require.Equal(t, "hello", next(t, frames).event)
		streams = append(streams, frames)
	}
	var idlers []net.Conn
	for range roomOptions.MaxConns - roomOptions.MaxStreams {
		idlers = append(idlers, idler(t, base))
	}
	awaitListener(t, l, func() bool { return l.idle.n == len(idlers) })

	var legits []*http.Transport
	for range 2 * roomOptions.MaxConns {
		legits = append(legits, legit(t, base))
	}
	for _, c := range idlers {
		closedByServer(t, c)
	}
	idle, fresh := l.evicted()
	require.Equal(t, [2]uint64{2 * uint64(roomOptions.MaxConns), 0}, [2]uint64{idle, fresh},
		"each request beyond the places closed one idle connection")
	usage(f, 7)
	for _, frames := range streams {
		require.Equal(t, "task.usage", next(t, frames).event, "the stream is still open")
	}

	cancel()
	for _, frames := range streams {
		for range frames {
		}
	}
	streamsTr.CloseIdleConnections()
	for _, tr := range legits {
		tr.CloseIdleConnections()
	}
	requireNoPlaceHeld(t, l)
}

// TestTricklingBodyHoldsNoPlace: no route reads a body, so a request that sends one slowly, never ending it, is
// answered and its connection closed; it does not stay active, holding its place.
func TestTricklingBodyHoldsNoPlace(t *testing.T) {
	f := newFixture(t, roomOptions)
	l, base := listening(t, f)
	for _, head := range []string{
		"POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n",
		"GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nxx",
		"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nxx",
	} {
		for range roomOptions.MaxConns {
			c := dial(t, base)
			require.NoError(t, c.SetReadDeadline(time.Now().Add(roomBound))) // a guard, as roomBound says
			_, err := io.WriteString(c, head)
			require.NoError(t, err)
			r := bufio.NewReader(c)
			resp, err := http.ReadResponse(r, nil)
			require.NoError(t, err, "answered before the body ends")
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			_, err = r.ReadByte()
			require.ErrorIs(t, err, io.EOF, "the server closes the connection")
		}
	}
	legit(t, base).CloseIdleConnections()
	idle, fresh := l.evicted()
	require.Equal(t, [2]uint64{0, 0}, [2]uint64{idle, fresh}, "the places came back, none was taken")
	requireNoPlaceHeld(t, l)
}

// TestChurnLeaksNoPlace: hostile idle and silent connections and legitimate requests, all at once and over and
// over; once every client closed, no place is held.
func TestChurnLeaksNoPlace(t *testing.T) {
	f := newFixture(t, roomOptions)
	l, base := listening(t, f)
	addr := strings.TrimPrefix(base, "http://")
	const clients, rounds = 6, 20
	errs := make(chan error, clients)
	for i := range clients {
		go func() {
			errs <- churn(addr, base, i, rounds)
		}()
	}
	for range clients {
		require.NoError(t, recv(t, errs, "end of a churning client"))
	}
	requireNoPlaceHeld(t, l)
	l.mu.Lock()
	defer l.mu.Unlock()
	require.LessOrEqual(t, l.held, l.max)
}

// churn is one client of TestChurnLeaksNoPlace; it returns only errors that are not the server closing its
// connections to make room.
func churn(addr, base string, kind, rounds int) error {
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	for range rounds {
		switch kind % 3 {
		case 0: // silent
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return err
			}
			open = append(open, c)
		case 1: // idle after one unauthenticated request; it may be closed to make room before or after
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return err
			}
			open = append(open, c)
			_ = c.SetReadDeadline(time.Now().Add(guard)) // an answer never sent ends the read, as a close does
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err == nil {
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					io.Copy(io.Discard, resp.Body)
				}
			}
		case 2: // legitimate, on fresh connections; one closed to make room fails, and that is all
			req, err := http.NewRequest(http.MethodGet, base+"/api/v1/slots", nil)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+adminToken)
			if resp, err := client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			tr.CloseIdleConnections()
		}
	}
	return nil
}

// readConn is a connection that sent one read of a credential and has not read its answer yet.
type readConn struct {
	c net.Conn
	r *bufio.Reader
}

// sendRead opens a connection and sends one read with token on it.
func sendRead(t *testing.T, base, token string) readConn {
	t.Helper()
	c := dial(t, base)
	_, err := io.WriteString(c, "GET /api/v1/slots HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+token+"\r\n\r\n")
	require.NoError(t, err)
	return readConn{c, bufio.NewReader(c)}
}

// answer reads rc's answer: its status and error code ("" for none). The deadline is roomBound's guard.
func (rc readConn) answer(t *testing.T) (int, string) {
	t.Helper()
	require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(roomBound)))
	resp, err := http.ReadResponse(rc.r, nil)
	require.NoError(t, err, "the read is not answered")
	defer resp.Body.Close()
	var body errorBody
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		require.NoError(t, json.Unmarshal(b, &body), "body %s", b)
	}
	return resp.StatusCode, body.Error.Code
}

// TestOneCredentialCannotHoldEveryPlace: a read in progress or waiting for its turn is never closed to make room,
// so one credential's reads hold their places. It sends a read on every place, and more: its reads in progress
// (held there by the test) and those waiting hold maxReadsPerCredential + maxWaitingReadsPerCredential places,
// the rest are answered 429 at once and go idle, and another credential's request still gets in.
func TestOneCredentialCannotHoldEveryPlace(t *testing.T) {
	f := newFixture(t, roomOptions)
	ro := keyReadOnlyPrefix + digestOf(roToken)
	release := make(chan struct{})
	f.srv.reading = func(p principal) {
		if p.key == ro {
			<-release
		}
	}
	l, base := listening(t, f)
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseAll) // before the server closes, on a failure too

	var holding []readConn
	for range maxReadsPerCredential + maxWaitingReadsPerCredential {
		holding = append(holding, sendRead(t, base, roToken))
	}
	awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, maxWaitingReadsPerCredential)
	var refused []net.Conn
	for i := range 2 * roomOptions.MaxConns {
		rc := sendRead(t, base, roToken)
		refused = append(refused, rc.c)
		status, code := rc.answer(t)
		require.Equal(t, [2]any{http.StatusTooManyRequests, codeTooManyReads}, [2]any{status, code}, "read %d", i)
	}
	awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, maxWaitingReadsPerCredential)
	tr := legit(t, base)
	idle, fresh := l.evicted()
	free := roomOptions.MaxConns - len(holding)
	require.Equal(t, [2]uint64{uint64(2*roomOptions.MaxConns - free + 1), 0}, [2]uint64{idle, fresh},
		"each connection beyond the places, the credential's refused reads' and the other's, closed a refused one")

	releaseAll()
	for _, rc := range holding {
		status, _ := rc.answer(t)
		require.Equal(t, http.StatusOK, status)
		rc.c.Close()
	}
	awaitTurns(t, f.srv.reads, ro, 0, 0)
	for _, c := range refused {
		c.Close()
	}
	tr.CloseIdleConnections()
	requireNoPlaceHeld(t, l)
}

// TestAnAnswerNobodyReadsHoldsNoTurnNorPlace: a client that asks for pages of 4 MiB and reads nothing of them held
// its read turn and its connection's place for ever (the server has no WriteTimeout, for the streams' sake), past
// the revocation of its token too. Now an answer's write fails within the write deadline: the turn goes back, the
// server closes the connection and frees its place, and the client is left without some of its answers.
func TestAnAnswerNobodyReadsHoldsNoTurnNorPlace(t *testing.T) {
	f := newFixture(t, roomOptions)
	body := strings.Repeat("x", 200<<10)
	for range 24 { // 4.8 MiB: a full page
		r := f.do(audittest.Worker("02_help"), &commands.MessageSend{RunID: liveRun, FromTask: "02_help",
			To: []string{"parent"}, Body: body})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
	}
	ro := keyReadOnlyPrefix + digestOf(roToken)
	reading := make(chan struct{}, 1)
	f.srv.reading = func(p principal) {
		if p.key == ro {
			select {
			case reading <- struct{}{}:
			default:
			}
		}
	}
	f.srv.writeTimeout = 50 * time.Millisecond // NB: before it serves; a stalled client is gone after it
	l, base := listening(t, f)

	// A client with a tiny receive buffer that sends its requests at once (8 pages: more than the sockets'
	// buffers hold, however large the kernel lets them grow) and never reads the answers.
	c := dialTinyReceiver(t, base)
	const pages = 8
	_, err := io.WriteString(c, strings.Repeat(fmt.Sprintf("GET /api/v1/runs/%s/events?limit=1000 HTTP/1.1\r\n"+
		"Host: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", liveRun, roToken), pages))
	require.NoError(t, err)
	recv(t, reading, "read of a page for the client that reads none")
	f.tokens.set(roToken, false) // revoked: it changes nothing here

	awaitListener(t, l, func() bool { return l.held == 0 })
	awaitTurns(t, f.srv.reads, ro, 0, 0)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // a guard against a hang
	r, complete := bufio.NewReader(c), 0
	for ; complete < pages; complete++ {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			break
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			break
		}
	}
	require.Less(t, complete, pages, "the connection was closed before every answer was written")
}

// TestAKeepAliveConnectionIsAnsweredAfterItsDeadline: an answer's write deadline does not outlive it: a keep-alive
// connection idle for longer than the write deadline gets its next answer, a header alone (HEAD) or a body.
func TestAKeepAliveConnectionIsAnsweredAfterItsDeadline(t *testing.T) {
	f := newFixture(t, roomOptions)
	// NB: before it serves. An answer's bytes reach the socket when its handler returns (net/http buffers them), so
	// the deadline its first byte sets covers the rest of the handler, which a paused or loaded machine may make
	// last longer than a few ms.
	f.srv.writeTimeout = 250 * time.Millisecond
	_, base := listening(t, f)
	c := dial(t, base)
	r := bufio.NewReader(c)
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodGet, http.MethodHead} {
		_, err := fmt.Fprintf(c, "%s /api/v1/slots HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n",
			method, adminToken)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // a guard against a hang
		resp, err := http.ReadResponse(r, &http.Request{Method: method})
		require.NoError(t, err, method)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err, method)
		require.Equal(t, http.StatusOK, resp.StatusCode, method)
		time.Sleep(2 * f.srv.writeTimeout) // NB: not a timed assertion: idle past the last answer's deadline
	}
}

// TestCloseWaitsForTheRequestsInProgress: a request still in its handler when Close's grace ended had its connection
// closed, but Close returned without waiting for the handler, and crewd then closed the log under the handler's read
// (Pebble's "leaked iterators" at best, a read of freed memory at worst). Close now returns only once every handler
// has, and a request that arrives once Close has begun is answered 503 unavailable without reading anything.
func TestCloseWaitsForTheRequestsInProgress(t *testing.T) {
	f := newFixture(t, roomOptions)
	entered, release, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
	closed := make(chan struct{}) // Close returned
	var once sync.Once
	var leftFirst atomic.Bool // the handler left while Close had not yet returned
	var released sync.Once
	releaseRequest := func() { released.Do(func() { close(release) }) }
	f.srv.reading = func(principal) {
		once.Do(func() { close(entered) })
		<-release
		select {
		case <-closed:
		default:
			leftFirst.Store(true)
		}
	}
	f.srv.closing = func() { close(waiting) }
	f.srv.closeGrace = 10 * time.Millisecond
	_, base := listening(t, f)
	t.Cleanup(releaseRequest) // before the listener's, which closes the server: on a failure too
	rc := sendRead(t, base, roToken)
	defer rc.c.Close()
	recv(t, entered, "request in its handler")

	go func() {
		_ = f.srv.Close()
		close(closed)
	}()
	// Close's grace has ended and the request's connection is closed: all Close has left is the wait
	recv(t, waiting, "end of Close's grace")
	select {
	case <-closed: // the handler, released only now, sees that Close returned before it left
	case <-time.After(100 * time.Millisecond): // NB: not a timed assertion: Close had nothing else left to do
	}
	releaseRequest()
	recv(t, closed, "return from Close once the request left its handler")
	require.True(t, leftFirst.Load(), "Close returned while a request was still in its handler")

	w := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/v1/slots", nil)
	req.Header.Set("Authorization", "Bearer "+roToken)
	f.srv.Handler().ServeHTTP(w, req)
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Contains(t, w.Body.String(), `"code":"unavailable"`)
}

// TestASecondCloseWaitsForTheFirst: a Close called while another is in progress returns only once that one has
// finished, as the first does: crewd closes the server from the context's end (Serve) and again as it returns, then
// closes the log, which no request may still be reading. The second Close returned at once, while the first still
// waited for a request in its handler. The request is held in its handler (reading) while both Closes run.
func TestASecondCloseWaitsForTheFirst(t *testing.T) {
	f := newFixture(t, roomOptions)
	entered, release, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	var left atomic.Bool // the held request has left its handler
	var released sync.Once
	releaseRequest := func() { released.Do(func() { close(release) }) }
	f.srv.reading = func(principal) {
		once.Do(func() { close(entered) })
		<-release
		left.Store(true)
	}
	f.srv.closing = func() { close(waiting) }
	secondWaits := make(chan struct{})
	var waitsOnce sync.Once // NB: the cleanups close the server again
	f.srv.closeWaits = func() { waitsOnce.Do(func() { close(secondWaits) }) }
	f.srv.closeGrace = 10 * time.Millisecond
	_, base := listening(t, f)
	t.Cleanup(releaseRequest) // before the listener's, which closes the server: on a failure too
	rc := sendRead(t, base, roToken)
	defer rc.c.Close()
	recv(t, entered, "request in its handler")

	first := make(chan struct{})
	go func() {
		_ = f.srv.Close()
		close(first)
	}()
	recv(t, waiting, "end of the first Close's grace") // the first Close has only the request in its handler left to wait for
	second := make(chan bool, 1)
	go func() {
		_ = f.srv.Close()
		second <- left.Load()
	}()
	select {
	case afterRequest := <-second:
		releaseRequest()
		require.True(t, afterRequest, "a second Close returned while the first still waited for a request in its handler")
	case <-secondWaits:
		releaseRequest()
		require.True(t, recv(t, second, "return from the second Close"),
			"a second Close returned while the first still waited for a request in its handler")
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		t.Fatal("the second Close neither returned nor waited for the first")
	}
	recv(t, first, "return from the first Close")
}

// dialTinyReceiver dials base with a receive buffer of 4 KiB: a client that reads nothing soon stops the server's
// writes.
func dialTinyReceiver(t *testing.T, base string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// stalledReader is a hostile client's connection that sent request (its line and its headers but the Host) and read
// its answer's header but not the rest: its receive buffer is tiny and the answer larger than the sockets' buffers
// hold, so the server's write of it is held until the write deadline. One large answer stands for the many small ones
// (the page's files, 401s, 405s) a client gets by pipelining its requests and reading none of them, which hold the
// server's write as long.
func stalledReader(t *testing.T, base, request string, status int) net.Conn {
	t.Helper()
	c := dialTinyReceiver(t, base)
	_, err := fmt.Fprintf(c, "%s\r\nHost: 127.0.0.1\r\n\r\n", request)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(roomBound))) // a guard against a hang
	var head []byte
	for !strings.Contains(string(head), "\r\n\r\n") {
		b := make([]byte, 512)
		n, err := c.Read(b)
		require.NoError(t, err, "the answer's header")
		head = append(head, b[:n]...)
	}
	require.True(t, strings.HasPrefix(string(head), fmt.Sprintf("HTTP/1.1 %d ", status)), "%.200q", head)
	return c
}

// TestAnUnauthenticatedAnswerNobodyReadsHoldsNoPlace: a connection with a request in progress was never closed to
// make room, an unauthenticated one's too, and an answer's write is held until its deadline (10 s) when its client
// reads none of it. So a client with no credential at all, asking for the page's files on every place and reading
// nothing, held every place for 10 s at a time, reopened them as they closed, and the operator's page could not
// connect. Now only a request that holds a read's turn, or waits for one, or a stream keeps its connection's place:
// another in progress for longer than ConnGrace is closed to make room, as a silent one is.
func TestAnUnauthenticatedAnswerNobodyReadsHoldsNoPlace(t *testing.T) {
	opts := roomOptions
	opts.Metrics = NewMetrics()
	opts.UI = fstest.MapFS{"index.html": {Data: []byte("<h1>page</h1>")}, "big.js": {Data: make([]byte, 16<<20)}}
	f := newFixture(t, opts)
	f.srv.writeTimeout = time.Minute // NB: before it serves; longer than roomBound, so only making room lets one in
	l, base := listening(t, f)
	var hostile []net.Conn
	for range roomOptions.MaxConns {
		hostile = append(hostile, stalledReader(t, base, "GET /big.js HTTP/1.1", http.StatusOK))
	}
	tr := legit(t, base)
	text := metricsText(t, f)
	require.Contains(t, text, `crewlog_http_connections_evicted_total{state="active"} 1`)
	require.Contains(t, text, `crewlog_http_connections_evicted_total{state="idle"} 0`)
	require.Contains(t, text, `crewlog_http_connections_evicted_total{state="new"} 0`)

	for _, c := range hostile {
		c.Close()
	}
	tr.CloseIdleConnections()
	requireNoPlaceHeld(t, l)
}

// smallSendBuffers accepts connections with a send buffer of 4 KiB, which the kernel does not grow: an answer of
// tens of KiB then stalls on a client that reads none of it.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestATokensQuickAnswersNobodyReadsHoldNoPlace: a connection whose request authenticated was never closed to make
// room, though only a read in progress or waiting for its turn, and a stream, are bounded per credential. So a
// read-only token's client sending, on every place, requests answered at once (405, 429, 404: no turn taken) and
// reading none of the answers held every place until the write deadline, again and again, and another
// credential's request could not connect. Now only a request that holds a read's turn, or waits for one, or a
// stream keeps its connection's place.
func TestATokensQuickAnswersNobodyReadsHoldNoPlace(t *testing.T) {
	opts := roomOptions
	opts.Metrics = NewMetrics()
	f := newFixture(t, opts)
	f.srv.writeTimeout = time.Minute // NB: before it serves; longer than roomBound, so only making room lets one in
	l, base := listeningVia(t, f, func(l net.Listener) net.Listener { return smallSendBuffers{l} })
	// The 405 names the path, and JSON writes each '<' of it in 6 bytes: an answer of about 72 KiB.
	path := "/api/v1/runs/" + strings.Repeat("<", 12<<10)
	var hostile []net.Conn
	for range roomOptions.MaxConns {
		hostile = append(hostile, stalledReader(t, base, "PUT "+path+" HTTP/1.1\r\nAuthorization: Bearer "+roToken,
			http.StatusMethodNotAllowed))
	}
	tr := legit(t, base)
	text := metricsText(t, f)
	require.Contains(t, text, `crewlog_http_connections_evicted_total{state="active"} 1`)

	for _, c := range hostile {
		c.Close()
	}
	tr.CloseIdleConnections()
	requireNoPlaceHeld(t, l)
}
