package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
)

// The stream's numbers that docs/dashboard-api.md gives a client: each test below fails if the code's changes.

// TestAStreamOpensWithARetryOf2s: a stream's first line sets EventSource's reconnection time to 2 s, as the
// documented stream shows, before its hello.
func TestAStreamOpensWithARetryOf2s(t *testing.T) {
	doc, err := os.ReadFile("../../docs/dashboard-api.md")
	require.NoError(t, err)
	m := regexp.MustCompile("```\n(retry: \\d+)\n\nevent: hello\n").FindSubmatch(doc)
	require.NotNil(t, m, "the documented stream starts with its retry, then the hello")
	require.Equal(t, "retry: 2000", string(m[1]), "the documented retry")

	f := newFixture(t, Options{})
	lines := openStreamLines(t, f, "/api/v1/stream")
	require.Equal(t, "retry: 2000", nextLine(t, lines))
	require.Equal(t, "event: hello", nextLine(t, lines))
}

// TestAStreamSendsItsKeepAliveEveryKeepAlive: a stream asks for its keep-alives every 15 s by default, as the docs
// say, or every Options.KeepAlive, and sends one at each tick while it has nothing else to send.
func TestAStreamSendsItsKeepAliveEveryKeepAlive(t *testing.T) {
	requireDocSays(t, "dashboard-api.md",
		fmt.Sprintf("A comment line `: keep-alive` every %d s", int(DefaultKeepAlive/time.Second)),
		fmt.Sprintf("sends its `: keep-alive` every %d s", int(DefaultKeepAlive/time.Second)))
	for _, tc := range []struct {
		name      string
		keepAlive time.Duration
		want      time.Duration
	}{
		{"default", 0, 15 * time.Second},
		{"set", time.Minute, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{KeepAlive: tc.keepAlive})
			asked, ticks := make(chan time.Duration, 1), make(chan time.Time)
			f.srv.keepAliveTicks = func(every time.Duration) (<-chan time.Time, func()) {
				asked <- every
				return ticks, func() {}
			}
			lines := openStreamLines(t, f, "/api/v1/stream")
			awaitLine(t, lines, "data: ") // the hello's
			select {
			case every := <-asked:
				require.Equal(t, tc.want, every)
			case <-time.After(time.Minute): // a guard against a hang, not a timing
				t.Fatal("the stream asked for no keep-alive ticker")
			}
			select {
			case ticks <- time.Now():
			case <-time.After(time.Minute):
				t.Fatal("the stream did not wait for its keep-alive tick")
			}
			require.Equal(t, keepAliveLine, nextLine(t, lines))
		})
	}
}

// TestAStreamCatchesUpAtMost256EventsAtATime: a stream that starts older than the hub's ring replays the log in
// reads of 256 events, as the docs say, each sent in one write (small events: the batch's bytes do not bound it
// first).
func TestAStreamCatchesUpAtMost256EventsAtATime(t *testing.T) {
	const perRead = 256
	requireDocSays(t, "dashboard-api.md", fmt.Sprintf("one reads at most %d events at a time", catchUpEvents))
	f := newFixture(t, Options{StreamBytes: 2048, KeepAlive: time.Hour})
	reqs := make([]commands.Request, 3*perRead)
	for i := range reqs {
		reqs[i] = commands.Request{Actor: audittest.Orchestrator, Command: &commands.TaskUsage{RunID: liveRun,
			TaskID: "01_lead", Input: int64(i + 1), Output: 1}}
	}
	f.admitAll(reqs)
	last := head(f)
	// The hub follows while a stream is open: once it has read up to the head, its ring of 4 KiB holds only the
	// newest events, and a stream that starts at 0 reads at least its first two batches from the log.
	hub := &f.srv.streams.hub
	hub.join()
	var first uint64
	awaitHub(t, hub, func() bool {
		first = hub.first
		return hub.next == last+1
	}, nil)
	require.Greater(t, first, uint64(2*perRead+1), "the ring holds the newest events only")
	hub.leave()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &flushMeter{h: http.Header{}, last: strconv.FormatUint(last, 10), cancel: cancel}
	req := httptest.NewRequest(http.MethodGet, "/api/v1/stream?after=0", nil).WithContext(ctx)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+adminToken)
	f.srv.Handler().ServeHTTP(w, req)

	out := w.out.Bytes()
	var events []int // the event frames of each write
	for _, n := range w.flushes {
		events = append(events, bytes.Count(out[:n], []byte("\nevent: ")))
		out = out[n:]
	}
	require.GreaterOrEqual(t, len(events), 3, "%v", events)
	require.Equal(t, []int{1, perRead, perRead}, events[:3], "the hello, then the log's first two reads")
}

