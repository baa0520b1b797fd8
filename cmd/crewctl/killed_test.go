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

// killedArgsEnv, set to a JSON array of arguments, has the test binary run crewctl with them instead of the tests,
// and stop it once it has built a copy in a staging directory (killableCrewctl).
const killedArgsEnv = "CREWCTL_TEST_KILLED_ARGS"

// killableCrewctl runs crewctl with the arguments argv (JSON) and, once it has built a copy in a staging directory,
// waits to be killed (stagingtest.Staged).
func killableCrewctl(argv string) {
	var args []string
	if err := json.Unmarshal([]byte(argv), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	staged = func(string) { stagingtest.Staged() }
	os.Exit(run(context.Background(), args, stdio{out: io.Discard, err: os.Stderr}, nil))
}

// killedWhileStaging runs crewctl with args in a process of its own and kills it (SIGKILL, as a crash or kill -9)
// once it has built its copy in a staging directory, before it moves the copy into place.
func killedWhileStaging(t *testing.T, args ...string) {
	t.Helper()
	argv, err := json.Marshal(args)
	require.NoError(t, err)
	stagingtest.Kill(t, killedArgsEnv+"="+string(argv))
}
