package commands

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// workerEndWorld is a running run R whose task W (its credential issued, the
// secret secret-1) works job J under lease 1 (root call-1): call r1
// revalidated and executing, r2 admitted. Task X is another worker's.
func workerEndWorld(t *testing.T, started bool, config ...string) *scenarioWorld {
	t.Helper()
	w := newScenarioWorld(t)
	if len(config) > 0 {
		require.NoError(t, w.config(config))
	}
	given := func(typ, payload string) { require.NoError(t, w.given(typ, "R", payload)) }
	given(events.TypeRunCreated, `{"team":"t","goal":"g","cwd":"/w"}`)
	given(events.TypeRunRunning, `{}`)
	given(events.TypeTaskCreated,
		`{"taskId":"W","role":"engineer","agent":"engineer","title":"job worker","cwd":"/w","dependsOn":[]}`)
	given(events.TypeTaskCreated,
		`{"taskId":"X","role":"engineer","agent":"engineer","title":"other","cwd":"/w","dependsOn":[]}`)
	given(events.TypeTaskStarted, `{"taskId":"X"}`)
	if started {
		given(events.TypeTaskStarted, `{"taskId":"W"}`)
	}
	mustDo(t, w, events.RoleOrchestrator, "", "credential.issue", `{"taskId":"W"}`)
	mustDo(t, w, events.RoleOrchestrator, "", "credential.issue", `{"taskId":"X"}`)
	mustDo(t, w, events.RoleOrchestrator, "", "job.create", `{"jobId":"J","taskId":"W","tools":`+string(jobGrant)+`}`)
	mustDo(t, w, events.RoleOrchestrator, "", "lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"call-1"}`)
	mustDo(t, w, events.RoleWorker, "W", "proxy.request",
		`{"jobId":"J","requestId":"r1","nonce":"secret-3","tool":"write","args":{}}`)
	mustDo(t, w, events.RoleOrchestrator, "", "manifest.revalidate",
		`{"jobId":"J","requestId":"r1","tools":`+string(jobGrant)+`}`)
	mustDo(t, w, events.RoleWorker, "W", "proxy.request",
		`{"jobId":"J","requestId":"r2","nonce":"secret-3","tool":"read","args":{}}`)
	j, _ := w.s.JobHeader("R", "J")
	require.True(t, j.LeaseActive)
	require.Equal(t, 2, j.InFlight)
	require.True(t, authorized(t, w.s, "R", "call-1/c", "write").Allowed)
	return w
}

func mustDo(t *testing.T, w *scenarioWorld, role, taskID, method, params string) scenarioOutcome {
	t.Helper()
	out, err := w.when(role, "R", taskID, method, json.RawMessage(params))
	require.NoError(t, err)
	require.Nil(t, out.err, "%s %s", method, params)
	return out
}

// TestWorkerEndClearsLease: when a job's worker ends — its task completes,
// fails, needs attention, is cancelled or skipped, its run ends, its
// credential is revoked — its lease is cleared in the same batch: no call of
// the lease is revalidated, executed (its result is fenced) or counted as a
// granted nested call afterwards, its in-flight calls no longer hold the
// job's capacity, its root is revoked, and no lease is opened for the job
// again. Another worker's end leaves the lease alone.
func TestWorkerEndClearsLease(t *testing.T) {
	cases := []struct {
		name    string
		started bool
		method  string
		params  string
		// openRefusal is lease.open's refusal reason afterwards.
		openRefusal string
	}{
		{"task completed", true, "task.transition", `{"taskId":"W","to":"completed"}`, LeaseReasonWorkerEnded},
		{"task failed", true, "task.transition", `{"taskId":"W","to":"failed","error":"boom"}`,
			LeaseReasonWorkerEnded},
		{"task needs attention", true, "task.transition", `{"taskId":"W","to":"needs_attention","error":"stuck"}`,
			LeaseReasonWorkerEnded},
		{"task cancelled", true, "task.transition", `{"taskId":"W","to":"cancelled","reason":"stop"}`,
			LeaseReasonWorkerEnded},
		{"task skipped", false, "task.transition", `{"taskId":"W","to":"skipped","reason":"not needed"}`,
			LeaseReasonWorkerEnded},
		{"run cancelled", true, "run.transition", `{"to":"cancelled"}`, "run-terminal"},
		{"run failed", true, "run.transition", `{"to":"failed"}`, "run-terminal"},
		{"credential revoked", true, "credential.revoke", `{"taskId":"W","reason":"compromised"}`,
			LeaseReasonWorkerEnded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := workerEndWorld(t, tc.started)
			ended := mustDo(t, w, events.RoleOrchestrator, "", tc.method, tc.params).events

			// The capacity the lease held is free: no call in flight, both aborted, the root revoked.
			j, _ := w.s.Job("R", "J")
			require.False(t, j.LeaseActive)
			require.Zero(t, j.InFlight)
			for _, q := range j.Requests {
				require.Equal(t, projections.ProxyAborted, q.State, q.RequestID)
			}
			require.Equal(t, []string{"call-1"}, w.s.RevokedRootsOf("R").Roots)

			// No call of the lease is revalidated or executed.
			out, err := w.when(events.RoleOrchestrator, "R", "", "manifest.revalidate",
				json.RawMessage(`{"jobId":"J","requestId":"r2","tools":`+string(jobGrant)+`}`))
			require.NoError(t, err)
			require.NotNil(t, out.err, "r2 is not revalidated")
			require.Equal(t, CodeBadParams, out.err.Code)
			require.Empty(t, out.events)
			out = mustDo(t, w, events.RoleOrchestrator, "", "proxy.complete",
				`{"jobId":"J","requestId":"r1","nonce":"secret-3","result":{"content":[]}}`)
			require.Len(t, out.events, 1)
			require.True(t, out.events[0].Payload.(*events.ProxyCompleted).Fenced,
				"r1's result is fenced, never delivered")
			q, _ := w.s.ProxyRequestOf("R", "J", "r1")
			require.Equal(t, projections.ProxyAborted, q.State)
			require.Zero(t, q.ResultPosition)

			// Nested calls under its root are no longer granted.
			for _, parent := range []string{"call-1", "call-1/c"} {
				a := authorized(t, w.s, "R", parent, "write")
				require.False(t, a.Allowed, parent)
				require.Equal(t, projections.AuthRevokedRoot, a.Reason, parent)
			}

			// And no lease is opened for the ended worker.
			mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"paused"}`)
			out, err = w.when(events.RoleOrchestrator, "R", "", "lease.open",
				json.RawMessage(`{"jobId":"J","mode":"continue","rootToolCallId":"call-2","tools":`+
					string(jobGrant)+`}`))
			require.NoError(t, err)
			require.NotNil(t, out.err, "a lease for an ended worker")
			require.Equal(t, tc.openRefusal, out.err.Reason)
			for _, ev := range out.events {
				require.NotEqual(t, events.TypeLeaseOpened, ev.Type)
			}
			h, _ := w.s.JobHeader("R", "J")
			require.False(t, h.LeaseActive)
			// It is one lease.cleared, right after the event that ended the worker.
			var cleared *events.LeaseCleared
			for i, ev := range ended {
				if p, ok := ev.Payload.(*events.LeaseCleared); ok {
					require.Nil(t, cleared, "the lease is cleared once")
					require.Positive(t, i, "the clearing follows the event that ended the worker")
					_, _, ok := EndedWorker(ended[i-1])
					require.True(t, ok, "the clearing follows the event that ended the worker, not %s",
						ended[i-1].Type)
					cleared = p
				}
			}
			require.NotNil(t, cleared, "%s clears the lease of its worker's job", tc.name)
			require.Equal(t, events.LeaseCleared{JobID: "J", Generation: 1, RootToolCallID: "call-1",
				Reason: LeaseReasonWorkerEnded, Aborted: 2}, *cleared)

			require.NoError(t, w.checkInvariants())
			require.NoError(t, w.rebuild(0))
		})
	}

	t.Run("a full revoked-root set", func(t *testing.T) {
		// The clearing is lease.clear's: when the run's set is full it
		// saturates, and every nested call is blocked until job.roots_reset.
		w := workerEndWorld(t, true, "revokedRootLimit=1")
		mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"paused"}`)
		mustDo(t, w, events.RoleOrchestrator, "", "lease.open",
			`{"jobId":"J","mode":"continue","rootToolCallId":"call-2","tools":`+string(jobGrant)+`}`)
		mustDo(t, w, events.RoleWorker, "W", "proxy.request",
			`{"jobId":"J","requestId":"r3","nonce":"secret-3","tool":"read","args":{}}`)
		require.Equal(t, []string{"call-1"}, w.s.RevokedRootsOf("R").Roots)
		ended := mustDo(t, w, events.RoleOrchestrator, "", "task.transition",
			`{"taskId":"W","to":"completed"}`).events
		require.Len(t, ended, 2)
		require.Equal(t, &events.LeaseCleared{JobID: "J", Generation: 2, RootToolCallID: "call-2",
			Reason: LeaseReasonWorkerEnded, Aborted: 1, Saturated: true}, ended[1].Payload)
		j, _ := w.s.JobHeader("R", "J")
		require.False(t, j.LeaseActive)
		require.Zero(t, j.InFlight)
		require.Equal(t, projections.RevokedRoots{Saturated: true}, w.s.RevokedRootsOf("R"))
		require.Equal(t, projections.AuthSaturated, authorized(t, w.s, "R", "call-2/c", "read").Reason)
		require.NoError(t, w.rebuild(0))
	})

	t.Run("another worker's end", func(t *testing.T) {
		w := workerEndWorld(t, true)
		for _, params := range []string{`{"taskId":"X","reason":"r"}`} {
			out := mustDo(t, w, events.RoleOrchestrator, "", "credential.revoke", params)
			require.Len(t, out.events, 1)
		}
		out := mustDo(t, w, events.RoleOrchestrator, "", "task.transition", `{"taskId":"X","to":"completed"}`)
		require.Len(t, out.events, 1)
		j, _ := w.s.JobHeader("R", "J")
		require.True(t, j.LeaseActive)
		require.Equal(t, 2, j.InFlight)
		require.True(t, authorized(t, w.s, "R", "call-1/c", "write").Allowed)
		mustDo(t, w, events.RoleOrchestrator, "", "manifest.revalidate",
			`{"jobId":"J","requestId":"r2","tools":`+string(jobGrant)+`}`)
	})

	t.Run("a worker whose credential is issued again", func(t *testing.T) {
		// A re-issue ends the old secret, not the worker: the task goes on.
		w := workerEndWorld(t, true)
		out := mustDo(t, w, events.RoleOrchestrator, "", "credential.issue", `{"taskId":"W"}`)
		require.Len(t, out.events, 1)
		j, _ := w.s.JobHeader("R", "J")
		require.True(t, j.LeaseActive)
	})
}

