package main

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCrewdNotFoundSaysWhatToCheck: the two slips of a first session, crewctl run while no crewd listens at its socket
// (crewd not started, or started with another --socket) and crewctl run with a --data that holds no admin.token (not
// crewd's data directory), exit 3 with the error and, under it, the flag that names what crewd printed at start,
// where the error alone ("connect: no such file or directory", "lstat …: no such file or directory") named no way on.
func TestCrewdNotFoundSaysWhatToCheck(t *testing.T) {
	data := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(data, adminTokenFile), "t0ken"))
	refusing := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", refusing)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close()) // the socket file stays; nothing listens: a crewd that was killed

	for _, tc := range []struct {
		name string
		args []string
		hint string
	}{
		{"no socket", []string{"runs", "--data", data, "--socket", filepath.Join(t.TempDir(), "crewd.sock")},
			"no crewd listens at "},
		{"nothing listening", []string{"runs", "--data", data, "--socket", refusing}, "no crewd listens at "},
		{"follow, no socket", []string{"import", "picrew", t.TempDir(), "--follow", "--data", data, "--socket",
			filepath.Join(t.TempDir(), "crewd.sock")}, "no crewd listens at "},
		{"no token", []string{"runs", "--data", t.TempDir()}, "--data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := crewctl(t, dialBroker, tc.args...)
			require.Equal(t, exitOpen, r.code, r.err)
			require.Contains(t, r.err, "\n  ", "a hint under the error")
			require.Contains(t, r.err, tc.hint)
		})
	}
}
