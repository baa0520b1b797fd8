package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// crewdEnv, set to a JSON list of arguments, has the test binary run crewd (daemon.Main) with them instead of the
// tests: a crewd process of its own, as an operator starts it on a data directory crewctl wrote.
const crewdEnv = "CREWCTL_TEST_CREWD"

// crewdMain runs crewd with the arguments args (JSON) and exits with its status.
func crewdMain(args string) {
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(daemon.Main(argv, os.Stdout, os.Stderr))
}

// crewdRun is how a crewd process started on a data directory ended.
type crewdRun struct {
	served bool // it printed its socket line (and was then stopped)
	code   int  // its exit status, when it did not serve
	stderr string
}

// startCrewdOn starts crewd in a process of its own on the data directory data and waits until it serves (then stops
// it) or exits.
func startCrewdOn(t *testing.T, data string) crewdRun {
	t.Helper()
	argv, err := json.Marshal([]string{"--data", data, "--socket", filepath.Join(brokertest.SocketDir(t), "crewd.sock"),
		"--http", "", "--min-free-mib", "0", "--log-level", "warn"})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crewdEnv+"="+string(argv), "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	served := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "crewd: socket ") {
				served <- true
				return
			}
		}
		served <- false
	}()
	var run crewdRun
	select {
	case run.served = <-served:
	case <-time.After(time.Minute): // a guard against a hung test, not a timing assertion
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		require.FailNow(t, "crewd neither served nor exited", stderr.String())
	}
	if run.served {
		require.NoError(t, cmd.Process.Kill())
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); errors.As(err, &exit) {
		run.code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	run.stderr = stderr.String()
	return run
}
