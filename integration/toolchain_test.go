package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOneGoReleaseIsNamedEverywhere: the Go release crewlog is built with (docs/security.md, "The Go release") is
// named alike by go.mod's toolchain line, the export .ci/run runs every check under, the README's advice for a
// machine whose GOTOOLCHAIN is local, and docs/security.md; and .ci/run runs the README's test command as it is
// written there.
func TestOneGoReleaseIsNamedEverywhere(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
		require.NoError(t, err)
		return string(b)
	}
	m := regexp.MustCompile(`(?m)^toolchain (go1\.\d+\.\d+)$`).FindStringSubmatch(read("go.mod"))
	require.NotNil(t, m, "go.mod names a toolchain")
	release := m[1]
	ci, readme := read(".ci/run"), read("README.md")
	require.Regexp(t, `(?m)^export GOTOOLCHAIN=`+regexp.QuoteMeta(release)+`$`, ci)
	require.Contains(t, readme, "export GOTOOLCHAIN="+release)
	require.Contains(t, read("docs/security.md"), "toolchain "+release)

	// The README's first block: the command that runs crewlog, then the one that runs the tests.
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(readme)
	require.NotNil(t, block)
	lines := strings.Split(strings.TrimSpace(block[1]), "\n")
	require.Len(t, lines, 2, "the README opens with two commands")
	test := strings.TrimSpace(strings.SplitN(lines[1], "#", 2)[0])
	require.Equal(t, "go test ./...", test)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(test)+`$`, ci, ".ci/run runs the README's test command")
}
