package commands

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The broker checks a credential before it hands a request on; the writer
// checks it again against the state it decides on, so a command of a
// credential that ended in between (revoked, its task or run over) is
// answered a *CredentialEndedError and neither decided nor recorded.
func TestACommandOfAnEndedCredentialIsNotDecided(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	orchDigest := strings.Repeat("cd", 32)
	f.do(&RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w", OrchestratorDigest: orchDigest})
	f.do(&RunTransition{RunID: "R", To: "running"})
	for _, task := range []string{"T1", "T2", "T3"} {
		f.do(&TaskCreate{RunID: "R", TaskID: task, Role: "executor", Agent: "a", Title: "t", Cwd: "/w"})
		f.do(&TaskTransition{RunID: "R", TaskID: task, To: "running"})
		f.do(&CredentialIssue{RunID: "R", TaskID: task, Digest: fxDigest})
	}
	workerOf := func(task string) *Credential {
		return &Credential{RunID: "R", Key: task, Digest: fxDigest, TaskID: task}
	}
	orch := &Credential{RunID: "R", Key: events.OrchestratorKey, Digest: orchDigest}
	sent := 0
	send := func(c *Credential) error {
		t.Helper()
		sent++
		principal, actor, from := events.OrchestratorPrincipal("R"), events.Actor{Role: events.RoleOrchestrator}, ""
		if c.TaskID != "" {
			principal, actor, from = events.WorkerPrincipal("R", c.TaskID),
				events.Actor{Role: events.RoleWorker, TaskID: c.TaskID}, c.TaskID
		}
		before, _ := f.log.Head()
		r, err := f.eng.Submit(context.Background(),
			Request{Principal: principal, CommandID: "c" + strconv.Itoa(sent), Actor: actor,
				Command: &MessageSend{RunID: "R", FromTask: from, To: []string{"T3"}, Body: "hi"}, Credential: c})
		if err != nil {
			after, _ := f.log.Head()
			require.Equal(t, before, after, "a refused command recorded something")
			return err
		}
		require.Nil(t, r.Rejected)
		return nil
	}
	ended := func(t *testing.T, err error, want CredentialEnd) {
		t.Helper()
		var e *CredentialEndedError
		require.ErrorAs(t, err, &e)
		require.Equal(t, want, e.End)
	}

	require.NoError(t, send(workerOf("T1")))
	require.NoError(t, send(orch))
	wrong := workerOf("T1")
	wrong.Digest = strings.Repeat("ef", 32)
	ended(t, send(wrong), CredentialRevoked)

	f.do(&CredentialRevoke{RunID: "R", TaskID: "T1"})
	ended(t, send(workerOf("T1")), CredentialRevoked)

	f.do(&TaskTransition{RunID: "R", TaskID: "T2", To: "completed"})
	ended(t, send(workerOf("T2")), CredentialTaskEnded)
	// A retry makes the task live again, not its ended attempt's credential: the writer checks it by attempt.
	f.do(&TaskTransition{RunID: "R", TaskID: "T2", To: "queued"})
	f.do(&TaskTransition{RunID: "R", TaskID: "T2", To: "running"})
	ended(t, send(workerOf("T2")), CredentialTaskEnded)
	next := workerOf("T2")
	next.Attempt = 1
	require.NoError(t, send(next), "the new attempt's credential")

	require.NoError(t, send(workerOf("T3")))
	bound := workerOf("T3")
	bound.Since, _ = f.log.Head() // a hello bound before the run's end
	f.do(&RunTransition{RunID: "R", To: "completed"})
	ended(t, send(workerOf("T3")), CredentialRunEnded)
	require.NoError(t, send(orch), "an orchestrator's credential outlives its run's end")
	// A reopening makes the run live again, not the credential of a hello bound before its end: the writer checks
	// it by the position it was bound at.
	f.do(&RunTransition{RunID: "R", To: "running"})
	ended(t, send(bound), CredentialRunEnded)
	after := workerOf("T3")
	after.Since, _ = f.log.Head()
	require.NoError(t, send(after), "a hello bound after the reopening")
}

// BenchmarkCheckCredential is the writer's cost of the check per command.
func BenchmarkCheckCredential(b *testing.B) {
	f := openEngine(b, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("R", 0)
	f.do(&CredentialIssue{RunID: "R", TaskID: "02_exec", Digest: fxDigest})
	c := Credential{RunID: "R", Key: "02_exec", Digest: fxDigest, TaskID: "02_exec"}
	f.eng.Read(func(s *projections.State) {
		require.Equal(b, CredentialLive, CheckCredential(s, c))
		b.ReportAllocs()
		for b.Loop() {
			CheckCredential(s, c)
		}
	})
}

// reports keeps the command reports of the groups an engine committed.
type reports struct {
	mu   sync.Mutex
	cmds []CommandReport
}

func (r *reports) Committed(g *GroupReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, g.Commands...)
}
func (r *reports) Snapshotted(uint64, int, time.Time) {}

// The engine's observer sees a command of an ended credential as refused,
// for the reason its client is told, not as an error of the engine.
func TestTheObserverSeesAnEndedCredentialAsARefusal(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	obs := &reports{}
	e, err := Open(l, Options{Clock: newTestClock().Now, NewID: counterIDs(), ExpiryInterval: -1, Observer: obs})
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Submit(context.Background(), Request{Actor: worker("T1"),
		Command:    &MessageSend{RunID: "R", FromTask: "T1", To: []string{"T2"}, Body: "hi"},
		Credential: &Credential{RunID: "R", Key: "T1", Digest: fxDigest, TaskID: "T1"}})
	var ended *CredentialEndedError
	require.ErrorAs(t, err, &ended)
	require.Eventually(t, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.cmds) == 1
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, CommandReport{Method: "msg.send", Outcome: OutcomeRejected, Reason: "revoked"}, obs.cmds[0])
}

