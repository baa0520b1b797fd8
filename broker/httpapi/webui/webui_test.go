package webui

import (
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// pageFiles reads every file of the page by its path in FS.
func pageFiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, fs.WalkDir(FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(FS(), p)
		out[p] = string(b)
		return err
	}))
	require.Contains(t, out, "index.html")
	return out
}

var (
	// Module imports: `from './x.js'`, `import './x.js'`.
	jsImport = regexp.MustCompile(`(?m)(?:from|import)\s+'([^']+)'`)
	// References in the shell: src="/…" and href="/…".
	htmlRef = regexp.MustCompile(`(?:src|href)="([^"#][^"]*)"`)
	// Any absolute URL.
	absoluteURL = regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
)

// TestPageWorksOffline: every file the page loads is embedded, and nothing is loaded from another origin.
func TestPageWorksOffline(t *testing.T) {
	files := pageFiles(t)
	for name, text := range files {
		for _, m := range absoluteURL.FindAllString(text, -1) {
			// The SVG namespace is an identifier, never fetched.
			if m == "http://www.w3.org" {
				continue
			}
			t.Errorf("%s refers to another origin: %q", name, m)
		}
		switch path.Ext(name) {
		case ".js":
			for _, m := range jsImport.FindAllStringSubmatch(text, -1) {
				require.True(t, strings.HasPrefix(m[1], "./") || strings.HasPrefix(m[1], "../"), "%s imports %q: only relative modules", name, m[1])
				require.Contains(t, files, path.Join(path.Dir(name), m[1]), "%s imports %q, which is not embedded", name, m[1])
			}
		case ".html":
			refs := htmlRef.FindAllStringSubmatch(text, -1)
			require.NotEmpty(t, refs)
			for _, m := range refs {
				if strings.HasPrefix(m[1], "#") {
					continue
				}
				require.True(t, strings.HasPrefix(m[1], "/"), "%s refers to %q: root-relative paths only (the page is served at /)", name, m[1])
				require.Contains(t, files, strings.TrimPrefix(m[1], "/"), "%s refers to %q, which is not embedded", name, m[1])
			}
		}
	}
}

// TestPageKeepsTextText: API strings come from the daemon's clients; the page never parses them as markup or
// code, and needs no inline script or style (so a strict Content-Security-Policy can forbid both).
func TestPageKeepsTextText(t *testing.T) {
	forbidden := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(`)
	for name, text := range pageFiles(t) {
		if path.Ext(name) == ".js" {
			require.Empty(t, forbidden.FindAllString(text, -1), "%s", name)
		}
		if path.Ext(name) == ".html" {
			require.NotRegexp(t, `<script(?:[^>]*)>[^<]+</script>|<style|\son[a-z]+=|style="`, text, "%s has inline code or style", name)
		}
	}
}

// TestStreamListensToEveryEventType: EventSource dispatches a named SSE event only to listeners of that name, so
// a type missing from api.js's list would never reach the page live.
func TestStreamListensToEveryEventType(t *testing.T) {
	api := pageFiles(t)["js/api.js"]
	for _, typ := range events.Types() {
		require.Contains(t, api, "'"+typ+"'", "js/api.js eventTypes lacks %s", typ)
	}
}

// TestJavaScriptUnits runs jstest/*.test.js with node --test over the page's pure modules. The modules are
// copied next to a package.json that declares ES modules, so any Node from 18 on runs them unflagged.
func TestJavaScriptUnits(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH; the page's pure modules are not unit-tested here (CI has node)")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type":"module"}`), 0o600))
	for name, text := range pageFiles(t) {
		if path.Ext(name) == ".js" {
			writeFile(t, filepath.Join(dir, "static", filepath.FromSlash(name)), text)
		}
	}
	tests, err := filepath.Glob("jstest/*.test.js")
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	args := []string{"--test"}
	for _, p := range tests {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		writeFile(t, filepath.Join(dir, p), string(b))
		args = append(args, filepath.ToSlash(p))
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node --test:\n%s", out)
}

func writeFile(t *testing.T, name, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o700))
	require.NoError(t, os.WriteFile(name, []byte(text), 0o600))
}
