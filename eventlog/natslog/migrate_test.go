package natslog

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
)

// A Pebble store imported into a stream comes back, through any copy of
// the stream, with the same records, hash chain and outcomes, and its
// invariants hold; a second import into the same stream is refused.
func TestImportPebbleStoreIntoStream(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	head := audittest.Scenario(t, dir)
	src, err := eventlog.Open(dir, &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	defer src.Close()
	outcomes := 0
	require.NoError(t, src.Outcomes(func(eventlog.Outcome) error { outcomes++; return nil }))

	js := connect(t, startServer(t))
	dst := openLog(t, js)
	rep, err := Import(context.Background(), src, dst)
	require.NoError(t, err)
	require.Equal(t, head, rep.Events)
	require.Equal(t, outcomes, rep.Outcomes)
	require.Positive(t, rep.Groups)

	c := openLog(t, js) // a crewd joining the cluster
	require.NoError(t, verifyCopy(src, c.Local(), outcomes))
	vr, err := audit.Verify(c.Local(), nil)
	require.NoError(t, err)
	require.Empty(t, vr.Check.Problems)
	require.NoError(t, src.Outcomes(func(o eventlog.Outcome) error {
		got, err := c.Local().Outcome(o.Principal, o.CommandID)
		require.NoError(t, err)
		require.Equal(t, o, got)
		return nil
	}))

	_, err = Import(context.Background(), src, openLog(t, js))
	require.ErrorIs(t, err, ErrStreamNotEmpty)
}

// Outcomes that wrote no events and events of commands without an id are
// imported too.
func TestImportKeepsEventlessOutcomesAndUnidentifiedEvents(t *testing.T) {
	src := openLocal(t)
	ev := func(stream string) eventlog.Event {
		return eventlog.Event{Stream: stream, Type: "run.created", Time: 1, Payload: []byte{0x80}}
	}
	_, err := src.Append(
		eventlog.Write{Principal: "admin", CommandID: "a", Result: []byte("{}"), Events: []eventlog.Event{ev("r1"), ev("r1")}},
		eventlog.Write{Principal: "admin", CommandID: "rejected", Code: "bad-params", Reason: "x", Result: []byte("m")},
		eventlog.Write{Events: []eventlog.Event{ev("r2")}},
	)
	require.NoError(t, err)
	_, err = src.Append(eventlog.Write{Events: []eventlog.Event{ev("r2")}},
		eventlog.Write{Principal: "orchestrator:r1", CommandID: "a", Result: []byte("{}"), Events: []eventlog.Event{ev("r1")}})
	require.NoError(t, err)

	js := connect(t, startServer(t))
	rep, err := Import(context.Background(), src, openLog(t, js))
	require.NoError(t, err)
	require.Equal(t, ImportReport{Groups: 1, Events: 5, Outcomes: 3}, rep)
	c := openLog(t, js)
	require.NoError(t, verifyCopy(src, c.Local(), 3))
	o, err := c.Local().Outcome("admin", "rejected")
	require.NoError(t, err)
	require.Equal(t, "bad-params", o.Code)
}

// TestImportStoppedPartWayIsRefused: an import stopped part-way (crewctl migrate-store --to jetstream killed, its
// connection lost) left the stream holding the store's first groups. A second import was refused as the stream was
// not empty, but a crewd joined the stream and served the short log as the whole one, and a copy of it (verify,
// backup, migrate-store --to pebble) found nothing wrong: the source store, not a prefix of it, is the log. The
// stream stays marked until its import is whole and checked, and everything that binds it refuses it meanwhile,
// saying what to do; a stream whose import finished is bound as before.
func TestImportStoppedPartWayIsRefused(t *testing.T) {
	src := openLocal(t)
	ws := make([]eventlog.Write, 3*importGroupWrites)
	for i := range ws {
		ws[i] = eventlog.Write{Principal: "admin", CommandID: fmt.Sprint(i), Result: []byte("{}"),
			Events: []eventlog.Event{{Stream: "r1", Type: "run.created", Time: 1, Payload: []byte{0x80}}}}
	}
	_, err := src.Append(ws...)
	require.NoError(t, err)

	js := connect(t, startServer(t))
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(func() { importCommitted = func() {} })
	importCommitted = stop
	_, err = Import(ctx, src, openLog(t, js))
	require.ErrorIs(t, err, context.Canceled)
	importCommitted = func() {}
	st, err := js.Stream(context.Background(), testConfig.Stream)
	require.NoError(t, err)
	require.Positive(t, st.CachedInfo().State.LastSeq, "the stream holds the groups committed before the stop")

	for _, cfg := range []Config{testConfig, {Stream: testConfig.Stream, Existing: true}} {
		_, err = Open(context.Background(), js, openLocal(t), cfg) // a crewd joining; a copy
		require.ErrorIs(t, err, ErrImportUnfinished, "existing %v", cfg.Existing)
		require.ErrorContains(t, err, "stream CREWLOG")
		require.ErrorContains(t, err, "delete the stream")
	}

	require.NoError(t, js.DeleteStream(context.Background(), testConfig.Stream))
	_, err = Import(context.Background(), src, openLog(t, js))
	require.NoError(t, err)
	requireCopy(t, src, openLog(t, js).Local(), uint64(len(ws)))
}