// A cold run ended long ago, and every worker credential of it with the run: the check answers run-terminal (the
// reason its holder is told) from the run's status alone, without reading the run's credentials back from the log,
// whether the secret is the one issued, another, or was revoked. The orchestrator's credential outlives its run's
// end: it is read back, and holds while it is the one issued.
func TestAWorkerCredentialOfAColdRunEndedWithItsRun(t *testing.T) {
	f := openColdEngine(t, Options{Retention: -1})
	orchDigest := strings.Repeat("cd", 32)
	f.do(&RunCreate{RunID: "C", Team: "t", Goal: "g", Cwd: "/w", OrchestratorDigest: orchDigest})
	f.do(&RunTransition{RunID: "C", To: "running"})
	for _, task := range []string{"T1", "T2"} {
		f.do(&TaskCreate{RunID: "C", TaskID: task, Role: "executor", Agent: "a", Title: "t", Cwd: "/w"})
		f.do(&TaskTransition{RunID: "C", TaskID: task, To: "running"})
		f.do(&CredentialIssue{RunID: "C", TaskID: task, Digest: fxDigest})
	}
	f.do(&CredentialRevoke{RunID: "C", TaskID: "T2"})
	f.do(&RunTransition{RunID: "C", To: "completed"})
	other := strings.Repeat("ef", 32)
	f.eng.Read(func(s *projections.State) {
		require.True(t, s.IsCold("C"))
		for _, tc := range []struct {
			name string
			c    Credential
			want CredentialEnd
		}{
			{"a worker's issued secret", Credential{RunID: "C", Key: "T1", Digest: fxDigest, TaskID: "T1"},
				CredentialRunEnded},
			{"a worker's other secret", Credential{RunID: "C", Key: "T1", Digest: other, TaskID: "T1"},
				CredentialRunEnded},
			{"a worker's revoked secret", Credential{RunID: "C", Key: "T2", Digest: fxDigest, TaskID: "T2"},
				CredentialRunEnded},
			{"a worker never issued one", Credential{RunID: "C", Key: "T3", Digest: fxDigest, TaskID: "T3"},
				CredentialRunEnded},
			{"the orchestrator's issued secret", Credential{RunID: "C", Key: events.OrchestratorKey,
				Digest: orchDigest}, CredentialLive},
			{"the orchestrator's other secret", Credential{RunID: "C", Key: events.OrchestratorKey,
				Digest: other}, CredentialRevoked},
		} {
			require.Equal(t, tc.want, CheckCredential(s, tc.c), tc.name)
		}
	})
}
