// Package webui holds the dashboard page's files, embedded in the binary so crewd serves the page offline with no
// build step. crewd passes FS to httpapi.Options.UI.
package webui

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS is the page's files, rooted at static/ (index.html at the top).
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // NB: static/ is embedded above; Sub fails only on an invalid name
	}
	return sub
}