// TestTheHubsRingHoldsTwiceTheStreamBudget: the ring every live stream reads from keeps the newest frames that fit
// in 2 × StreamBytes (4 MiB by default), as the docs say: it dropped the frame before its first only because that
// one did not fit.
func TestTheHubsRingHoldsTwiceTheStreamBudget(t *testing.T) {
	requireDocSays(t, "dashboard-api.md", fmt.Sprintf("(`StreamBytes`, %d MiB, as one socket connection's). One "+
		"reader renders every published event once into a ring of the newest frames (2 × the budget)",
		DefaultStreamBytes>>20))
	for _, tc := range []struct {
		name        string
		streamBytes int // Options.StreamBytes
		budget      int
		publish     func(f *fixture, i int)
	}{
		{"set", 2048, 2048, func(f *fixture, i int) { usage(f, int64(i+1)) }},
		{"default", 0, 4 << 20, func(f *fixture, i int) {
			r := f.do(audittest.Worker("02_help"), &commands.MessageSend{RunID: liveRun, FromTask: "02_help",
				To: []string{"parent"}, Body: strings.Repeat(strconv.Itoa(i%10), 200<<10)})
			require.Nil(t, r.Rejected, "%v", r.Rejected)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{StreamBytes: tc.streamBytes})
			hub := &f.srv.streams.hub
			hub.join() // NB: the hub keeps frames only while a stream is open
			defer hub.leave()
			hub.mu.Lock()
			joinedAt := hub.first
			hub.mu.Unlock()
			// NB: the engine never takes the hub's lock, so cond may read its head under that lock.
			awaitHub(t, hub, func() bool { return hub.first > joinedAt && hub.next == head(f)+1 }, func(i int) {
				tc.publish(f, i)
			})
			hub.mu.Lock()
			first, held := hub.first, hub.bytes
			hub.mu.Unlock()
			it := f.log.Read(first - 1)
			require.True(t, it.Next())
			droppedFrame, err := eventFrame(it.Event())
			require.NoError(t, err)
			require.NoError(t, it.Close())
			require.LessOrEqual(t, held, 2*tc.budget, "the ring holds at most twice the budget")
			require.Greater(t, held+len(droppedFrame), 2*tc.budget, "the frame it dropped did not fit")
		})
	}
}

// TestAStreamWritesAtMostEvery100ms: events that arrive within 100 ms of a stream's last write wait for the rest of
// those 100 ms, as the docs say, and go out once they have passed; the first event after a quiet spell goes at once.
func TestAStreamWritesAtMostEvery100ms(t *testing.T) {
	requireDocSays(t, "dashboard-api.md",
		fmt.Sprintf("Events reach a stream in batches at most every %d ms", streamCoalesce/time.Millisecond))
	f := newFixture(t, Options{})
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	waits := make(chan time.Duration, 16)
	gate := make(chan struct{})
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	t.Cleanup(open) // before the fixture's: a stream held at the gate would hold the server's Close
	f.srv.coalesceClock = &coalesceClock{
		now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		// A wait passes once the test opens the gate, and moves the clock by its length, as a timer would.
		after: func(wait time.Duration) <-chan time.Time {
			waits <- wait
			<-gate
			mu.Lock()
			defer mu.Unlock()
			now = now.Add(wait)
			passed := make(chan time.Time, 1)
			passed <- now
			return passed
		},
	}
	h := head(f)
	// NB: a writer that never stalls (its gate open), read as the stream writes: while the stream waits, what it
	// wrote before is all there, with no client's socket in between.
	w, _ := openStalled(f)
	w.open()
	require.Equal(t, "hello", w.framesWritten(t, 1)[0].event)
	usage(f, 1)
	require.Equal(t, strconv.FormatUint(h+1, 10), w.framesWritten(t, 2)[1].id, "the first event goes at once")
	require.Empty(t, waits, "the first event waited")

	// The clock has not moved since that write: the next events wait the whole 100 ms.
	usage(f, 2)
	select {
	case wait := <-waits:
		require.Equal(t, streamCoalesce, wait)
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		t.Fatal("the stream wrote its second event without waiting")
	}
	usage(f, 3)
	// The stream is held in its wait (the clock's after) until the gate opens.
	require.Len(t, w.framesWritten(t, 2), 2, "a frame written while the stream waits")
	open()
	written := w.framesWritten(t, 4)
	for i, want := range []uint64{h + 2, h + 3} {
		require.Equal(t, strconv.FormatUint(want, 10), written[2+i].id)
	}
}

// TestAStreamCatchingUpSendsAnEventLargerThanItsBatch: a catch-up read stops before an event that would take its
// batch past streamBatchBytes, and the next read starts with it: an event larger than a whole batch (a goal of
// commands.MaxBodyChars) is sent alone, never skipped with those after it.
func TestAStreamCatchingUpSendsAnEventLargerThanItsBatch(t *testing.T) {
	f := newFixture(t, Options{StreamBytes: 2048}) // a ring of 4 KiB: the stream reads the wide event from the log
	before := head(f)
	f.do(audittest.Admin, &commands.RunCreate{RunID: "wide", Team: "wide",
		Goal: strings.Repeat("g", commands.MaxBodyChars), Cwd: "/w"})
	for i := range 3 {
		usage(f, int64(i+1))
	}
	last := head(f)
	// The hub follows while a stream is open: once it has read up to the head, its ring holds the newest events
	// only, and a stream that starts before the wide event reads it from the log.
	hub := &f.srv.streams.hub
	hub.join()
	awaitHub(t, hub, func() bool { return hub.next == last+1 && hub.first > before+1 }, nil)
	hub.leave()
	frames := f.openStream(fmt.Sprintf("/api/v1/stream?after=%d", before), nil)
	require.Equal(t, "hello", next(t, frames).event)
	wide := false
	for pos := before + 1; pos <= last; pos++ {
		fr := next(t, frames)
		require.Equal(t, strconv.FormatUint(pos, 10), fr.id, "%s %.200s", fr.event, fr.data)
		wide = wide || len(fr.data) > streamBatchBytes
	}
	require.True(t, wide, "an event larger than a batch was sent")
}
