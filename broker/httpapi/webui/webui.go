package webui

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// FS returns the page's files, rooted at static/ (index.html at the top). It is safe for concurrent use.
func FS() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic("webui: " + err.Error()) // NB: cannot happen: "static" is a valid path embedded above
	}
	return sub
}
