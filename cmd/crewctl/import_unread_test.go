package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew"
)

// TestImportPicrewFailsWithARunLeftUnread: a run a file of which could not be read (a failing disk, a full descriptor
// table) is left out of the import, to be imported whole by a later one (picrew.Summary.Unread). import picrew said
// so only among the items skipped and exited 0, as after an import of every run, so a script that imports and moves
// on never ran it again. It exits 1, naming the runs, after the same report.
func TestImportPicrewFailsWithARunLeftUnread(t *testing.T) {
	sum := picrew.Summary{Runs: []picrew.RunSummary{{RunID: "team_b", Status: "completed"}}, Unread: []string{"team_a"},
		Skipped: []picrew.Skipped{{Run: "team_a", Path: "state/runs/team_a/events.jsonl", Reason: "unreadable: input/output error"}}}
	for _, asJSON := range []bool{false, true} {
		var out, errb bytes.Buffer
		a := &app{io: stdio{out: &out, err: &errb}, json: asJSON}
		err := a.printImport(sum, false)
		require.Error(t, err, "json %v", asJSON)
		require.Equal(t, exitProblem, codeOf(err))
		require.Contains(t, err.Error(), "team_a")
		if asJSON {
			var got picrew.Summary
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			require.Equal(t, sum.Unread, got.Unread)
		} else {
			require.Contains(t, out.String(), "skipped state/runs/team_a/events.jsonl: unreadable: input/output error")
		}
	}
	var out bytes.Buffer
	sum.Unread, sum.Skipped = nil, nil
	require.NoError(t, (&app{io: stdio{out: &out, err: &out}}).printImport(sum, false), "every run imported: exit 0")
}
