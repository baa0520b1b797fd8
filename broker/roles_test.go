package broker

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestRolesNotDescribedAreForbidden: every method refuses, forbidden, a worker and an orchestrator of its own run
// whose role protocol.json does not give it, whatever the params — a worker reads no query of its run but query.slots
// (a sibling's tasks, ledger account or mailbox, the orchestrator's inbox) and creates, moves or charges no task, its
// own included (docs/security.md). The description of a broker-served method's roles is written by hand
// (protocol_spec.go); this holds each handler to it, where only a request naming another run was refused in a test.
func TestRolesNotDescribedAreForbidden(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	worker, orch := f.dial(), f.dial()
	worker.hello(runR, taskP, s.p)
	orch.hello(runR, events.OrchestratorKey, s.orch)
	d, err := Describe()
	require.NoError(t, err)
	refused := map[string][]string{}
	for _, m := range d.Methods {
		if m.Name == wire.MethodHello {
			continue
		}
		for _, c := range []struct {
			role string
			conn *client
		}{{events.RoleWorker, worker}, {events.RoleOrchestrator, orch}} {
			if slices.Contains(m.Roles, c.role) {
				continue
			}
			for _, params := range []map[string]any{{}, {"runId": runR, "taskId": taskQ}} {
				c.conn.fails(m.Name, params, wire.CodeForbidden)
			}
			refused[c.role] = append(refused[c.role], m.Name)
		}
	}
	for _, m := range []string{"query.run", "query.tasks", "query.delegations", "query.ledger", "query.mailbox",
		"query.runs", "task.create", "task.transition", "task.usage"} {
		require.Contains(t, refused[events.RoleWorker], m)
	}
	require.NotContains(t, refused[events.RoleWorker], "query.slots")
}
