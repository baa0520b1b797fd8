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

// A worker's proxy.result of a call whose result the log cannot give back (a read of its tables fails: EIO) is
// answered replay-failed, as every other read of the log is: it was answered internal, which tells the worker
// nothing it may retry. Once the log can be read, the result is answered.
func TestAProxyResultTheLogCannotGiveBackIsAnsweredReplayFailed(t *testing.T) {
	mem := vfs.NewMem()
	f := newFixture(t, fixtureOpts{fs: mem})
	s := f.seed()
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	nonce := o.ok("job.create", map[string]any{"jobId": "J", "taskId": taskP, "tools": testGrant})["nonce"].(string)
	o.ok("lease.open", map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "call-1"})
	w := f.dial()
	w.hello(runR, taskP, s.p)
	w.ok("proxy.request", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce, "tool": "read"})
	o.ok("manifest.revalidate", map[string]any{"jobId": "J", "requestId": "r1", "tools": testGrant})
	o.ok("proxy.complete", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce,
		"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "hi"}}}})
	o.nc.Close()
	w.nc.Close()
	f.close()
	fs, eio := failingTableReads(mem, nil)
	g := newFixture(t, fixtureOpts{fs: fs, uncached: true})
	w = g.dial()
	w.hello(runR, taskP, s.p)
	result := map[string]any{"jobId": "J", "requestId": "r1"}

	eio.On()
	e := w.fails("proxy.result", result, wire.CodeReplayFailed)
	require.Equal(t, wire.CodeReplayFailed.Message(), e.Message)
	eio.Off()

	res := w.ok("proxy.result", result)
	require.Equal(t, "completed", res["state"])
	require.JSONEq(t, `{"content":[{"text":"hi","type":"text"}]}`, res["result"].(string))
}

// TestSubscribeTakesAReadTurn: events.subscribe reads the first event it would push before it answers, as
// events.since reads its page, so it takes its credential's read turn: a worker's connections together read no
// more of the log at once than MaxReadsPerCredential, however many subscriptions they open and replace.
func TestSubscribeTakesAReadTurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxReadsPerCredential: 1}})
	s := f.seed()
	w := f.dial()
	w.hello(runR, taskP, s.p)

	release := f.holdReads(workerKey(taskP))
	w.sendLine(`{"id":"sub","method":"events.subscribe","params":{"sinceSeq":0}}`)
	awaitReads(t, f.srv, workerKey(taskP), 1, 1) // it waits for the turn the other read holds
	release()
	r := w.answerOf("sub")
	require.Nil(t, r.Error)
	require.Contains(t, string(r.Result), `"subscribed":true`)
}
