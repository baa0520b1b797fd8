package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// fullDisk is stdout redirected to a file on a full disk: it takes the first room bytes, then fails every write
// with ENOSPC.
type fullDisk struct {
	room int
	got  bytes.Buffer
}

func (f *fullDisk) Write(p []byte) (int, error) {
	n := min(len(p), max(f.room-f.got.Len(), 0))
	f.got.Write(p[:n])
	if n < len(p) {
		return n, syscall.ENOSPC
	}
	return n, nil
}

// crewctlInto runs the command tree in-process with stdout on out.
func crewctlInto(out *fullDisk, args ...string) result {
	var errb bytes.Buffer
	dial := func(context.Context, string, string) (Broker, error) { return nil, syscall.ENOENT }
	code := (&app{io: stdio{out: out, err: &errb}, dial: dial}).run(context.Background(), args)
	return result{code: code, out: out.got.String(), err: errb.String()}
}

// TestOutputThatCannotBeWrittenFails: a command whose output does not reach stdout (a report redirected to a file
// on a full disk) does not exit 0 as if it had: the lines it wrote for a person are checked as the JSON ones are.
func TestOutputThatCannotBeWrittenFails(t *testing.T) {
	data := scenarioData(t)
	for name, argv := range map[string][]string{
		"replay":      {"replay", "--data", data},
		"replay json": {"replay", "--data", data, "--json"},
		"verify":      {"verify", "--data", data},
	} {
		t.Run(name, func(t *testing.T) {
			whole := crewctlInto(&fullDisk{room: 1 << 30}, argv...)
			require.Equal(t, exitOK, whole.code, whole.err)
			r := crewctlInto(&fullDisk{room: len(whole.out) / 2}, argv...)
			require.Equal(t, exitProblem, r.code, "stderr: %s", r.err)
			require.Contains(t, r.err, syscall.ENOSPC.Error())
		})
	}
}

// TestTokenNotShownIsRevoked: a read-only token is shown once; one whose printing failed (stdout on a full disk) is
// revoked, not left valid with no one holding it, and the command fails saying so.
func TestTokenNotShownIsRevoked(t *testing.T) {
	for _, json := range []bool{false, true} {
		data := filepath.Join(t.TempDir(), "data")
		argv := []string{"token", "create", "--read-only", "--data", data}
		if json {
			argv = append(argv, "--json")
		}
		r := crewctlInto(&fullDisk{room: 0}, argv...)
		require.Equal(t, exitProblem, r.code, "json %v: %s", json, r.err)
		require.Contains(t, r.err, syscall.ENOSPC.Error())
		require.Contains(t, r.err, "revoked")
		ts, err := daemon.ListReadOnlyTokens(data)
		require.NoError(t, err)
		require.Empty(t, ts, "json %v: the token no one was shown is not left valid", json)
	}
}

// TestProgressSeesTheTerminalBehindTheOutputCheck: run puts stdout behind output, which keeps its write errors; the
// progress bar, shown only when stdout and stderr are terminals, still sees the terminal behind it.
func TestProgressSeesTheTerminalBehindTheOutputCheck(t *testing.T) {
	tty, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0) // NB: a character device, as a terminal is
	require.NoError(t, err)
	defer tty.Close()
	require.True(t, isTerminal(tty))
	dial := func(context.Context, string, string) (Broker, error) { return nil, syscall.ENOENT }
	a := &app{io: stdio{out: tty, err: tty}, dial: dial}
	require.Equal(t, exitOK, a.run(context.Background(), []string{"verify", "--data", scenarioData(t)}))
	require.IsType(t, &output{}, a.io.out, "the commands write through output")
	require.True(t, newProgress(a.io, "verify").enabled, "stdout and stderr are terminals")
}
