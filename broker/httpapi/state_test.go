package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
)

// TestRebuildEndsWithItsClient: a state?at or explain whose client goes away while its rebuild holds the slot
// stops its fold there: it answers nothing, logs nothing, keeps no state, and gives the slot to the request
// waiting for it, which is answered.
func TestRebuildEndsWithItsClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		// paths are the request whose client goes and the one waiting behind it, for another position.
		paths func(f *fixture) (gone, next string)
		// kept is the position of the state the waiting request keeps, given its answer.
		kept func(next map[string]any) uint64
	}{
		{
			name: "state?at",
			paths: func(*fixture) (string, string) {
				return budgetRun + "/state?at=5", budgetRun + "/state?at=10"
			},
			kept: func(map[string]any) uint64 { return 10 },
		},
		{
			name: "explain",
			paths: func(f *fixture) (string, string) {
				evs := f.ok(budgetRun + "/events?type=delegate.admitted&type=delegate.rejected")["events"].([]any)
				require.GreaterOrEqual(f.t, len(evs), 2)
				pos := func(e any) string {
					return fmt.Sprintf("/api/v1/events/%.0f/explain", e.(map[string]any)["metadata"].(map[string]any)["position"])
				}
				return pos(evs[0]), pos(evs[len(evs)-1])
			},
			// The decision is re-run on its run's state just before it.
			kept: func(next map[string]any) uint64 {
				return uint64(next["decision"].(map[string]any)["position"].(float64)) - 1
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged := newErrorLog()
			f := newFixture(t, Options{Logger: slog.New(logged)})
			c := &f.srv.states
			gone, next := tc.paths(f)
			ctx, cancel := context.WithCancel(t.Context())
			nextReq, err := http.NewRequest(http.MethodGet, f.web.URL+next, nil)
			require.NoError(t, err)
			nextReq.Header.Set("Authorization", "Bearer "+adminToken)
			var answered <-chan answer
			var first bool
			paceAtNext := int64(-1)
			c.holding = func(context.Context) {
				if first {
					paceAtNext = c.pace.Load() // the waiting request's turn
					return
				}
				first = true
				answered = sendInBackground(f, nextReq)
				awaitSlot(t, c.slot, 1, 1) // the next request waits for the slot
				cancel()                   // and the client of the one holding it goes
			}
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, gone, nil)
			req.Host, req.RemoteAddr = "127.0.0.1:7717", "127.0.0.1:40000"
			req.Header.Set("Authorization", "Bearer "+adminToken)
			rec := httptest.NewRecorder()
			f.srv.Handler().ServeHTTP(rec, req)
			require.True(t, first, "the rebuild had the slot")
			body, err := io.ReadAll(rec.Result().Body)
			require.NoError(t, err)
			require.Empty(t, string(body), "nothing answered to a client that went")
			require.Empty(t, rec.Header().Get("Content-Type"))

			a := recv(t, answered, "answer to the request waiting for the slot")
			require.NoError(t, a.err)
			require.Equal(t, http.StatusOK, a.code, "the waiting request had its turn: %s", a.body)
			var nextBody map[string]any
			require.NoError(t, json.Unmarshal(a.body, &nextBody))
			awaitSlot(t, c.slot, 0, 0)
			awaitTurns(t, c.rebuilds, keyAdmin, 0, 0)
			c.mu.Lock()
			kept := c.states
			c.mu.Unlock()
			require.Len(t, kept, 1, "only the waiting request's state is kept")
			require.Equal(t, tc.kept(nextBody), kept[0].Position)
			require.Empty(t, logged.take(), "a client that went is no failure")
			require.Zero(t, paceAtNext, "a rebuild stopped with its client is no measure of the pace (Retry-After)")
			require.Positive(t, c.pace.Load(), "the waiting request's rebuild is")
		})
	}
}

