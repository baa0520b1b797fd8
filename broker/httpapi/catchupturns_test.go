package httpapi

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestACredentialsStreamsCatchUpOneReadAtATime: streams opened far behind the head with a filter that matches
// nothing replay the log writing nothing, so no client's pace slows them; however many of them a token opens, its
// streams read the log one catch-up read at a time between them, the others waiting their turn, while another
// credential's stream catches up meanwhile. A stream whose client goes while it waits frees its place in the line,
// and one whose token was revoked while it waited reads nothing when its turn comes: it ends.
func TestACredentialsStreamsCatchUpOneReadAtATime(t *testing.T) {
	f := newFixture(t, Options{})
	ro := keyReadOnlyPrefix + digestOf(roToken)
	// The token's catch-up reads stop inside their read of the log until gate is closed.
	gate := make(chan struct{})
	var open sync.Once
	openGate := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(openGate) // before the fixture's: Close waits for the streams
	var (
		mu                  sync.Mutex
		inside, peak, reads int           // the token's catch-up reads in the log now, at most at once, in all
		entered             chan struct{} // closed at the token's next read
	)
	entered = make(chan struct{})
	f.srv.catchingUp = func(key string) {
		if key != ro {
			return
		}
		mu.Lock()
		inside, reads = inside+1, reads+1
		peak = max(peak, inside)
		close(entered)
		entered = make(chan struct{})
		mu.Unlock()
		<-gate
		mu.Lock()
		inside--
		mu.Unlock()
	}
	// settled waits until n of the token's streams are reading the log or waiting for their turn to.
	settled := func(n int) {
		t.Helper()
		hang := time.After(guard)
		for {
			turnsChanged := f.srv.catchUps.Changed()
			mu.Lock()
			in, readChanged := inside, entered
			mu.Unlock()
			if _, waiting := f.srv.catchUps.Load(ro); in+waiting == n {
				return
			}
			select {
			case <-readChanged:
			case <-turnsChanged:
			case <-hang:
				t.Fatalf("%d of the token's streams are not reading the log nor waiting to", n)
			}
		}
	}
	const path = "/api/v1/stream?after=0&type=no.such.type"
	bearer := http.Header{"Authorization": {"Bearer " + roToken}}

	first := f.openStream(path, bearer)
	require.Equal(t, "hello", next(t, first).event)
	settled(1)
	leaving, leave := context.WithCancel(t.Context())
	defer leave()
	gone := f.openStreamVia(leaving, f.web.Client(), f.web.URL, path, bearer)
	require.Equal(t, "hello", next(t, gone).event)
	settled(2)
	third := f.openStream(path, bearer)
	require.Equal(t, "hello", next(t, third).event)
	settled(3)
	mu.Lock()
	atOnce := peak
	mu.Unlock()
	require.Equal(t, 1, atOnce, "the token's streams read the log %d at once", atOnce)
	awaitTurns(t, f.srv.catchUps, ro, maxCatchUpsPerCredential, 2)

	admin := f.openStream("/api/v1/stream?after=0", nil)
	require.Equal(t, "hello", next(t, admin).event)
	require.Equal(t, "1", next(t, admin).id, "another credential's stream catches up meanwhile")

	leave()
	ends(t, gone)
	awaitTurns(t, f.srv.catchUps, ro, maxCatchUpsPerCredential, 1)

	f.tokens.set(roToken, false)
	openGate()
	ends(t, first)
	ends(t, third)
	awaitTurns(t, f.srv.catchUps, ro, 0, 0)
	mu.Lock()
	read := reads
	mu.Unlock()
	require.Equal(t, 1, read, "a stream whose token was revoked while it waited read the log")
}

