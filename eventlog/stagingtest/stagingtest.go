// Package stagingtest tests copies built in a staging directory and moved into place once whole: it kills a process
// while its copy is staged, as a crash or kill -9 would, and lists what is left.
//
// The process killed is the test binary run again: its TestMain reads the environment variable a test sets and runs
// the operation instead of the tests, and the operation's hook calls Staged once its copy is staged.
package stagingtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

const staged = "staged\n"

// Staged says that the copy is staged and waits to be killed; a hook in the process Kill started calls it.
func Staged() {
	fmt.Print(staged)
	select {}
}

// Kill runs the test binary again with the environment variable env (NAME=value) set, waits until it calls Staged,
// and kills it (SIGKILL).
func Kill(t testing.TB, env string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // NB: stderr is read only once the process is waited for: until then it is being written
		require.NoError(t, err, "ended before its copy was staged: %s", stderr.String())
	}
	require.Equal(t, staged, line)
	require.NoError(t, cmd.Process.Kill())
	var exit *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &exit, "killed: %s", stderr.String())
	status, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok, "the wait status of %T", exit.Sys())
	require.True(t, status.Signaled(), "ended by a signal, not %v: %s", exit, stderr.String())
	require.Equal(t, syscall.SIGKILL, status.Signal())
}

// Names names the entries of dir.
func Names(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}
