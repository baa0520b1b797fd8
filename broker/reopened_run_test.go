package broker

import (
	"sync"
	"sync/atomic"
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
	recv(t, entered, "stop of the feed at the run's end") // the feed has seen the end, and ended nothing yet
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
	recv(t, entered, "stop of the feed at the run's end") // the feed has seen the end, and ended nothing yet
	o.ok("run.transition", map[string]any{"to": "running"})
	before, _ := f.log.Head()

	e := w.fails("msg.send", map[string]any{"to": "parent", "body": "after the end"}, wire.CodeStaleToken)
	require.Equal(t, wire.MsgRunTerminal, e.Message)
	after, _ := f.log.Head()
	require.Equal(t, before, after, "the ended worker's command was recorded")
}

// heldSpace is the engine's free-space check, asked on the submitting goroutine before a command is queued: armed,
// the first check waits, with entered closed, until it is released (release); the others pass.
type heldSpace struct {
	armed    atomic.Bool
	entered  chan struct{}
	released chan struct{}
	once     sync.Once
}

func newHeldSpace() *heldSpace {
	return &heldSpace{entered: make(chan struct{}), released: make(chan struct{})}
}

func (g *heldSpace) CheckSpace() error {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.released
	}
	return nil
}

// release lets the held check go on; a second call does nothing.
func (g *heldSpace) release() { g.once.Do(func() { close(g.released) }) }

// TestAReopenedRunRefusesACommandItsEndOvertook: a worker's command that passed the broker's check of its
// credential before the run ended, and reaches the writer after the run was reopened, is not decided: the writer
// checks the run's last end against the position the connection was bound at (commands.Credential.Since), as the
// broker's own check does, where the credential the connection handed the engine had no such position and the
// reopened run's status admitted the command.
func TestAReopenedRunRefusesACommandItsEndOvertook(t *testing.T) {
	g := newHeldSpace()
	f := newFixture(t, fixtureOpts{space: g})
	t.Cleanup(g.release) // NB: after the fixture's, so that it runs before the fixture's close, which waits for the check
	s := f.seed()
	o := f.dialOrchestrator(s)
	w := f.dial()
	w.hello(runR, taskP, s.p)
	g.armed.Store(true)
	w.sendLine(`{"id":"send","method":"msg.send","params":{"to":"parent","body":"checked before the end"}}`)
	// the broker has checked the worker's credential; the engine has not decided its command
	recv(t, g.entered, "check of the store's space for the worker's command")
	o.ok("run.transition", map[string]any{"to": "completed"})
	o.ok("run.transition", map[string]any{"to": "running"})
	before, _ := f.log.Head()
	g.release()

	r := w.answerOf("send")
	require.NotNil(t, r.Error, "the ended worker's command was answered %s", r.Result)
	require.Equal(t, wire.CodeStaleToken, r.Error.Code)
	require.Equal(t, wire.MsgRunTerminal, r.Error.Message)
	after, _ := f.log.Head()
	require.Equal(t, before, after, "the ended worker's command was recorded")
}
