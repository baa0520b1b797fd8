package broker

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// jobState is a state with run runR and its job J of n calls (n ≥ 2): the first half under a lease since cleared
// (its root revoked, its live calls aborted), the rest under a second lease, every third of them completed.
func jobState(n int) *projections.State {
	st := projections.New()
	var pos uint64
	add := func(typ string, p any) {
		pos++
		projections.Apply(st, events.Event{Position: pos, Stream: runR, StreamVersion: pos, Type: typ,
			SchemaVersion: events.SchemaVersion(typ), Time: int64(pos) * 1e9, Payload: p})
	}
	add(events.TypeRunCreated, &events.RunCreated{Team: "t", Workflow: "default", Goal: "g", Cwd: "/w"})
	add(events.TypeJobCreated, &events.JobCreated{JobID: "J", TaskID: taskP, Tools: []string{"read", "write"},
		Fingerprints: []string{"f-read", "f-write"}, Callables: []string{"mgr:read", ""}, ReadOnly: []string{"read"},
		ManifestBytes: 100, ManifestDigest: "digest"})
	call := func(i int, gen int64) {
		add(events.TypeProxyRequested, &events.ProxyRequested{JobID: "J", RequestID: fmt.Sprintf("c%05d", i),
			Generation: gen, Tool: "read", ArgsBytes: int64(i)})
	}
	lease := func(gen int64, root, mode string) {
		add(events.TypeLeaseOpened, &events.LeaseOpened{JobID: "J", Generation: gen, RootToolCallID: root, Mode: mode})
	}
	lease(1, "root-1", "start")
	for i := range n / 2 {
		call(i, 1)
	}
	add(events.TypeLeaseCleared, &events.LeaseCleared{JobID: "J", Generation: 1, RootToolCallID: "root-1"})
	lease(2, "root-2", "resume")
	for i := n / 2; i < n; i++ {
		call(i, 2)
		if i%3 == 0 {
			add(events.TypeProxyCompleted, &events.ProxyCompleted{JobID: "J", RequestID: fmt.Sprintf("c%05d", i),
				Generation: 2, CurrentGeneration: 2})
		}
	}
	return st
}

// TestJobDetailOfPages: query.job's answer (and the dashboard's job route's, which reads it too) for the first,
// a middle and the last page, a page past the last call and one as large as the job, is the job's fields with that
// slice of its calls, as cut from a copy of the whole job; the answer shares nothing with the state.
func TestJobDetailOfPages(t *testing.T) {
	const n = 25
	st := jobState(n)
	jobs := st.Jobs(runR)
	require.Len(t, jobs, 1)
	whole := jobs[0]
	require.Len(t, whole.Requests, n)

	for _, tc := range []struct {
		name           string
		from, limit    int
		first, end     int
		wantNextCursor string
	}{
		{name: "first", from: 0, limit: 10, first: 0, end: 10, wantNextCursor: "10"},
		{name: "middle", from: 10, limit: 10, first: 10, end: 20, wantNextCursor: "20"},
		{name: "last", from: 20, limit: 10, first: 20, end: 25},
		{name: "last-exact", from: 15, limit: 10, first: 15, end: 25},
		{name: "at-the-end", from: 25, limit: 10, first: 25, end: 25},
		{name: "past-the-end", from: 40, limit: 10, first: 25, end: 25},
		{name: "whole", from: 0, limit: 500, first: 0, end: 25},
		{name: "one", from: 24, limit: 1, first: 24, end: 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := JobDetailOf(st, runR, "J", tc.from, tc.limit)
			require.NoError(t, err)
			require.True(t, ok)
			want := JobDetail{
				JobSummary: JobSummary{JobID: "J", TaskID: taskP, Status: whole.Status, Generation: 2,
					LeaseActive: true, RootToolCallID: "root-2", InFlight: whole.InFlight, Seen: n, Tools: 2,
					ManifestDigest: "digest", CreatedAt: whole.CreatedAt, UpdatedAt: whole.UpdatedAt},
				Grant: []GrantedTool{{Name: "read", Fingerprint: "f-read", Callable: "mgr:read", ReadOnly: true},
					{Name: "write", Fingerprint: "f-write"}},
				Requests:     append([]*projections.ProxyRequest{}, whole.Requests[tc.first:tc.end]...),
				NextCursor:   tc.wantNextCursor,
				RevokedRoots: 1,
			}
			require.Equal(t, want, got)
			wantJSON, err := json.Marshal(want)
			require.NoError(t, err)
			gotJSON, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, string(wantJSON), string(gotJSON), "the same answer on the wire")
			if tc.first == tc.end {
				require.Equal(t, "[]", string(mustJSON(t, got.Requests)), "an empty page is a list, not null")
			}

			// Nothing of the answer is the state's: changing it changes no later answer.
			for _, q := range got.Requests {
				q.State, q.RequestID = "scribbled", "scribbled"
			}
			for i := range got.Grant {
				got.Grant[i].Name = "scribbled"
			}
			again, ok, err := JobDetailOf(st, runR, "J", tc.from, tc.limit)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, want, again)
		})
	}

	_, ok, err := JobDetailOf(st, runR, "nope", 0, 10)
	require.NoError(t, err)
	require.False(t, ok, "no such job")
	_, ok, err = JobDetailOf(st, "nope", "J", 0, 10)
	require.NoError(t, err)
	require.False(t, ok, "no such run")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestJobDetailOfCopiesThePageAlone: a page of a job's calls is read under the state's lock, which holds up the
// publication of every run, and a manager may ask for it again and again; it allocates for the page and the job's
// own fields, the same for a job of a few hundred calls as for one of thousands, never for a copy of every call.
// (Both pages start past the 100th call, so their cursors are formatted alike.)
func TestJobDetailOfCopiesThePageAlone(t *testing.T) {
	const limit = 50
	allocs := func(n int) float64 {
		st := jobState(n)
		d, ok, err := JobDetailOf(st, runR, "J", n/2, limit)
		require.NoError(t, err)
		require.True(t, ok)
		require.Len(t, d.Requests, limit)
		require.Equal(t, strconv.Itoa(n/2+limit), d.NextCursor)
		return testing.AllocsPerRun(10, func() { JobDetailOf(st, runR, "J", n/2, limit) })
	}
	// NB: within a few, not equal: AllocsPerRun counts every goroutine's allocations, and the package runs under the
	// race detector in CI. A copy of every call would allocate thousands more (one a call, and the lookup maps).
	few, many := allocs(400), allocs(8000)
	require.LessOrEqual(t, many, few+4, "the allocations of a page do not grow with the job's calls")
	require.Less(t, many, float64(limit/2), "nor with the page's: its calls are copied together")
}
