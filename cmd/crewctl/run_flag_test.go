package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestARunGivenAsAnArgumentIsToldToBeRun: tasks, jobs and show run take the run as an argument, events and replay
// as --run; the run typed as an argument to the latter, as to the former, is a usage error that names --run, not
// a bare count of arguments that leaves the operator to guess what was meant.
func TestARunGivenAsAnArgumentIsToldToBeRun(t *testing.T) {
	for _, args := range [][]string{
		{"events", "team_1"},
		{"events", "team_1", "--follow"},
		{"replay", "team_1"},
		{"replay", "team_1", "--explain"},
	} {
		t.Run(args[0]+" "+args[len(args)-1], func(t *testing.T) {
			r := crewctl(t, nil, append(args, "--data", t.TempDir())...)
			require.Equal(t, exitUsage, r.code, r.err)
			require.Contains(t, r.err, "--run team_1", "the error shows the command as it should have been typed")
		})
	}
}