// TestAStreamWaitingToCatchUpEndsWhenTheServerCloses: a stream waiting for its credential's catch-up turn ends when
// the server closes, as a stream reading does, and gives its place in the line back; Close does not wait for the
// turn.
func TestAStreamWaitingToCatchUpEndsWhenTheServerCloses(t *testing.T) {
	f := newFixture(t, Options{})
	ro := keyReadOnlyPrefix + digestOf(roToken)
	done, err := f.srv.catchUps.Take(t.Context(), ro)
	require.NoError(t, err)
	defer done()
	frames := f.openStream("/api/v1/stream?after=0", http.Header{"Authorization": {"Bearer " + roToken}})
	require.Equal(t, "hello", next(t, frames).event)
	awaitTurns(t, f.srv.catchUps, ro, 1, 1)
	closed := make(chan error, 1)
	go func() { closed <- f.srv.Close() }()
	ends(t, frames)
	awaitTurns(t, f.srv.catchUps, ro, 1, 0)
	require.NoError(t, recv(t, closed, "return from Close"))
}

// TestACatchUpTurnIsGivenBackWhenItsReadPanics: the server recovers a handler that panics and serves on, so a catch-up
// read that panics must still give its credential's turn back; else every later stream of that credential opened
// behind the ring would wait for it for the rest of the process's life.
func TestACatchUpTurnIsGivenBackWhenItsReadPanics(t *testing.T) {
	f := newFixture(t, Options{})
	ro := keyReadOnlyPrefix + digestOf(roToken)
	var once sync.Once
	f.srv.catchingUp = func(key string) {
		if key == ro {
			once.Do(func() { panic("a read that fails its own way") })
		}
	}
	const path = "/api/v1/stream?after=0"
	bearer := http.Header{"Authorization": {"Bearer " + roToken}}
	first := f.openStream(path, bearer)
	require.Equal(t, "hello", next(t, first).event)
	ends(t, first)
	awaitTurns(t, f.srv.catchUps, ro, 0, 0)
	second := f.openStream(path, bearer)
	require.Equal(t, "hello", next(t, second).event)
	require.Equal(t, "1", next(t, second).id, "the credential's next stream catches up")
}

// TestAReadOnlyStreamsCatchUpIsPaced: a read-only token's stream replaying the log with a filter that keeps nothing
// writes nothing, so nothing but the catch-up turns held it back: the token's streams read the whole log, over and
// over if they liked, at a core's speed, where the socket charges every event a subscription reads to the
// credential's pace. Now each catch-up read waits for the token's bucket, as its reads do, and is charged the events
// it read.
func TestAReadOnlyStreamsCatchUpIsPaced(t *testing.T) {
	ro := keyReadOnlyPrefix + digestOf(roToken)
	auth := http.Header{"Authorization": {"Bearer " + roToken}}

	t.Run("charged the events it read", func(t *testing.T) {
		pacer := newFakePacer()
		f := newFixture(t, Options{Pacer: pacer})
		frames := f.openStream("/api/v1/stream?after=0&type=no.such", auth)
		require.Equal(t, "hello", next(t, frames).event)
		head := int(f.eng.Head())
		charged := func() int {
			n := 0
			for _, c := range pacer.charges()[ro] {
				n += c
			}
			return n
		}
		require.Eventually(t, func() bool { return charged() >= 1+head }, time.Minute, 5*time.Millisecond,
			"the catch-up was not charged its events")
		require.Equal(t, 1+head, charged(), "its opening, and each event read once, charged once")
	})

	t.Run("waits for the token's bucket", func(t *testing.T) {
		pacer := newFakePacer()
		pacer.debt.Store(int64(time.Hour)) // from the stream's opening on
		f := newFixture(t, Options{Pacer: pacer})
		waiting := watchPacing(f)
		f.srv.catchingUp = func(key string) {
			if key == ro {
				t.Error("the stream read the log while its token owed an hour")
			}
		}
		frames := f.openStream("/api/v1/stream?after=0&type=no.such", auth)
		require.Equal(t, "hello", next(t, frames).event)
		recv(t, waiting, "wait of the stream's catch-up for its token's bucket")
	})
}
