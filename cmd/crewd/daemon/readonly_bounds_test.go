package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadOnlyTokenNameBound: a token's name is at most maxTokenName bytes, its whitespace collapsed first.
func TestReadOnlyTokenNameBound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	_, rec, err := CreateReadOnlyToken(dir, strings.Repeat("n", maxTokenName), now)
	require.NoError(t, err, "exactly the bound")
	require.Len(t, rec.Name, maxTokenName)
	_, _, err = CreateReadOnlyToken(dir, "  "+strings.Repeat("n", maxTokenName)+"  ", now)
	require.NoError(t, err, "the whitespace about it is not counted")
	_, _, err = CreateReadOnlyToken(dir, strings.Repeat("n", maxTokenName+1), now)
	require.ErrorContains(t, err, fmt.Sprintf("a token name is at most %d bytes", maxTokenName))
	ts, err := ListReadOnlyTokens(dir)
	require.NoError(t, err)
	require.Len(t, ts, 2, "the refused token was not recorded")
}

// TestReadOnlyTokenCreateCap: crewctl token create makes the file hold at most maxReadOnlyTokens tokens: the last
// one that fits is made, the one after is refused.
func TestReadOnlyTokenCreateCap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var file []byte
	for i := range maxReadOnlyTokens - 1 {
		file = fmt.Appendf(file, "x%d %s %s\n", i, Digest(fmt.Sprint(i)), now.Format(time.RFC3339))
	}
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ReadOnlyTokensFile), file, 0o600))

	_, _, err := CreateReadOnlyToken(dir, "last", now)
	require.NoError(t, err, "the token that makes the cap")
	_, _, err = CreateReadOnlyToken(dir, "one more", now)
	require.ErrorContains(t, err, fmt.Sprintf("%d read-only tokens exist; revoke some first", maxReadOnlyTokens))
	ts, err := ListReadOnlyTokens(dir)
	require.NoError(t, err)
	require.Len(t, ts, maxReadOnlyTokens)
}

// TestReadOnlyTokensFileLines: a line of the file is "id digest created [name]", the digest 64 lowercase hex digits
// as crewctl writes it (the broker compares digests as strings: an uppercase one would never match); any other line
// refuses the whole file.
func TestReadOnlyTokensFileLines(t *testing.T) {
	digest := Digest("tok")
	for _, tc := range []struct {
		name string
		line string
		want string // "" when the line is read
	}{
		{"with a name", "a1 " + digest + " 2026-12-01T10:00:00Z ci bot", ""},
		{"without a name", "a1 " + digest + " 2026-12-01T10:00:00Z", ""},
		{"a comment", "# a1 nothing", ""},
		{"no created", "a1 " + digest, "line 1 is not"},
		{"an uppercase digest", "a1 " + strings.ToUpper(digest) + " 2026-12-01T10:00:00Z", "line 1 is not"},
		{"a short digest", "a1 " + digest[:63] + " 2026-12-01T10:00:00Z", "line 1 is not"},
		{"a digest not hex", "a1 " + strings.Repeat("g", 64) + " 2026-12-01T10:00:00Z", "line 1 is not"},
		{"a bad created", "a1 " + digest + " yesterday", "line 1: parsing time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := parseReadOnlyTokens([]byte(tc.line + "\n"))
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			if strings.HasPrefix(tc.line, "#") {
				require.Empty(t, ts)
				return
			}
			require.Len(t, ts, 1)
			require.Equal(t, digest, ts[0].Digest)
			require.Equal(t, strings.Join(strings.SplitN(tc.line, " ", 4)[3:], ""), ts[0].Name)
		})
	}
}
