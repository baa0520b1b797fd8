package broker

import (
	"encoding/json"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// An events.subscribe whose first event the log cannot give back (a read of its tables fails: EIO) is answered
// replay-failed, as events.since is: it was answered subscribed, and the subscription's read then failed and ended it
// with a resync, which tells a client it fell behind; the client subscribed again at once, was answered subscribed,
// and met the same resync, for as long as the log could not be read, never told that it could not. Once the log
// can be read, the same subscription replays the run.
func TestASubscriptionTheLogCannotGiveBackIsAnsweredReplayFailed(t *testing.T) {
	mem := vfs.NewMem()
	f := newFixture(t, fixtureOpts{fs: mem})
	f.seed() // R1 running: hot, its events in the log's tables once the store is opened again
	f.close()
	fs, eio := failingTableReads(mem, nil)
	g := newFixture(t, fixtureOpts{fs: fs, uncached: true})
	a := g.dial()
	a.helloAdmin()

	eio.On()
	e := a.fails("events.subscribe", map[string]any{"runId": runR}, wire.CodeReplayFailed)
	require.Equal(t, wire.CodeReplayFailed.Message(), e.Message)
	eio.Off()

	a.ok("events.subscribe", map[string]any{"runId": runR})
	for seq := uint64(1); seq <= 5; seq++ { // the run's creation, its start, each task's creation and start
		var ev wire.Event
		require.NoError(t, json.Unmarshal(a.nextFrame(), &ev))
		require.Equal(t, wire.EventTeamEvent, ev.Name, "no resync: %s", ev.Data)
		require.Equal(t, seq, ev.Seq)
	}
}
