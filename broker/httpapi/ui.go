package httpapi

import (
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// placeholder is the page served when no UI files were given.
const placeholder = `<!doctype html><html><head><meta charset="utf-8"><title>crewlog</title></head>
<body><h1>crewlog</h1><p>This crewd was built without the dashboard page. The API is at <code>/api/v1/</code>.</p></body></html>
`

// uiHandler serves the page's files: a path with a file serves it, any other path (a client-side route) serves
// index.html. The files carry no data, so they need no authentication.
func (s *Server) uiHandler() http.Handler {
	ui := s.opts.UI
	if ui == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(placeholder))
		})
	}
	files := http.FileServerFS(ui)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !getOrHead(w, r) {
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		// NB: the files are small and served whole: a Range of many small ranges cost net/http before Go 1.26.9
		// CPU without bound (GO-2026-6609), and this route needs no credential.
		r.Header.Del("Range")
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if name == "" {
			name = "index.html"
		}
		if st, err := fs.Stat(ui, name); err != nil || st.IsDir() {
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/"
			files.ServeHTTP(w, r2)
			return
		}
		files.ServeHTTP(w, r)
	})
}
