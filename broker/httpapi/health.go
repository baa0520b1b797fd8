package httpapi

import "net/http"

// GET /healthz: the process serves HTTP.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	if !getOrHead(w, r) {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// GET /readyz: the engine accepts commands (neither it nor its owner failed stop); otherwise why not (NotReady).
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if !getOrHead(w, r) {
		return
	}
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

// getOrHead answers 405 to a request to the probes or the page's files sent with another method than GET or HEAD, and
// says whether the request may be answered. NB: a 2xx to a CONNECT (whose target may be a path) tells a proxy in
// front that the connection is now a tunnel, while net/http before Go 1.26.9 went on reading requests from it
// (GO-2026-6613: requests smuggled past the proxy).
func getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	writeError(w, methodNotAllowed(allowGetHead, "%s %s: use GET", r.Method, r.URL.Path))
	return false
}
