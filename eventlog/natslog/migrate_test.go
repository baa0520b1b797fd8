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

// Events of commands without an id follow one another in a store with nothing to tell where each command's write
// ended; Import regroups them into writes that each fit one atomic batch. It made one write of every such run, so
// a store where commands without an id alternated between runs (a message to one, a transition of another) more
// times than a batch holds messages could not be imported at all (ErrGroupTooLarge), and a long run of them was held
// in memory whole.
func TestImportCutsARunOfUnidentifiedEventsIntoWritesThatFitABatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxBatch   int
		events     int
		streams    []string
		payloadLen int
		minGroups  int
	}{
		{"alternating between runs past a batch's messages", 0, DefaultMaxBatchMessages + 200, []string{"r1", "r2"},
			1, 1},
		{"alternating under a small batch", 3, 40, []string{"r1", "r2", "r3"}, 1, 1},
		{"one run past a group's bytes", 0, 3 * importGroupBytes / (4 << 10), []string{"r1"}, 4 << 10, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := openLocal(t)
			ws := make([]eventlog.Write, tc.events)
			for i := range ws {
				payload := make([]byte, tc.payloadLen)
				payload[0] = 0x80
				ws[i] = eventlog.Write{Events: []eventlog.Event{{Stream: tc.streams[i%len(tc.streams)],
					Type: "mailbox.appended", Time: 1, Payload: payload}}}
			}
			_, err := src.Append(ws...)
			require.NoError(t, err)

			js := connect(t, startServer(t))
			cfg := testConfig
			cfg.MaxBatchMessages = tc.maxBatch
			dst, err := Open(context.Background(), js, openLocal(t), cfg)
			require.NoError(t, err)
			rep, err := Import(context.Background(), src, dst)
			require.NoError(t, err)
			require.Equal(t, uint64(tc.events), rep.Events)
			require.GreaterOrEqual(t, rep.Groups, tc.minGroups, "groups of about importGroupBytes at most")
			c := openLog(t, js) // a crewd joining the cluster
			require.NoError(t, verifyCopy(src, c.Local(), 0))
		})
	}
}
