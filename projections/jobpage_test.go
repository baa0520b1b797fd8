package projections

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// jobOfCalls is a state with run R's job J of n calls under its lease, every other one completed.
func jobOfCalls(n int) *State { return fold(jobHistory(n).evs) }

// jobHistory is jobOfCalls' history.
func jobHistory(n int) *history {
	h := &history{}
	fixture(h, 0, true)
	h.add(runR, events.TypeJobCreated, &events.JobCreated{JobID: "J", TaskID: taskP, Tools: []string{"read", "write"},
		Fingerprints: []string{"f-read", "f-write"}, Callables: []string{"mgr:read", ""}, ReadOnly: []string{"read"},
		ManifestDigest: "digest"})
	h.add(runR, events.TypeLeaseOpened, &events.LeaseOpened{JobID: "J", Generation: 1, RootToolCallID: "root",
		Mode: "start"})
	for i := range n {
		id := fmt.Sprintf("c%05d", i)
		h.add(runR, events.TypeProxyRequested, &events.ProxyRequested{JobID: "J", RequestID: id, Generation: 1,
			Tool: "read", ArgsBytes: int64(i)})
		if i%2 == 0 {
			h.add(runR, events.TypeProxyCompleted, &events.ProxyCompleted{JobID: "J", RequestID: id, Generation: 1,
				CurrentGeneration: 1})
		}
	}
	return h
}

// TestJobPage: a page of a job's calls is the slice of them Job's copy holds, beside the job's own fields, for
// every from and limit (past the last call: none, and a limit that would overflow from+limit); the page and the
// fields are copies, and changing them changes no later answer.
func TestJobPage(t *testing.T) {
	const n = 7
	s := jobOfCalls(n)
	whole, ok := s.Job(runR, "J")
	require.True(t, ok)
	require.Len(t, whole.Requests, n)
	fields := whole
	fields.Requests, fields.seen, fields.grant, fields.ro = nil, nil, nil, nil
	for _, limit := range []int{0, 1, 3, n, n + 1, math.MaxInt} {
		for from := -1; from <= n+2; from++ {
			pg, ok, err := s.JobPage(runR, "J", from, limit)
			require.NoError(t, err)
			require.True(t, ok)
			first := min(max(from, 0), n)
			end := first + min(limit, n-first)
			require.Equal(t, fields, pg.Job, "from %d limit %d", from, limit)
			require.Equal(t, whole.Requests[first:end], pg.Requests, "from %d limit %d", from, limit)
			require.NotNil(t, pg.Requests, "an empty page is a list")
			require.Equal(t, n, pg.Seen)
			require.Equal(t, end, pg.Next)

			for _, q := range pg.Requests {
				q.State, q.RequestID = "scribbled", "scribbled"
			}
			for i := range pg.Job.Tools {
				pg.Job.Tools[i], pg.Job.Fingerprints[i], pg.Job.Callables[i] = "scribbled", "scribbled", "scribbled"
			}
			pg.Job.ReadOnly[0] = "scribbled"
			again, ok, err := s.JobPage(runR, "J", from, limit)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, fields, again.Job, "nothing of a page is the state's")
			require.Equal(t, whole.Requests[first:end], again.Requests, "nothing of a page is the state's")
		}
	}
	_, ok, err := s.JobPage(runR, "nope", 0, 1)
	require.NoError(t, err)
	require.False(t, ok, "no such job")
	_, ok, err = s.JobPage("nope", "J", 0, 1)
	require.NoError(t, err)
	require.False(t, ok, "no such run")
}

// TestJobPageOfAColdRun: a cold run's job answers its pages as the hot run's does (the run read back is the
// cold store's copy, which JobPage walks as it walks a hot one).
func TestJobPageOfAColdRun(t *testing.T) {
	const n = 9
	h := jobHistory(n)
	h.add(runR, events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
	hot := fold(h.evs)
	cold, _, err := LoadTiered(appendHistory(t, h.evs), Tiering{Now: h.evs[len(h.evs)-1].UnixMilli() + 1})
	require.NoError(t, err)
	require.True(t, cold.IsCold(runR))
	for _, from := range []int{0, 4, n - 1, n, n + 1} {
		for _, limit := range []int{1, 4, n} {
			want, ok, err := hot.JobPage(runR, "J", from, limit)
			require.NoError(t, err)
			require.True(t, ok)
			got, ok, err := cold.JobPage(runR, "J", from, limit)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, want, got, "from %d limit %d", from, limit)
		}
	}
	_, ok, err := cold.JobPage(runR, "nope", 0, 1)
	require.NoError(t, err)
	require.False(t, ok)
}

// TestJobPageCopiesThePageAlone: a page of 50 from the middle of a job's calls allocates as much for a job of 200
// calls as for one of 20,000 (a copy of the whole job allocates once a call, and for its lookup maps), and no more
// for a page of 50 than for one of 1: its calls are copied together.
func TestJobPageCopiesThePageAlone(t *testing.T) {
	const limit = 50
	allocs := func(n, limit int) float64 {
		s := jobOfCalls(n)
		pg, ok, err := s.JobPage(runR, "J", n/2, limit)
		require.NoError(t, err)
		require.True(t, ok)
		require.Len(t, pg.Requests, limit)
		return testing.AllocsPerRun(10, func() { s.JobPage(runR, "J", n/2, limit) })
	}
	// NB: within a few, not equal: AllocsPerRun counts every goroutine's allocations, and under the race detector
	// the count moves between runs. A copy of every call would allocate thousands more.
	few, many := allocs(200, limit), allocs(20_000, limit)
	require.LessOrEqual(t, many, few+4, "the allocations of a page do not grow with the job's calls")
	require.LessOrEqual(t, many, allocs(200, 1)+4, "nor with the page's")
}
