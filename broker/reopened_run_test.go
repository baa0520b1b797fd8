package broker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestAReopenedRunKeepsNoConnectionItsEndEnded: the end of a run ends its workers' connections, even when the run is
// reopened before the feed, which ends the connections of ended credentials, has got to the end: the feed's re-check
// reads the newest state, in which the reopened run's credentials hold again. Its orchestrator's connections survive
// the end as ever, and a hello after the reopening is bound.
func TestAReopenedRunKeepsNoConnectionItsEndEnded(t *testing.T) {
	f, s, o, w := endingRun(t)
	entered, release := f.holdFeed()
	o.ok("run.transition", map[string]any{"to": "completed"})
	<-entered // the feed has seen the end, and ended nothing yet
	o.ok("run.transition", map[string]any{"to": "running"})
	release()

	end := w.untilError()
	require.Equal(t, "", end.ID, "ended without a request")
	require.Equal(t, wire.CodeStaleToken, end.Error.Code)
	require.Equal(t, wire.MsgRunTerminal, end.Error.Message)
	w.closed()

	o.ok("ping", nil) // the orchestrator's connection survived the end
	next := f.dial()
	next.hello(runR, taskP, s.p)
	next.ok("msg.send", map[string]any{"to": "parent", "body": "after the reopening"})
}

// TestAReopenedRunRefusesItsEndedWorkersBeforeTheFeedEndsThem: between a run's reopening and the feed getting to its
// end, a worker connection bound before the end is refused at its next request, and its command is not recorded:
// the run's newest status would admit it, so the check reads the position of the run's last end against the one the
// connection was bound at (commands.Credential.Since).
func TestAReopenedRunRefusesItsEndedWorkersBeforeTheFeedEndsThem(t *testing.T) {
	f, _, o, w := endingRun(t)
	entered, release := f.holdFeed()
	defer release()
	o.ok("run.transition", map[string]any{"to": "completed"})
	<-entered // the feed has seen the end, and ended nothing yet
	o.ok("run.transition", map[string]any{"to": "running"})
	before, _ := f.log.Head()

	e := w.fails("msg.send", map[string]any{"to": "parent", "body": "after the end"}, wire.CodeStaleToken)
	require.Equal(t, wire.MsgRunTerminal, e.Message)
	after, _ := f.log.Head()
	require.Equal(t, before, after, "the ended worker's command was recorded")
}
