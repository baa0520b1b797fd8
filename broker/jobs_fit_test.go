package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestJobsPastAJobTooLargeForAFrame: in the smallest frame a daemon allows, a job whose summary does not fit in a
// frame — a root of 512 chars beside a jobId of 128 — is listed by query.jobs without its root (textsOmitted), so
// the jobs after it are read too, where query.jobs answered oversize-frame at it for good; a job that fits keeps its
// root.
func TestJobsPastAJobTooLargeForAFrame(t *testing.T) {
	frame := wire.MaxFrameFloor
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
	s := f.seed()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	long := "J1" + strings.Repeat("j", 126)
	roots := map[string]string{"J0": "root-0", long: strings.Repeat("r", 512), "J2": "root-2", "J3": "root-3"}
	ids := []string{"J0", long, "J2", "J3"}
	for _, id := range ids {
		o.ok("job.create", map[string]any{"jobId": id, "taskId": taskP, "tools": testGrant})
		o.ok("lease.open", map[string]any{"jobId": id, "mode": "start", "rootToolCallId": roots[id]})
		o.ok("job.transition", map[string]any{"jobId": id, "to": "cancelled"})
	}

	pages := pager{t: t, frame: frame}
	require.Equal(t, ids, pages.all(o, "query.jobs", nil, "jobs", "jobId"))
	for i, id := range ids {
		r := o.call("query.jobs", map[string]any{"cursor": fmt.Sprint(i), "limit": 1})
		require.Nil(t, r.Error, id)
		var res struct{ Jobs []map[string]any }
		require.NoError(t, json.Unmarshal(r.Result, &res))
		require.Len(t, res.Jobs, 1)
		j := res.Jobs[0]
		require.Equal(t, id, j["jobId"])
		if id == long {
			require.Equal(t, true, j["textsOmitted"], "the root is left out, and it says so")
			require.NotContains(t, j, "rootToolCallId")
		} else {
			require.NotContains(t, j, "textsOmitted")
			require.Equal(t, roots[id], j["rootToolCallId"])
		}
	}
}

// TestAJobsCallsPastAGrantTooLargeForAFrame: a job whose own fields leave no room beside them for one of its calls
// is answered by query.job without its root (textsOmitted) and, when that is not enough, without its grant too
// (grant null, grantOmitted true; tools still counts it), so its calls are read by following the cursor, every one
// once, each answer within the frame, where query.job answered oversize-frame at every page. A grant as large as
// the request that made it fits in a frame is larger than one in query.job: each tool is answered with its sha-256
// fingerprint. At the default frame the job is whole. The state is read once for the answer, not once each way of
// fitting it is tried.
func TestAJobsCallsPastAGrantTooLargeForAFrame(t *testing.T) {
	tools := func(n int) []any {
		grant := make([]any, n)
		for i := range grant {
			grant[i] = map[string]any{"name": fmt.Sprintf("t%02d", i), "label": "", "description": "", "callable": fmt.Sprintf("m:t%02d", i),
				"parameters": map[string]any{}, "sourceInfo": map[string]any{"path": "", "source": "", "scope": "user",
					"origin": "package"}}
		}
		return grant
	}
	for _, tc := range []struct {
		name                       string
		frame, tools               int
		root                       string
		textsOmitted, grantOmitted bool
	}{
		{name: "a long root in the smallest frame", frame: wire.MaxFrameFloor, tools: 2, root: strings.Repeat("r", 512),
			textsOmitted: true},
		{name: "a large grant in 4 KiB", frame: 4096, tools: 26, root: "root-1", textsOmitted: true, grantOmitted: true},
		{name: "both at the default frame", tools: 26, root: strings.Repeat("r", 512)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: tc.frame}})
			// NB: the hook is set before any connection reads it, and counts only while counting is on.
			var reads atomic.Int32
			var counting atomic.Bool
			f.srv.onRead = func() {
				if counting.Load() {
					reads.Add(1)
				}
			}
			s := f.seed()
			o, p := f.dial(), f.dial()
			o.hello(runR, events.OrchestratorKey, s.orch)
			p.hello(runR, taskP, s.p)
			job := "J" + strings.Repeat("j", 127)
			nonce := o.ok("job.create", map[string]any{"jobId": job, "taskId": taskP, "tools": tools(tc.tools)})["nonce"].(string)
			o.ok("lease.open", map[string]any{"jobId": job, "mode": "start", "rootToolCallId": tc.root})
			var calls []string
			for i := range 30 { // the proxy's in-flight limit is 32
				id := fmt.Sprintf("%02d-%s", i, strings.Repeat("r", 60))
				p.ok("proxy.request", map[string]any{"jobId": job, "requestId": id, "nonce": nonce, "tool": "t00"})
				calls = append(calls, id)
			}
			if tc.frame != 0 {
				pages := pager{t: t, frame: tc.frame}
				require.Equal(t, calls, pages.all(o, "query.job", map[string]any{"jobId": job, "limit": 500},
					"requests", "requestId"))
			}
			// NB: the job is read from the state once, whatever it takes to fit (its root, its grant left out).
			counting.Store(true)
			r := o.call("query.job", map[string]any{"jobId": job})
			counting.Store(false)
			require.Nil(t, r.Error)
			require.EqualValues(t, 1, reads.Load(), "reads of the state")
			var res map[string]any
			require.NoError(t, json.Unmarshal(r.Result, &res))
			require.NotEmpty(t, res["requests"])
			require.EqualValues(t, tc.tools, res["tools"])
			if tc.textsOmitted {
				require.Equal(t, true, res["textsOmitted"])
				require.NotContains(t, res, "rootToolCallId")
			} else {
				require.NotContains(t, res, "textsOmitted")
				require.Equal(t, tc.root, res["rootToolCallId"])
			}
			if tc.grantOmitted {
				require.Nil(t, res["grant"])
				require.Equal(t, true, res["grantOmitted"])
			} else {
				require.Len(t, res["grant"], tc.tools)
				require.NotContains(t, res, "grantOmitted")
			}
		})
	}
}

// TestAJobsCallTooLargeForAFrameWithoutItsRootAndGrant: a call that does not fit in a frame beside the job's fields
// even without its root and grant (a requestId of 128 chars JSON writes in six bytes each, recorded under a larger
// --max-frame and read in the smallest) is answered oversize-frame, as docs/protocol.md says, not a page of no call.
func TestAJobsCallTooLargeForAFrameWithoutItsRootAndGrant(t *testing.T) {
	fs := vfs.NewMem()
	f := newFixture(t, fixtureOpts{fs: fs})
	s := f.seed()
	o, p := f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)
	job := "J" + strings.Repeat("j", 127)
	nonce := o.ok("job.create", map[string]any{"jobId": job, "taskId": taskP, "tools": testGrant})["nonce"].(string)
	o.ok("lease.open", map[string]any{"jobId": job, "mode": "start", "rootToolCallId": strings.Repeat("r", 512)})
	p.okUnescaped("proxy.request", map[string]any{"jobId": job, "requestId": strings.Repeat("<", 128), "nonce": nonce,
		"tool": "read"})
	f.close()

	g := newFixture(t, fixtureOpts{fs: fs, opts: Options{MaxFrame: wire.MaxFrameFloor}})
	o = g.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	r := o.call("query.job", map[string]any{"jobId": job})
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeOversizeFrame, r.Error.Code)
}
