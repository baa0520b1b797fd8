package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog/stagingtest"
)

// killedEnv, set to a JSON killedRun, has the test binary run crewctl instead of the tests, and stop it at a point
// (killableCrewctl).
const killedEnv = "CREWCTL_TEST_KILLED"

// killedRun is a crewctl run to kill: its arguments, and the point (reached) to kill it at.
type killedRun struct {
	Args []string `json:"args"`
	At   string   `json:"at"`
}

// killableCrewctl runs crewctl as spec (JSON killedRun) says and, once it reaches the point named, waits to be killed
// (stagingtest.Staged).
func killableCrewctl(spec string) {
	var k killedRun
	if err := json.Unmarshal([]byte(spec), &k); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	reached = func(point string) {
		if point == k.At {
			stagingtest.Staged()
		}
	}
	os.Exit(run(context.Background(), k.Args, stdio{out: io.Discard, err: os.Stderr}, nil))
}

// killedWhileStaging runs crewctl with args in a process of its own and kills it (SIGKILL, as a crash or kill -9)
// once it has built its copy in a staging directory, before it moves the copy into place.
func killedWhileStaging(t *testing.T, args ...string) {
	t.Helper()
	killedAt(t, atStaged, args...)
}

// killedAt runs crewctl with args in a process of its own and kills it (SIGKILL) at the point at (reached).
func killedAt(t *testing.T, at string, args ...string) {
	t.Helper()
	k, err := json.Marshal(killedRun{Args: args, At: at})
	require.NoError(t, err)
	stagingtest.Kill(t, killedEnv+"="+string(k))
}
