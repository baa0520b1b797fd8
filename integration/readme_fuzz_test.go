package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeNamesEveryFuzzer: the README's list of fuzzers is how a reader
// finds them to run longer, so every fuzz target of the module is named in
// it, and every name it gives is one.
func TestReadmeNamesEveryFuzzer(t *testing.T) {
	root := ".."
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	targets := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			targets[string(m[1])] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(targets), 30, "the walk found the module's fuzzers")
	for name := range targets {
		require.True(t, strings.Contains(string(readme), "`"+name+"`"), "README.md does not name the fuzzer %s", name)
	}
	for _, m := range regexp.MustCompile("`(Fuzz\\w+)`").FindAllStringSubmatch(string(readme), -1) {
		require.True(t, targets[m[1]], "README.md names %s, which is no fuzzer", m[1])
	}
}
