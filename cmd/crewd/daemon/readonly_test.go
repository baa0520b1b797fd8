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

// TestReadOnlyTokensFollowTheFile: crewd's view follows crewctl's edits (after its recheck interval: a revoked token
// is refused a second later at most), keeps only digests, and refuses a file others may read.
func TestReadOnlyTokensFollowTheFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // made 0700 by the first edit
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ro := NewReadOnlyTokens(dir, nil)
	ro.now = func() time.Time { return now }
	require.False(t, ro.Valid(Digest("anything")), "no file: no token")

	tok, rec, err := CreateReadOnlyToken(dir, "  ci   bot ", now)
	require.NoError(t, err)
	require.Equal(t, "ci bot", rec.Name)
	b, err := os.ReadFile(filepath.Join(dir, ReadOnlyTokensFile))
	require.NoError(t, err)
	require.NotContains(t, string(b), tok, "the file keeps the digest only")
	require.Contains(t, string(b), Digest(tok))
	fi, err := os.Stat(filepath.Join(dir, ReadOnlyTokensFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	require.False(t, ro.Valid(Digest(tok)), "looked at less than a second ago")
	now = now.Add(recheckEvery)
	require.True(t, ro.Valid(Digest(tok)))

	ok, err := RevokeReadOnlyToken(dir, rec.ID)
	require.NoError(t, err)
	require.True(t, ok)
	now = now.Add(time.Second) // NB: not recheckEvery: docs/security.md promises a revocation within a second
	require.False(t, ro.Valid(Digest(tok)), "a second after its revocation")

	_, _, err = CreateReadOnlyToken(dir, "", now)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(filepath.Join(dir, ReadOnlyTokensFile), 0o644))
	var warned error
	ro2 := NewReadOnlyTokens(dir, func(err error) { warned = err })
	require.False(t, ro2.Valid(Digest(tok)))
	require.ErrorContains(t, warned, "group or others may access it")
}

// TestReadOnlyTokensFileOverTheCap: a hand-edited file with more tokens than crewctl ever writes is refused whole,
// by crewctl and by crewd (which then accepts no read-only token, failing closed).
func TestReadOnlyTokensFileOverTheCap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tok, _, err := CreateReadOnlyToken(dir, "first", now)
	require.NoError(t, err)
	path := filepath.Join(dir, ReadOnlyTokensFile)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	line := fmt.Sprintf("x %s %s\n", Digest("other"), now.Format(time.RFC3339))
	b = append(b, strings.Repeat(line, maxReadOnlyTokens-1)...)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	ts, err := ListReadOnlyTokens(dir)
	require.NoError(t, err, "exactly the cap is fine")
	require.Len(t, ts, maxReadOnlyTokens)

	require.NoError(t, os.WriteFile(path, append(b, line...), 0o600))
	_, err = ListReadOnlyTokens(dir)
	require.ErrorContains(t, err, "holds more than 1024 tokens")
	var warned error
	ro := NewReadOnlyTokens(dir, func(err error) { warned = err })
	require.False(t, ro.Valid(Digest(tok)))
	require.ErrorContains(t, warned, "holds more than")
}

// TestReadOnlyTokensChmodAfterLoad: a file made readable by others after crewd read it stops granting at the next
// look, as one found so at the first look does: a chmod changes neither the file's size, nor its modification time,
// nor its inode.
func TestReadOnlyTokensChmodAfterLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tok, _, err := CreateReadOnlyToken(dir, "ci", now)
	require.NoError(t, err)
	var warned error
	ro := NewReadOnlyTokens(dir, func(err error) { warned = err })
	ro.now = func() time.Time { return now }
	require.True(t, ro.Valid(Digest(tok)))

	require.NoError(t, os.Chmod(filepath.Join(dir, ReadOnlyTokensFile), 0o644))
	now = now.Add(recheckEvery)
	require.False(t, ro.Valid(Digest(tok)), "a file others may read grants nothing")
	require.ErrorContains(t, warned, "group or others may access it")

	require.NoError(t, os.Chmod(filepath.Join(dir, ReadOnlyTokensFile), 0o600))
	now = now.Add(recheckEvery)
	require.True(t, ro.Valid(Digest(tok)), "made private again, it grants again")
}

// TestReadOnlyTokenIDsAreUnique: a new token never takes an id the file already holds, however the draw falls, so
// revoking one token by its id never revokes another.
func TestReadOnlyTokenIDsAreUnique(t *testing.T) {
	draws := [][]byte{{1, 2, 3, 4}, {1, 2, 3, 4}, {5, 6, 7, 8}}
	old := newTokenID
	t.Cleanup(func() { newTokenID = old })
	newTokenID = func() ([]byte, error) {
		id := draws[0]
		if len(draws) > 1 {
			draws = draws[1:]
		}
		return id, nil
	}
	dir := filepath.Join(t.TempDir(), "data")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

	_, first, err := CreateReadOnlyToken(dir, "first", now)
	require.NoError(t, err)
	second, rec, err := CreateReadOnlyToken(dir, "second", now)
	require.NoError(t, err)
	require.NotEqual(t, first.ID, rec.ID)

	ok, err := RevokeReadOnlyToken(dir, first.ID)
	require.NoError(t, err)
	require.True(t, ok)
	ts, err := ListReadOnlyTokens(dir)
	require.NoError(t, err)
	require.Len(t, ts, 1, "revoking the first token left the second")
	require.Equal(t, rec.ID, ts[0].ID)
	require.Equal(t, Digest(second), ts[0].Digest)
}
