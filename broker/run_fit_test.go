package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestRunsPastNamesTooLargeForAFrame: a run's cwd is up to 4,096 chars, its team and workflow up to 256, of any char:
// chars JSON writes in six bytes ('<', sent in one by the run.create) make the run read back larger than a frame of
// 4 KiB, or of 1 KiB, that its run.create fit in, its goal left out or not. query.run answered oversize-frame for it
// for good, and query.runs at it, no cursor passing it, so the admin read no later run. Such a run is sent without
// them too (empty, namesOmitted), every other field as it is; a run that fits is sent whole.
func TestRunsPastNamesTooLargeForAFrame(t *testing.T) {
	for _, tc := range []struct {
		frame, chars int
	}{{frame: wire.MaxFrameFloor, chars: 60}, {frame: 4096, chars: 250}} {
		t.Run(fmt.Sprint(tc.frame), func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: tc.frame}})
			f.seed()
			a := f.dial()
			a.helloAdmin()
			long := strings.Repeat("<", tc.chars)
			a.okUnescaped("run.create", map[string]any{"runId": "R02", "team": long, "workflow": long, "cwd": long,
				"goal": "g"})
			a.ok("run.create", map[string]any{"runId": "R03", "team": "t", "goal": "g", "cwd": "/w"})

			r := a.call("query.run", map[string]any{"runId": "R02"})
			require.Nil(t, r.Error)
			require.LessOrEqual(t, a.rd.FrameBytes(), tc.frame)
			var run map[string]any
			require.NoError(t, json.Unmarshal(r.Result, &run))
			require.Equal(t, true, run["namesOmitted"], "the names are left out, and it says so")
			require.Equal(t, "", run["cwd"])
			require.Equal(t, "", run["team"])
			require.Equal(t, "R02", run["runId"])
			require.Equal(t, "queued", run["status"])

			runs := everyItem(t, a, "query.runs", nil, "runs")
			require.Len(t, runs, 3, "every run is listed, those after R02 too")
			require.Equal(t, "R02", runs[1]["runId"])
			require.Equal(t, true, runs[1]["namesOmitted"])
			require.Equal(t, "R03", runs[2]["runId"])
			require.Equal(t, "/w", runs[2]["cwd"])
			require.NotContains(t, runs[2], "namesOmitted")
		})
	}
}
