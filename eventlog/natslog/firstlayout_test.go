package natslog

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/eventlog"
)

// A stream of the first layout (one subject, a whole group per message) is
// still read by copies — verify, backup and migrate-store --to pebble
// work on it — and refused to a writer with the way to migrate.
func TestFirstLayoutIsReadNotWritten(t *testing.T) {
	js := connect(t, startServer(t))
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: testConfig.Stream, Subjects: []string{testConfig.Subject()},
		Storage: jetstream.FileStorage, Replicas: 1, DenyDelete: true, DenyPurge: true})
	require.NoError(t, err)
	after := uint64(0)
	for _, g := range [][]eventlog.Write{groupAcross("a"), groupAcross("b")} {
		data, err := encodeGroup(after, g)
		require.NoError(t, err)
		_, err = js.PublishMsg(ctx, &nats.Msg{Subject: testConfig.Subject(), Data: data})
		require.NoError(t, err)
		after += 4
	}

	_, err = Open(ctx, js, openLocal(t), testConfig)
	require.ErrorIs(t, err, errFirstLayout)
	require.ErrorContains(t, err, "migrate-store --to pebble")

	existing := testConfig
	existing.Existing = true
	c, err := Open(ctx, js, openLocal(t), existing)
	require.NoError(t, err)
	n, err := c.CatchUp(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	head, _ := c.Local().Head()
	require.Equal(t, uint64(8), head)
	_, err = c.Commit(group1("x"))
	require.ErrorIs(t, err, errFirstLayout)

	// Its copy imported into a stream of this layout is the same log.
	dst, err := Open(ctx, js, openLocal(t), Config{Stream: "NEW", Replicas: 1})
	require.NoError(t, err)
	_, err = Import(ctx, c.Local(), dst)
	require.NoError(t, err)
	require.NoError(t, verifyCopy(c.Local(), dst.Local(), 6))
}

// encodeGroup encodes ws in the first layout (before Append assigns anything in place) as the
// group that follows position after.
func encodeGroup(after uint64, ws []eventlog.Write) ([]byte, error) {
	g := wireGroup{After: after, Writes: make([]wireWrite, len(ws))}
	for i := range ws {
		w := &ws[i]
		ww := outcomeToWire(w)
		ww.Events = make([]wireEvent, len(w.Events))
		for j := range w.Events {
			ww.Events[j] = toWire(&w.Events[j], true)
		}
		g.Writes[i] = ww
	}
	buf := bytes.NewBuffer([]byte{groupVersion})
	enc := msgpack.NewEncoder(buf)
	enc.UseArrayEncodedStructs(true) // positions, not field names: a group is sent once per copy
	if err := enc.Encode(&g); err != nil {
		return nil, fmt.Errorf("natslog: encode group: %w", err)
	}
	return buf.Bytes(), nil
}
