package broker

import "github.com/crewlog/crewlog/events"

// Stats is a census of the server's connections, for metrics.
type Stats struct {
	// Connections counts open connections by role: admin, orchestrator, worker, and "pending" for those that
	// have not finished their hello.
	Connections map[string]int
	// Subscribers counts connections holding an events.subscribe subscription.
	Subscribers int
	// Resyncs counts the resync frames sent since the server started.
	Resyncs uint64
	// Requests counts the requests answered since the server started, by method and answer (those not zero).
	Requests []RequestCount
}

// Stats counts the connections now. It takes the server's lock once; it is meant for a metrics scrape.
func (s *Server) Stats() Stats {
	st := Stats{Connections: map[string]int{
		events.RoleAdmin: 0, events.RoleOrchestrator: 0, events.RoleWorker: 0, "pending": 0,
	}, Resyncs: s.resyncs.Load(), Requests: s.requests.counts()}
	s.mu.Lock()
	bound := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		if !c.bound {
			st.Connections["pending"]++
			continue
		}
		st.Connections[c.id.role]++
		bound = append(bound, c)
	}
	s.mu.Unlock()
	// NB: each connection's lock after s.mu is released: the counts need no snapshot of both, and s.mu is not held
	// while every connection's lock is taken in turn.
	for _, c := range bound {
		c.mu.Lock()
		sub := c.sub
		c.mu.Unlock()
		if sub != nil && !sub.ended() {
			st.Subscribers++
		}
	}
	return st
}
