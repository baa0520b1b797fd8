package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A request on the commands subject names the subject its answer goes to, and anyone who may publish there chooses
// it. The writer published its answer, with its own connection, to whatever subject was named: the stream's groups
// subject (JetStream stored the answer in the stream, where no copy reads it: every crewd failed stop, for good, as
// the stream refuses deletes), an events subject likewise, or the lease's key (it overwrote the lease: the writer
// lost it at its next renewal). The writer answers only to an inbox, as every follower's request names, and decides
// nothing for another subject, as for a message that asks for no answer.
func TestWriterAnswersOnlyToAnInbox(t *testing.T) {
	w, nc, js := startWriterWithClient(t)
	cfg := w.o.Log
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, cfg.Stream)
	require.NoError(t, err)
	lease, err := js.KeyValue(ctx, "crewlog_"+cfg.Stream+"_writer")
	require.NoError(t, err)

	for i, reply := range []string{
		cfg.Subject(),
		cfg.EventSubject("r1"),
		"$KV.crewlog_" + cfg.Stream + "_writer.writer",
		cfg.CommandSubject(),
		"elsewhere",
	} {
		m := &nats.Msg{Subject: cfg.CommandSubject(), Reply: reply, Data: encodedRunCreate(t, "hostile")}
		require.NoError(t, nc.PublishMsg(m))
		require.NoError(t, nc.Flush())
		require.Eventually(t, func() bool { return w.lostAnswers.Load() == uint64(i+1) }, 10*time.Second,
			10*time.Millisecond, "reply subject %q: refused, not answered", reply)

		info, err := stream.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, w.Sequence(), info.State.LastSeq, "reply subject %q: the stream holds only the writer's", reply)
		e, err := lease.Get(ctx, "writer")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(e.Value()), "w/"), "reply subject %q: the lease is the writer's: %q",
			reply, e.Value())
	}
	require.NoError(t, w.Err())
	require.True(t, w.Writer())

	rep, err := nc.Request(cfg.CommandSubject(), encodedRunCreate(t, "r1"), 10*time.Second)
	require.NoError(t, err, "a follower's request, answered to its inbox")
	require.NotEmpty(t, rep.Data)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, w.Sequence(), info.State.LastSeq)
	require.Positive(t, info.State.LastSeq, "the hostile requests decided nothing; r1 was")
}
