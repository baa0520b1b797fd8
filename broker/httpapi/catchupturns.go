package httpapi

import "context"

// maxCatchUpsPerCredential bounds the reads of the log one credential's streams make at once to catch up. A stream
// that starts before the hub's ring reads the log itself, catchUpEvents events a read, as fast as its client takes
// the frames; with a filter that keeps nothing, nothing paces it at all: it writes nothing. Unbounded, one token's
// MaxStreamsPerPrincipal streams opened at position 0 with such a filter would re-read a long log on every core at
// once, taking the CPU the engine's writer and every other client need. Bounded, the token's streams take turns,
// one read each in arrival order: together they read the log no faster than one stream alone, and another
// credential's streams are not held up by them. The waiters need no bound of their own: each of the credential's
// streams (≤ MaxStreamsPerPrincipal) waits for at most one turn.
const maxCatchUpsPerCredential = 1

// catchUpTurn waits for one of pr's catch-up turns (s.catchUps) and returns the function that gives it back. ok is
// false, and nothing is held, when ctx ended first or when pr's credential no longer holds once the turn comes: a
// stream that waited behind the credential's others reads nothing for a revoked token or an expired session.
func (s *Server) catchUpTurn(ctx context.Context, pr *principal) (done func(), ok bool) {
	done, err := s.catchUps.Take(ctx, pr.key)
	if err != nil {
		return nil, false
	}
	if !s.current(pr) {
		done()
		return nil, false
	}
	return done, true
}
