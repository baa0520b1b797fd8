package commands

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestReplyValue: an accepted command's answer carries the value its
// Result encodes, so an in-process caller need not decode it; a rejection
// and a replay (whose outcome kept only the JSON) carry none.
func TestReplyValue(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	ctx := context.Background()
	created, err := f.eng.Submit(ctx, Request{Actor: events.Actor{Role: events.RoleOrchestrator},
		Command: &RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}})
	require.NoError(t, err)
	require.IsType(t, RunCreateResult{}, created.Value)
	requireValueEncodes(t, created)
	f.seedRun("S", 100000)

	req := Request{Principal: events.WorkerPrincipal("S", "02_exec"), CommandID: "c1", Actor: worker("02_exec"),
		Command: &DelegateRequest{RunID: "S", TaskID: "02_exec", Prompt: "find X", BudgetTokens: ptr(int64(20000))}}
	first, err := f.eng.Submit(ctx, req)
	require.NoError(t, err)
	v, ok := first.Value.(*DelegateResult)
	require.True(t, ok, "%T", first.Value)
	require.Equal(t, "gc-00000001", v.GrandchildTaskRef)
	requireValueEncodes(t, first)

	again, err := f.eng.Submit(ctx, req)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Nil(t, again.Value, "a recorded outcome keeps only its JSON")

	denied, err := f.eng.Submit(ctx, Request{Actor: worker("02_exec"),
		Command: &DelegateRequest{RunID: "S", TaskID: "02_exec", Prompt: "p", Role: ptr("reviewer")}})
	require.NoError(t, err)
	require.NotNil(t, denied.Rejected)
	require.Nil(t, denied.Value)
}

func requireValueEncodes(t *testing.T, r Reply) {
	t.Helper()
	b, err := json.Marshal(r.Value)
	require.NoError(t, err)
	require.JSONEq(t, string(r.Result), string(b))
}
