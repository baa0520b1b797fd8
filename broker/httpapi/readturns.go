package httpapi

import (
	"errors"
	"net/http"

	"github.com/crewlog/crewlog/broker/internal/turns"
)

// maxReadsPerCredential bounds the requests one credential (a token with the sessions its links opened) has in
// progress: its others wait their turn, so one client's parallel requests share the CPU and memory of that many
// (each page ≤ maxPageBytes) instead of taking every connection's worth. Streams have their own limits. The turns
// (s.reads) are kept only for credentials with a request in progress or waiting.
const maxReadsPerCredential = 4

// maxWaitingReadsPerCredential bounds the requests of one credential waiting for a turn; the next is refused (429
// too-many-reads). A waiting request holds its connection's place and is never closed to make room
// (limitlistener.go), so without a bound one credential could hold all MaxConns places with waiting reads and lock
// every other credential out. A browser keeps at most 6 connections to a host, so one page never meets the bound.
const maxWaitingReadsPerCredential = 2 * maxReadsPerCredential

// readsRetryAfter is the Retry-After of a 429 too-many-reads, in seconds: the smallest the header can say. The
// credential's reads in progress are answered in milliseconds, so its client may try again soon; the dashboard
// waits at least this long before it does.
const readsRetryAfter = 1

// takingTurns runs h during one of its principal's turns, if its credential is still valid when the turn comes; a
// client that goes while waiting gets no answer, one beyond the credential's waiting requests is refused with a
// Retry-After.
func (s *Server) takingTurns(h authed) authed {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		// NB: a read in progress or waiting for its turn keeps its connection's place (≤ 4 + 8 per credential); a
		// refused one is answered at once and keeps none, or one credential's refused reads, each answer unread,
		// would hold every place.
		letGo := keepPlace(r)
		// NB: one that waits behind its credential's reads, as long as theirs take, ends when its client goes
		// (clientwatch.go); one served at once or refused is not held long.
		done, err := s.reads.TakeWaiting(r.Context(), p.key, func() { holdLong(r.Context()) })
		if err != nil {
			letGo()
		}
		if errors.Is(err, turns.ErrTooManyWaiting) {
			e := errorf(http.StatusTooManyRequests, codeTooManyReads,
				"%d requests of this credential are in progress and %d waiting; wait for their answers",
				maxReadsPerCredential, maxWaitingReadsPerCredential)
			e.retryAfter = readsRetryAfter
			writeError(w, e)
			return
		}
		if err != nil {
			return
		}
		defer done()
		ctx, charge, ok := s.paceRead(r.Context(), p)
		if !ok {
			return
		}
		// NB: it may have waited for its turn behind answers that take up to minutes, then for its credential's
		// pacing (as long as its debt takes to repay).
		if e := s.refusalAfterWait(&p); e != nil {
			writeError(w, e)
			return
		}
		defer charge()
		r = r.WithContext(ctx)
		if s.reading != nil {
			s.reading(p)
		}
		h(w, r, p)
	}
}
