package httpapi

import "net/http"

// GET /healthz: the process serves HTTP.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// GET /readyz: the engine accepts commands (neither it nor its owner failed stop); otherwise why not (NotReady).
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if why := s.notReady(); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready: " + why + "\n"))
		return
	}
	w.Write([]byte("ready\n"))
}

// notReady is Options.NotReady, or its default.
func (s *Server) notReady() string {
	if s.opts.NotReady != nil {
		return s.opts.NotReady()
	}
	if s.opts.Engine.Err() != nil {
		return "the engine stopped after a commit error; crewd restarts"
	}
	return ""
}
