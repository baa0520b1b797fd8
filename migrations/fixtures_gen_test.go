//go:build crewlog_fixtures

package migrations_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// taskCreatedV1 is task.created as format-1 builds wrote it: schema
// version 1, no kind.
type taskCreatedV1 struct {
	TaskID    string   `msgpack:"taskId"`
	Role      string   `msgpack:"role"`
	Agent     string   `msgpack:"agent"`
	Title     string   `msgpack:"title"`
	Cwd       string   `msgpack:"cwd"`
	DependsOn []string `msgpack:"dependsOn"`
	StepID    string   `msgpack:"stepId,omitempty"`
	Depth     int      `msgpack:"depth,omitempty"`
	Model     string   `msgpack:"model,omitempty"`
}

// TestGenerateFixtures writes testdata/format1, a small store at format 1.
// (testdata/format2 is not generated here: it was written at format 2 by
// crewlog's own engine, commit 052e7aa, so that the step to format 3 is
// tested on what that code wrote; see TestFormat2OutcomesMoveToTheirPrincipals.)
// Run it with
//
//	go test -tags crewlog_fixtures -run TestGenerateFixtures ./migrations/
//
// and commit the directory. Regenerating changes the bytes (Pebble's file
// numbers, the WAL), not what the store holds.
func TestGenerateFixtures(t *testing.T) {
	const dir = "testdata/format1"
	require.NoError(t, os.RemoveAll(dir))
	l, err := eventlog.Open(dir, &eventlog.Options{MemTableSize: 1 << 20, CacheSize: 1 << 20})
	require.NoError(t, err)
	const run = "team_20261001090000_a1b2c3d4e5f60001"
	at := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	n := 0
	ev := func(stream string, p any) eventlog.Event {
		typ, ok := events.TypeOf(p)
		b, err := events.EncodePayload(p)
		if v1, isV1 := p.(taskCreatedV1); isV1 {
			typ, ok = events.TypeTaskCreated, true
			b, err = msgpack.Marshal(v1)
		}
		require.True(t, ok)
		require.NoError(t, err)
		n++
		sv := events.SchemaVersion(typ)
		if typ == events.TypeTaskCreated {
			sv = 1
		}
		return eventlog.Event{Stream: stream, Type: typ, SchemaVersion: sv,
			Time: at.Add(time.Duration(n) * time.Second).UnixNano(), ActorRole: events.RoleOrchestrator, Payload: b}
	}
	write := func(id string, evs ...eventlog.Event) {
		_, err := l.Append(eventlog.Write{CommandID: id, Events: evs})
		require.NoError(t, err)
	}
	write("cfg", ev(events.EngineStream, &events.EngineConfigured{NestingEnabled: true, MaxDepth: 4, MaxSlots: 2,
		UnmeteredDelegates: events.UnmeteredAllow, SettleGraceSec: 30}))
	write("run", ev(run, &events.RunCreated{Team: "core", Workflow: "build", Goal: "ship the parser", Cwd: "/srv/app",
		BudgetTotal: new(int64(100000))}),
		ev(run, &events.RunRunning{}))
	write("t1", ev(run, taskCreatedV1{TaskID: "01_build", Role: "executor", Agent: "executor",
		Title: "build the parser", Cwd: "/srv/app", DependsOn: []string{}, StepID: "build"}))
	write("t2", ev(run, taskCreatedV1{TaskID: "02_review", Role: "reviewer", Agent: "reviewer", Title: "review",
		Cwd: "/srv/app", DependsOn: []string{"01_build"}, StepID: "review"}))
	write("s1", ev(run, &events.TaskStarted{TaskID: "01_build", Role: "executor", Agent: "executor",
		Cwd: "/srv/app"}))
	write("d1", ev(run, &events.DelegateRequested{TaskID: "01_build", SubID: "gc-00000001", Role: "explorer"}),
		ev(run, &events.DelegateAdmitted{TaskID: "01_build", SubID: "gc-00000001", ChildDepth: 2, Role: "explorer",
			ReservedTokens: 20000, TimeoutSec: 900, Deadline: at.Add(906 * time.Second).UnixMilli(), Cwd: "/srv/app",
			Title: "delegate: read the docs", Prompt: "read the docs", ParentRole: "executor"}),
		ev(run, &events.BudgetReserved{TaskID: "01_build", SubID: "gc-00000001", Tokens: 20000,
			GrantedTokens: 100000}))
	write("sp1", ev(run, &events.DelegateSpawned{TaskID: "01_build", SubID: "gc-00000001", PID: 4242}))
	write("st1", ev(run, &events.MailboxAppended{ID: "msg_1", To: "01_build", From: "delegate:gc-00000001",
		Kind: events.KindResponse, Priority: events.PriorityNormal, DeliveryMode: events.DeliveryNextTurn,
		Body: "docs read", Data: &events.MessageData{SubID: "gc-00000001", OK: true}}),
		ev(run, &events.DelegateCompleted{TaskID: "01_build", SubID: "gc-00000001", OK: true, MessageID: "msg_1"}))
	write("c1", ev(run, &events.TaskCompleted{TaskID: "01_build"}))
	require.NoError(t, l.RewindFormatForFixtures(eventlog.FormatInitial))
	require.NoError(t, l.Close())
	require.NoError(t, os.Remove(dir+"/LOCK"))
}
