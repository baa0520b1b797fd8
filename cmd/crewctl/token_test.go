package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// TestTokenCreateListRevoke: a read-only token is printed once, kept as a digest, listed without it, and
// revoked by id.
func TestTokenCreateListRevoke(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	r := crewctl(t, nil, "token", "create", "--data", data)
	require.Equal(t, exitUsage, r.code, "only --read-only tokens exist: %s", r.err)

	r = crewctl(t, nil, "token", "create", "--read-only", "--name", "grafana", "--data", data, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var made struct{ ID, Name, Token string }
	require.NoError(t, json.Unmarshal([]byte(r.out), &made))
	require.True(t, strings.HasPrefix(made.Token, "crro_"))
	require.Equal(t, "grafana", made.Name)

	checker := daemon.NewReadOnlyTokens(data, nil)
	require.True(t, checker.Valid(daemon.Digest(made.Token)))
	raw, err := daemon.ListReadOnlyTokens(data)
	require.NoError(t, err)
	require.Len(t, raw, 1)

	r = crewctl(t, nil, "token", "list", "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, made.ID)
	require.Contains(t, r.out, "grafana")
	require.NotContains(t, r.out, made.Token)

	r = crewctl(t, nil, "token", "revoke", made.ID, "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	r = crewctl(t, nil, "token", "revoke", made.ID, "--data", data)
	require.Equal(t, exitProblem, r.code)
	list, err := daemon.ListReadOnlyTokens(data)
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestTokenCommandsNeedTheDataDirectory: with no data directory (no --data, and no HOME or XDG_DATA_HOME to
// default it from) no token command touches a file: an empty directory would mean a token file in the current
// directory.
func TestTokenCommandsNeedTheDataDirectory(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_DATA_HOME", "")
	t.Chdir(t.TempDir())
	for _, argv := range [][]string{
		{"token", "create", "--read-only"},
		{"token", "list"},
		{"token", "revoke", "ro_x"},
	} {
		r := crewctl(t, nil, argv...)
		require.Equal(t, exitUsage, r.code, "%v: %s", argv, r.err)
		require.Contains(t, r.err, "pass --data", "%v", argv)
	}
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	require.Empty(t, entries, "no token file was written in the current directory")
}

// TestTokenRevokeJSON: with --json every command prints JSON (README), revoke too: a script that revokes a token
// reads which one went, not a sentence.
func TestTokenRevokeJSON(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	r := crewctl(t, nil, "token", "create", "--read-only", "--data", data, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var made struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(r.out), &made))

	r = crewctl(t, nil, "token", "revoke", made.ID, "--data", data, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var revoked struct {
		ID      string `json:"id"`
		Revoked bool   `json:"revoked"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &revoked), "not JSON: %q", r.out)
	require.Equal(t, made.ID, revoked.ID)
	require.True(t, revoked.Revoked)
}

// TestTokenRevokeHelpSaysWhenCrewdRefusesIt: crewd looks at readonly.tokens at most once a second, so a token
// revoked just after a look is still taken for up to a second. revoke's help says so (within a second), where it
// promised the token was refused from its next request on, which a script revoking a leaked token relied on.
func TestTokenRevokeHelpSaysWhenCrewdRefusesIt(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	r := crewctl(t, nil, "token", "create", "--read-only", "--data", data, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var made struct{ ID, Token string }
	require.NoError(t, json.Unmarshal([]byte(r.out), &made))

	crewd := daemon.NewReadOnlyTokens(data, nil)
	looked := time.Now()
	require.True(t, crewd.Valid(daemon.Digest(made.Token)))
	r = crewctl(t, nil, "token", "revoke", made.ID, "--data", data)
	require.Equal(t, exitOK, r.code, r.err)
	valid := crewd.Valid(daemon.Digest(made.Token))
	// NB: a machine too slow to revoke within the second proves nothing.
	if time.Since(looked) < 900*time.Millisecond {
		require.True(t, valid, "a request within a second of crewd's last look is still served: not refused at once")
	}

	for _, argv := range [][]string{{"token", "revoke", "--help"}, {"token", "--help"}} {
		r = crewctl(t, nil, argv...)
		require.Equal(t, exitOK, r.code, r.err)
		require.NotContains(t, r.out, "next request", "%v", argv)
		require.Contains(t, r.out, "within a second", "%v", argv)
	}
}
