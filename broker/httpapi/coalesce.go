package httpapi

import "time"

// coalesceClock stands in, in a test, for the clock and the timer a stream spaces its writes by.
type coalesceClock struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// coalesceNow is the time a stream spaces its writes by: the clock's, or the test's.
func (s *Server) coalesceNow() time.Time {
	if s.coalesceClock != nil {
		return s.coalesceClock.now()
	}
	return time.Now()
}

// coalesceAfter is the timer a stream waits on before its next write: time.After's, or the test's.
func (s *Server) coalesceAfter(wait time.Duration) <-chan time.Time {
	if s.coalesceClock != nil {
		return s.coalesceClock.after(wait)
	}
	return time.After(wait)
}