// TestStateAtTimeTakesOneTurn: state?at=TIME resolves its time and folds the run there in one rebuild turn: it
// waits once for the slot, behind the rebuild holding it, and not again behind the rebuild queued after it, and it
// is one rebuild of the queue and of the pace.
func TestStateAtTimeTakesOneTurn(t *testing.T) {
	f := newFixture(t, Options{})
	c := &f.srv.states
	ctx := t.Context()
	_, done, err := c.turn(ctx, principal{kind: kindAdmin, key: keyAdmin}) // another rebuild holds the slot
	require.NoError(t, err)
	defer done()
	var turns atomic.Int32
	c.holding = func(context.Context) { turns.Add(1) }

	// By the scenario's clock (one second per command from audittest.Epoch), a time before the run ended.
	at := audittest.Epoch.Add(8 * time.Second).Format(time.RFC3339)
	req, err := http.NewRequest(http.MethodGet, f.web.URL+budgetRun+"/state?at="+url.QueryEscape(at), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	answered := sendInBackground(f, req)
	awaitSlot(t, c.slot, 1, 1) // state?at=TIME waits for the slot

	// Another credential's rebuild queues behind it, and holds the slot once it has it.
	ro := principal{kind: kindReadOnly, key: keyReadOnlyPrefix + digestOf(roToken)}
	holds, release, next := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, done, err := c.turn(ctx, ro)
		if err == nil {
			close(holds)
			<-release
			done()
		}
		next <- err
	}()
	defer close(release)
	awaitSlot(t, c.slot, 1, 2)
	done()
	select {
	case <-holds:
	case err := <-next:
		require.NoError(t, err)
	case <-time.After(guard):
		t.Fatal("the rebuild queued behind state?at=TIME neither held the slot nor failed")
	}

	// state?at=TIME had its one turn before the rebuild behind it: it is answered while that one holds the slot.
	awaitCtx, stopAwait := context.WithCancel(ctx)
	defer stopAwait()
	waitsAgain := make(chan error, 1)
	go func() { waitsAgain <- c.slot.AwaitLoad(awaitCtx, 1, 1) }()
	select {
	case a := <-answered:
		require.NoError(t, a.err)
		require.Equal(t, http.StatusOK, a.code, "%s", a.body)
		var st map[string]any
		require.NoError(t, json.Unmarshal(a.body, &st))
		require.Len(t, st["delegations"], 2)
		require.Equal(t, at, st["at"])
	case err := <-waitsAgain:
		require.NoError(t, err)
		require.Fail(t, "state?at=TIME waited for the slot a second time, behind the rebuild queued after it")
	case <-time.After(guard):
		t.Fatal("state?at=TIME was not answered")
	}
	require.EqualValues(t, 2, turns.Load(), "one turn for state?at=TIME, one for the rebuild behind it")
}

// answer is the answer to a request sent in the background (sendInBackground), or its failure.
type answer struct {
	code int
	body []byte
	err  error
}

// sendInBackground sends req from another goroutine, and its answer once it has it.
func sendInBackground(f *fixture, req *http.Request) <-chan answer {
	answered := make(chan answer, 1)
	go func() {
		resp, err := f.web.Client().Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, body, err}
	}()
	return answered
}

// TestStateAtTheHeadIsNotLaterThanAsked: a state?at that resolves to the head it read answers the state there, even
// when a command commits before the state is read: never a later position than the one asked for, nor one beyond
// the head it answers with.
func TestStateAtTheHeadIsNotLaterThanAsked(t *testing.T) {
	f := newFixture(t, Options{})
	head := f.eng.Head()
	at := time.Now()
	time.Sleep(2 * time.Millisecond) // the command below is later than at
	var once sync.Once
	f.srv.states.holding = func(context.Context) {
		// state?at=TIME read the head, and holds the rebuild slot before it resolves the time: a commit now.
		once.Do(func() {
			f.do(audittest.Admin, &commands.RunCreate{RunID: "team_20261001100000_a1b2c3d4e5f600ff", Team: "t",
				Goal: "g", Cwd: "/w"})
		})
	}
	code, st := f.get(livePath + "/state?at=" + url.QueryEscape(at.Format(time.RFC3339Nano)))
	require.Equal(t, http.StatusOK, code, "%v", st)
	require.Equal(t, head+1, f.eng.Head(), "a command committed while the request was answered")
	require.EqualValues(t, head, st["position"], "the state as of the time asked, before the later command")
	require.LessOrEqual(t, st["position"].(float64), st["head"].(float64))
}

// TestRebuildSlotServesCredentialsInTurn: a credential with its rebuilds queued delays another credential's next
// rebuild by one of them, not by all: the slot goes to the credentials waiting in turn.
func TestRebuildSlotServesCredentialsInTurn(t *testing.T) {
	f := newFixture(t, Options{})
	c := &f.srv.states
	admin := principal{kind: kindAdmin, key: keyAdmin}
	ro := principal{kind: kindReadOnly, key: keyReadOnlyPrefix + digestOf(roToken)}
	_, held, err := c.turn(t.Context(), admin)
	require.NoError(t, err)
	served := make(chan string, maxRebuildsPerPrincipal+1)
	queue := func(p principal, name string, waiting int) {
		go func() {
			_, done, err := c.turn(t.Context(), p)
			if err == nil {
				served <- name
				done()
			}
		}()
		awaitSlot(t, c.slot, 1, waiting)
	}
	for i := range maxRebuildsPerPrincipal - 1 {
		queue(ro, fmt.Sprint("read-only ", i), i+1)
	}
	queue(admin, "admin", maxRebuildsPerPrincipal)
	held()
	var order []string
	for range maxRebuildsPerPrincipal {
		order = append(order, recv(t, served, "rebuild served in its turn"))
	}
	require.Equal(t, []string{"read-only 0", "admin", "read-only 1", "read-only 2"}, order)
}
