package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// A node that starts behind copies the stream before its engine opens; the
// outcomes with no event it copies then count in their run's tally as well
// as their principal's, or a node that joined late and became the writer
// would let the run's principals record another MaxEventlessOutcomesPerRun.
func TestANodeThatStartsBehindCountsItsRunsTallies(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	a := startWriterOn(t, srv, Options{Name: "a", Log: cfg, LeaseTTL: time.Second})
	const refusals = 20
	orch := events.OrchestratorPrincipal("r")
	reqs := make([]commands.Request, refusals)
	for i := range reqs {
		reqs[i] = commands.Request{Principal: orch, CommandID: fmt.Sprintf("refused-%d", i), Actor: orch.Actor(),
			Command: &commands.RunTransition{RunID: "r", To: "running"}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	replies, err := a.Engine().SubmitAll(ctx, reqs)
	require.NoError(t, err)
	for _, r := range replies {
		require.NotNil(t, r.Rejected, "a run that does not exist")
	}

	b := startOn(t, srv, Options{Name: "b", Log: cfg, LeaseTTL: time.Second})
	for name, n := range map[string]*Node{"a": a, "b": b} {
		require.Eventually(t, func() bool {
			mine, err := n.local.EventlessOutcomes(orch.Key())
			require.NoError(t, err)
			run, err := n.local.EventlessOutcomesOfGroup("r")
			require.NoError(t, err)
			return mine == refusals && run == refusals
		}, 10*time.Second, 10*time.Millisecond, "node %s counts the run's outcomes with no event", name)
	}
}
