package commands

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

var fxDigest = strings.Repeat("ab", 32)

func TestCredentialIssue(t *testing.T) {
	// maxDepth 4 (default): a worker (depth 1) and shadows at depth 2 and 3
	// get credentials; a shadow at depth 4 cannot delegate, so gets none.
	l := fxRunning(t, 0).delegation("02_exec", "gc-2", 2).delegation("gc-2", "gc-3", 3).delegation("gc-3", "gc-4", 4)
	for _, task := range []string{"02_exec", "gc-2", "gc-3"} {
		t.Run(task, func(t *testing.T) {
			dec, err := fxDecide(t, l.s, &CredentialIssue{RunID: fxRun, TaskID: task, Digest: fxDigest})
			require.NoError(t, err)
			fxRequireEvents(t, dec.Events, fxE{events.TypeCredentialIssued, &events.CredentialIssued{
				TaskID: task, Role: events.RoleWorker, Digest: fxDigest}})
			require.Equal(t, CredentialResult{OK: true, TaskID: task, Role: events.RoleWorker}, dec.Result)
			l2 := &fxLog{t: t, s: l.s.Clone(), pos: l.pos}
			l2.apply(dec)
			c, ok := l2.s.Credential(fxRun, task)
			require.True(t, ok)
			require.True(t, c.Valid(fxDigest))
		})
	}

	dec, err := fxDecide(t, l.s, &CredentialIssue{RunID: fxRun, TaskID: "gc-4", Digest: fxDigest})
	fxRejected(t, dec, err, CodeForbidden, events.ReasonDepthExceeded, "at depth 4 and maxDepth is 4")

	// With maxDepth 2 (pi-crew 0.10.1's default) a depth-2 grandchild gets none.
	env := fxEnv()
	env.Config.MaxDepth = 2
	dec, err = Decide(l.s, &CredentialIssue{RunID: fxRun, TaskID: "gc-2", Digest: fxDigest}, env)
	fxRejected(t, dec, err, CodeForbidden, events.ReasonDepthExceeded, "")
}

func TestCredentialIssueRejections(t *testing.T) {
	l := fxRunning(t, 0)
	done := fxRunning(t, 0)
	done.add(events.TypeRunCompleted, &events.RunCompleted{})
	for _, tc := range []struct {
		name               string
		s                  *projections.State
		cmd                CredentialIssue
		code, reason, text string
	}{
		{"no digest", l.s, CredentialIssue{RunID: fxRun, TaskID: "02_exec"}, CodeBadParams, "invalid-params",
			"digest"},
		{"uppercase digest", l.s, CredentialIssue{RunID: fxRun, TaskID: "02_exec", Digest: strings.ToUpper(fxDigest)},
			CodeBadParams, "invalid-params", "digest"},
		{"orchestrator key", l.s, CredentialIssue{RunID: fxRun, TaskID: events.OrchestratorKey, Digest: fxDigest},
			CodeBadParams, "invalid-params", "run.create"},
		{"no run", l.s, CredentialIssue{RunID: "nope", TaskID: "02_exec", Digest: fxDigest}, CodeNoManifest,
			"no-manifest", ""},
		{"no task", l.s, CredentialIssue{RunID: fxRun, TaskID: "99_x", Digest: fxDigest}, CodeNoTask, "no-task", ""},
		{"stale run", done.s, CredentialIssue{RunID: fxRun, TaskID: "02_exec", Digest: fxDigest}, CodeForbidden,
			"run-terminal", "is completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := fxDecide(t, tc.s, &tc.cmd)
			fxRejected(t, dec, err, tc.code, tc.reason, tc.text)
		})
	}
	t.Run("a blocked run is not stale", func(t *testing.T) {
		b := fxRunning(t, 0)
		b.add(events.TypeRunBlocked, &events.RunBlocked{})
		_, err := fxDecide(t, b.s, &CredentialIssue{RunID: fxRun, TaskID: "02_exec", Digest: fxDigest})
		require.NoError(t, err)
	})
}

func TestCredentialRevoke(t *testing.T) {
	l := fxRunning(t, 0)
	l.run(&CredentialIssue{RunID: fxRun, TaskID: "02_exec", Digest: fxDigest})

	dec, err := fxDecide(t, l.s, &CredentialRevoke{RunID: fxRun, TaskID: "02_exec", Reason: "task done"})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events, fxE{events.TypeCredentialRevoked, &events.CredentialRevoked{
		TaskID: "02_exec", Digest: fxDigest, Reason: "task done"}})
	require.Equal(t, CredentialResult{OK: true, TaskID: "02_exec", Role: events.RoleWorker,
		Revoked: true}, dec.Result)
	l.apply(dec)
	c, _ := l.s.Credential(fxRun, "02_exec")
	require.False(t, c.Valid(fxDigest))

	for _, tc := range []struct {
		name               string
		cmd                CredentialRevoke
		code, reason, text string
	}{
		{"already revoked", CredentialRevoke{RunID: fxRun, TaskID: "02_exec"}, CodeBadParams, "invalid-params",
			"no live credential"},
		{"never issued", CredentialRevoke{RunID: fxRun, TaskID: "03_x"}, CodeBadParams, "invalid-params",
			"no live credential"},
		{"long reason", CredentialRevoke{RunID: fxRun, TaskID: "02_exec", Reason: strings.Repeat("r", 300)},
			CodeBadParams, "invalid-params", "reason"},
		{"no run", CredentialRevoke{RunID: "nope", TaskID: "02_exec"}, CodeNoManifest, "no-manifest", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := fxDecide(t, l.s, &tc.cmd)
			fxRejected(t, dec, err, tc.code, tc.reason, tc.text)
		})
	}

	// A re-issue makes the key live again.
	l.run(&CredentialIssue{RunID: fxRun, TaskID: "02_exec", Digest: strings.Repeat("cd", 32)})
	dec, err = fxDecide(t, l.s, &CredentialRevoke{RunID: fxRun, TaskID: "02_exec"})
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("cd", 32), dec.Events[0].Payload.(*events.CredentialRevoked).Digest)
}

// TestCredentialIssueTaskIDFitsHello: a worker names its task in its hello, in at most 256 UTF-16 units (pi-crew's
// bound, which JavaScript's .length counts), while a task id is bounded in chars, and an imported pi-crew task may be
// named by chars of two units each. A credential for a task whose id no hello carries would be a token its worker
// could never present, so it is refused; one whose id fits is issued.
func TestCredentialIssueTaskIDFitsHello(t *testing.T) {
	fits, past := strings.Repeat("😀", MaxHelloTaskIDUnits/2), strings.Repeat("😀", MaxHelloTaskIDUnits/2+1)
	l := fxRunning(t, 0).task(fits, projections.TaskRunning).task(past, projections.TaskRunning)

	dec, err := fxDecide(t, l.s, &CredentialIssue{RunID: fxRun, TaskID: fits, Digest: fxDigest})
	require.NoError(t, err)
	require.Equal(t, CredentialResult{OK: true, TaskID: fits, Role: events.RoleWorker}, dec.Result)

	dec, err = fxDecide(t, l.s, &CredentialIssue{RunID: fxRun, TaskID: past, Digest: fxDigest})
	fxRejected(t, dec, err, CodeBadParams, "invalid-params", "258 UTF-16 units, more than the 256 a hello carries")
}
