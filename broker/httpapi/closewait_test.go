package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
)

// TestAPacedWaitEndsWithTheServer: a read of a read-only token waiting out the token's debt, and a stream waiting
// for the token's bucket to open, did not look at the server's Close: Close waited its grace (2 s) for them, then
// closed their connections. Each now ends at once when the server closes, refused 503 unavailable, as a request
// that comes once Close has begun is, and costs nothing.
func TestAPacedWaitEndsWithTheServer(t *testing.T) {
	for _, path := range []string{"/api/v1/slots", "/api/v1/stream"} {
		t.Run(path, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer, KeepAlive: time.Hour})
			waiting := watchPacing(f)
			// NB: before it serves; longer than the bound below, so that only the wait's own end meets it.
			f.srv.closeGrace = 10 * time.Second
			_, base := listening(t, f)
			pacer.delay.Store(int64(time.Hour))
			answered := sendAsItStops(t, base+path)
			recv(t, waiting, "wait of the request for its token's bucket")
			requireRefusedAsItStops(t, f, answered, "Close waited for the paced wait")
			require.Empty(t, pacer.charges(), "refused as crewd stops: it costs nothing (docs/dashboard-api.md)")
		})
	}
}

// TestARebuildEndsWithTheServer: a rebuild (state?at a position or a time, explain) waiting for the rebuild slot,
// or holding it while it folded or read the log, did not look at the server's Close: Close waited its grace (2 s)
// for it, then closed its connection. It now ends when the server closes, as a paced wait does: a wait for the slot
// at once, a fold or a read at its next look at its context, refused 503 unavailable, and the slot given back.
func TestARebuildEndsWithTheServer(t *testing.T) {
	for _, tc := range rebuildRoutes(t) {
		t.Run(tc.name+", waiting for the slot", func(t *testing.T) {
			f := newFixture(t, Options{})
			path := tc.path(f)
			f.srv.closeGrace = 10 * time.Second // NB: longer than the bound, so that only the wait's own end meets it
			_, base := listening(t, f)
			held, err := f.srv.states.slot.Take(t.Context(), "another principal")
			require.NoError(t, err)
			defer held()
			answered := sendAsItStops(t, base+path)
			awaitSlot(t, f.srv.states.slot, 1, 1)
			requireRefusedAsItStops(t, f, answered, "Close waited for the rebuild waiting for the slot")
			require.Equal(t, []int{1, 0}, slotLoad(f.srv.states.slot), "its place in the slot's queue given up")
		})
		t.Run(tc.name+", folding", func(t *testing.T) {
			f := newFixture(t, Options{})
			path := tc.path(f)
			f.srv.closeGrace = 10 * time.Second
			folding := make(chan struct{})
			f.srv.states.holding = func(rctx context.Context) {
				close(folding)
				// NB: stands in for a fold (or a time's read) that lasts until it looks at its context again.
				select {
				case <-rctx.Done():
				case <-time.After(time.Minute): // a guard against a hang, not a timing
				}
			}
			_, base := listening(t, f)
			answered := sendAsItStops(t, base+path)
			recv(t, folding, "slot for the rebuild")
			requireRefusedAsItStops(t, f, answered, "Close waited for the rebuild folding")
			require.Equal(t, []int{0, 0}, slotLoad(f.srv.states.slot), "the slot given back")
			require.Nil(t, f.srv.states.Base(audittest.RunBudget, f.eng.Head()), "nothing kept of the rebuild")
		})
	}
}

// stopAnswer is what the client of sendAsItStops was answered: its status and error code, or its error.
type stopAnswer struct {
	status int
	code   string
	err    error
}

// sendAsItStops sends a GET of u with the read-only token through a transport of its own, and returns the channel
// its answer comes on.
func sendAsItStops(t *testing.T, u string) <-chan stopAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+roToken)
	answered := make(chan stopAnswer, 1)
	go func() {
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			answered <- stopAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		answered <- stopAnswer{status: resp.StatusCode, code: body.Error.Code}
	}()
	return answered
}

// requireRefusedAsItStops closes f's server, which must return well before its grace (f's closeGrace, longer than
// the bound), and requires the request answered on answered refused 503 unavailable.
func requireRefusedAsItStops(t *testing.T, f *fixture, answered <-chan stopAnswer, waited string) {
	t.Helper()
	start := time.Now()
	require.NoError(t, f.srv.Close())
	// NB: a bound, not a timing: without the wait's end, Close waited out its grace.
	require.Less(t, time.Since(start), 5*time.Second, waited)
	a := recv(t, answered, "answer to the request sent as the server stopped")
	require.NoError(t, a.err)
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, codeUnavailable, a.code)
}