// TestJobCreateRefusesAnEndedWorker: a job for a task whose worker has ended
// (its task terminal, or its credential revoked) could never get a lease, and
// would hold the run's one live-job place until the manager moved it; it is
// refused worker-ended and recorded (job.rejected), like lease.open's
// refusal. A live worker still gets one.
func TestJobCreateRefusesAnEndedWorker(t *testing.T) {
	for _, tc := range []struct{ name, method, params string }{
		{"task completed", "task.transition", `{"taskId":"X","to":"completed"}`},
		{"task cancelled", "task.transition", `{"taskId":"X","to":"cancelled","reason":"stop"}`},
		{"credential revoked", "credential.revoke", `{"taskId":"X","reason":"compromised"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workerEndWorld(t, true)
			mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"cancelled"}`)
			mustDo(t, w, events.RoleOrchestrator, "", tc.method, tc.params)
			out, err := w.when(events.RoleOrchestrator, "R", "", "job.create",
				json.RawMessage(`{"jobId":"K","taskId":"X","tools":`+string(jobGrant)+`}`))
			require.NoError(t, err)
			require.NotNil(t, out.err, "a job for an ended worker")
			require.Equal(t, CodePolicyDenied, out.err.Code)
			require.Equal(t, LeaseReasonWorkerEnded, out.err.Reason)
			require.Len(t, out.events, 1)
			p, ok := out.events[0].Payload.(*events.JobRejected)
			require.True(t, ok, "the refusal is recorded")
			require.Equal(t, events.JobRejected{JobID: "K", Op: "create", Reason: LeaseReasonWorkerEnded,
				Message: out.err.Message}, *p)
			_, exists := w.s.JobHeader("R", "K")
			require.False(t, exists)
			require.NoError(t, w.rebuild(0))
		})
	}

	t.Run("a live worker", func(t *testing.T) {
		w := workerEndWorld(t, true)
		mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"cancelled"}`)
		mustDo(t, w, events.RoleOrchestrator, "", "job.create",
			`{"jobId":"K","taskId":"X","tools":`+string(jobGrant)+`}`)
		_, exists := w.s.JobHeader("R", "K")
		require.True(t, exists)
	})
}

// authorized is s.Authorize, which reads nothing back from the log for these states (every run is hot).
func authorized(t testing.TB, s *projections.State, runID, parent, tool string) projections.Authorization {
	t.Helper()
	a, err := s.Authorize(runID, parent, tool)
	require.NoError(t, err)
	return a
}

// TestRetryClearsTheAttemptsLease: a retry (→ queued, from running, waiting or a terminal status) starts a new
// attempt of the task, and the broker ends the connections of the attempt before (Credential.Attempt): the lease
// that attempt's worker held is cleared in the retry's batch, as at a worker's end, so no call the ended attempt
// made is revalidated or executed, its capacity is freed and its root revoked. The job goes on with the new attempt
// only when the manager opens a new lease for it.
func TestRetryClearsTheAttemptsLease(t *testing.T) {
	for _, tc := range []struct{ name, params string }{
		{"retried while running", `{"taskId":"W","to":"queued","reason":"retry"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workerEndWorld(t, true)
			retried := mustDo(t, w, events.RoleOrchestrator, "", "task.transition", tc.params).events
			require.Len(t, retried, 2, "the retry, then the clearing of its attempt's lease")
			require.Equal(t, events.TypeTaskRetried, retried[0].Type)
			require.Equal(t, &events.LeaseCleared{JobID: "J", Generation: 1, RootToolCallID: "call-1",
				Reason: LeaseReasonWorkerEnded, Aborted: 2}, retried[1].Payload)
			j, _ := w.s.JobHeader("R", "J")
			require.False(t, j.LeaseActive)
			require.Zero(t, j.InFlight)
			require.Equal(t, projections.AuthRevokedRoot, authorized(t, w.s, "R", "call-1/c", "write").Reason)
			out := mustDo(t, w, events.RoleOrchestrator, "", "proxy.complete",
				`{"jobId":"J","requestId":"r1","nonce":"secret-3","result":{"content":[]}}`)
			require.True(t, out.events[0].Payload.(*events.ProxyCompleted).Fenced,
				"the ended attempt's call is fenced")

			// The new attempt is a live worker: the manager may continue the job with it, under a new lease.
			mustDo(t, w, events.RoleOrchestrator, "", "task.transition", `{"taskId":"W","to":"running"}`)
			mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"paused"}`)
			mustDo(t, w, events.RoleOrchestrator, "", "lease.open",
				`{"jobId":"J","mode":"continue","rootToolCallId":"call-2","tools":`+string(jobGrant)+`}`)
			require.NoError(t, w.checkInvariants())
			require.NoError(t, w.rebuild(0))
		})
	}
}
