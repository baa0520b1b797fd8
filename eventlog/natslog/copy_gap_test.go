package natslog

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// A copy reads every sequence of the stream, in order: a sequence missing
// (a message deleted from a stream that allows it, as crewlog's never do) is
// ErrDiverged, not skipped. A group that appends no event — a command's
// recorded outcome, which its retries are answered from — is one message
// that the next group's position does not account for: skipped, the copy
// would lose that outcome unseen, and a retry would decide the command again.
func TestCopyRefusesAGapInTheStream(t *testing.T) {
	js := connect(t, startServer(t))
	ctx := context.Background()
	// The stream as crewlog creates it, but that allows deletes.
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: testConfig.Stream,
		Subjects: []string{testConfig.Subject(), testConfig.eventsWildcard()}, Storage: jetstream.FileStorage,
		Replicas: 1, AllowAtomicPublish: true})
	require.NoError(t, err)
	outcome := []eventlog.Write{{Principal: "admin", CommandID: "o-1", Result: []byte("{}")}}
	publishRaw(t, js, rawBatch(t, "g", 0, groupAcross("g"))...)
	publishRaw(t, js, rawBatch(t, "o", 4, outcome)...) // sequence groupAcrossMessages+1
	publishRaw(t, js, rawBatch(t, "h", 4, groupAcross("h"))...)
	require.NoError(t, st.DeleteMsg(ctx, groupAcrossMessages+1))

	w, err := Open(ctx, js, openLocal(t), testConfig)
	require.NoError(t, err)
	n, err := w.CatchUp(ctx)
	require.ErrorIs(t, err, ErrDiverged)
	require.ErrorContains(t, err, "sequence 6 follows 4")
	require.Equal(t, 1, n, "the group before the gap is copied")
	require.Equal(t, uint64(groupAcrossMessages), w.Sequence())
}
