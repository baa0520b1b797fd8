package httpapi

import (
	"net/http"
)

// maxReadsPerCredential bounds the requests one credential (a token with the sessions its links opened) has in
// progress: its others wait their turn, so one client's parallel requests share the CPU and memory of that many
// (each page ≤ maxPageBytes) instead of taking every connection's worth. Streams have their own limits. The turns
// (s.reads) are kept only for credentials with a request in progress or waiting.
const maxReadsPerCredential = 4

// takingTurns runs h during one of its principal's turns; a client that goes while waiting gets no answer.
func (s *Server) takingTurns(h authed) authed {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		done, err := s.reads.Take(r.Context(), p.key)
		if err != nil {
			return
		}
		defer done()
		h(w, r, p)
	}
}
