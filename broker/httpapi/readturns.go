package httpapi

import (
	"context"
	"net/http"
	"sync"
)

// maxReadsPerCredential bounds the requests one credential (a token with the sessions its links opened) has in
// progress: its others wait their turn, so one client's parallel requests share the CPU and memory of that many
// (each page ≤ maxPageBytes) instead of taking every connection's worth. Streams have their own limits.
const maxReadsPerCredential = 4

// readTurns gives each credential maxReadsPerCredential turns.
type readTurns struct {
	mu      sync.Mutex
	turns   map[string]chan struct{} // per credential with requests: a slot per request in progress
	queued  map[string]int           // requests in progress or waiting, per credential
	changed chan struct{}            // closed and replaced at every change of queued: lets a test wait for one
}

func (t *readTurns) init() {
	t.turns = make(map[string]chan struct{})
	t.queued = make(map[string]int)
	t.changed = make(chan struct{})
}

// acquire waits for a turn of credential key; done gives it back. It fails only when ctx ends first.
func (t *readTurns) acquire(ctx context.Context, key string) (done func(), err error) {
	t.mu.Lock()
	turns := t.turns[key]
	if turns == nil {
		turns = make(chan struct{}, maxReadsPerCredential)
		t.turns[key] = turns
	}
	t.count(key, 1)
	t.mu.Unlock()
	select {
	case turns <- struct{}{}:
		return func() {
			<-turns
			t.leave(key)
		}, nil
	case <-ctx.Done():
		t.leave(key)
		return nil, ctx.Err()
	}
}

func (t *readTurns) leave(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count(key, -1)
}

// count moves key's queued by d, forgetting a credential with none. Under t.mu.
func (t *readTurns) count(key string, d int) {
	if t.queued[key] += d; t.queued[key] <= 0 {
		delete(t.queued, key)
		delete(t.turns, key)
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// takingTurns runs h during one of its principal's turns; a client that goes while waiting gets no answer.
func (s *Server) takingTurns(h authed) authed {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		done, err := s.reads.acquire(r.Context(), p.key)
		if err != nil {
			return
		}
		defer done()
		h(w, r, p)
	}
}
