package broker

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestAWaitKeepsNoneOfItsRequestsParams: a task.waitStatus in flight keeps its request's id, not its params.
// pi-crew's methods take keys they do not read, so a wait's params may fill a frame, and a credential's waits (64 by
// default, each up to a minute) held as many frames besides the one each of its connections reads: the inbound bound
// of a connection, one frame, did not hold.
func TestAWaitKeepsNoneOfItsRequestsParams(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	w, sc := f.workerToServe(s)
	params := startPaddedWait(t, sc, "w")
	runtime.GC()
	runtime.GC()
	sc.mu.Lock()
	waits := sc.waits
	sc.mu.Unlock()
	require.Equal(t, 1, waits, "the wait is in flight")
	require.Nil(t, params.Value(), "the wait in flight keeps its request's params")

	o := f.dialOrchestrator(s)
	o.ok("task.transition", map[string]any{"taskId": taskQ, "to": "completed"})
	r := w.answerOf("w")
	require.Nil(t, r.Error)
	require.JSONEq(t, `"completed"`, string(mustField(t, r.Result, "status")))
}

// startPaddedWait serves, on c, a task.waitStatus of id for Q's completion whose params carry a key of 192 KiB that
// the method does not read, and returns a weak pointer to the params.
func startPaddedWait(t *testing.T, c *conn, id string) weak.Pointer[byte] {
	t.Helper()
	params := json.RawMessage(`{"taskId":"Q","until":"completed","timeoutMs":60000,"pad":"` +
		strings.Repeat("x", 192<<10) + `"}`)
	cl := &call{c: c, id: id, method: wire.MethodTaskWaitStatus, params: params}
	res, err := handleWaitStatus(cl)
	require.NoError(t, err)
	require.Nil(t, res)
	require.True(t, cl.async)
	return weak.Make(&params[0])
}

// mustField is the raw value of key in the JSON object raw.
func mustField(t *testing.T, raw json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	v, ok := m[key]
	require.True(t, ok, "no %s in %s", key, raw)
	return v
}
