package natslog

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// Every crewlog stream has its own subject, the manifest is on the groups
// subject, and the batch headers are what the server keeps.
func TestGroupIsOneBatchOnItsStreamsSubjects(t *testing.T) {
	js := connect(t, startServer(t))
	w := openLog(t, js)
	_, err := w.Commit(groupAcross("g"))
	require.NoError(t, err)

	want := []string{"crewlog.CREWLOG.groups", "crewlog.CREWLOG.events.r1", "crewlog.CREWLOG.events.r2",
		"crewlog.CREWLOG.events.~JGVuZ2luZQ"}
	var batch string
	for i, subject := range want {
		m, err := w.stream.GetMsg(context.Background(), uint64(i+1))
		require.NoError(t, err)
		require.Equal(t, subject, m.Subject)
		if i == 0 {
			batch = m.Header.Get(headerBatchID)
			require.NotEmpty(t, batch)
			require.Equal(t, "0", m.Header.Get(jetstream.ExpectedLastSeqHeader))
		}
		require.Equal(t, batch, m.Header.Get(headerBatchID))
		require.Equal(t, strconv.Itoa(i+1), m.Header.Get(headerBatchSeq))
		require.Equal(t, i == len(want)-1, m.Header.Get(headerBatchCommit) == "1")
	}
	info, err := w.stream.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(len(want)), info.State.Msgs)
	require.Equal(t, uint64(len(want)), w.Sequence())

	// A group that wrote no events is its manifest alone.
	_, err = w.Commit([]eventlog.Write{{Principal: "admin", CommandID: "rej", Code: "bad-params", Reason: "no", Result: []byte("{}")}})
	require.NoError(t, err)
	m, err := w.stream.GetMsg(context.Background(), uint64(len(want)+1))
	require.NoError(t, err)
	require.Equal(t, "crewlog.CREWLOG.groups", m.Subject)
	require.Empty(t, m.Header.Get(headerBatchID))
	c := openLog(t, js)
	o, err := c.Local().Outcome("admin", "rej")
	require.NoError(t, err)
	require.Equal(t, "bad-params", o.Code)
}

// A group larger than a batch may be is cut at command boundaries into
// batches that each fit; a command that alone does not fit is refused and
// nothing is published.
func TestLargeGroupIsCutIntoBatchesAtCommandBoundaries(t *testing.T) {
	js := connect(t, startServer(t))
	cfg := testConfig
	cfg.MaxBatchMessages = 4
	w, err := Open(context.Background(), js, openLocal(t), cfg)
	require.NoError(t, err)
	ev := func(stream string) eventlog.Event {
		return eventlog.Event{Stream: stream, Type: "run.created", Time: 1, Payload: []byte{0x80}}
	}
	var ws []eventlog.Write
	for i := range 7 { // each its own crewlog stream: 1 + 7 messages
		ws = append(ws, eventlog.Write{Principal: "admin", CommandID: string(rune('a' + i)), Result: []byte("{}"),
			Events: []eventlog.Event{ev(string(rune('a' + i)))}})
	}
	first, err := w.Commit(ws)
	require.NoError(t, err)
	require.Equal(t, uint64(1), first)
	info, err := w.stream.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(4+4+2), info.State.Msgs, "batches of three commands, three and one, each with its manifest")
	require.Equal(t, info.State.LastSeq, w.Sequence())

	// Five chunks (the streams alternate): more than a batch of 4 holds.
	_, err = w.Commit([]eventlog.Write{{Principal: "admin", CommandID: "big", Result: []byte("{}"),
		Events: []eventlog.Event{ev("x"), ev("y"), ev("x"), ev("y"), ev("x")}}})
	require.ErrorIs(t, err, ErrGroupTooLarge)
	require.ErrorIs(t, err, eventlog.ErrInvalid)
	info2, err := w.stream.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, info.State.Msgs, info2.State.Msgs, "nothing of the refused group published")

	c := openLog(t, js)
	requireCopy(t, w.Local(), c.Local(), 7)
}

// publishRaw stores msgs one by one as plain messages (no batch, no fence):
// what a foreign publisher, or a batch that was not atomic, would leave.
func publishRaw(t *testing.T, js jetstream.JetStream, msgs ...*nats.Msg) {
	t.Helper()
	for _, m := range msgs {
		_, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: m.Subject, Data: m.Data})
		require.NoError(t, err)
	}
}

func rawBatch(t *testing.T, id string, after uint64, ws []eventlog.Write) []*nats.Msg {
	t.Helper()
	msgs, err := encodeBatch(testConfig, batchLimits{messages: 100, bytes: 1 << 20}, id, "", after, 0, ws)
	require.NoError(t, err)
	return msgs
}

// A copy stops with ErrDiverged at anything that is not a whole group
// following the copy: events without their manifest, a group cut short by
// the next manifest or by the end of the stream, a message of another
// batch, a batch's messages out of order (its events would be copied in
// another order than the writer's), a group that follows another position
// than the copy's head.
func TestCopyRefusesPartialOrForeignBatches(t *testing.T) {
	cases := map[string]func(g, h []*nats.Msg) []*nats.Msg{
		"events without a manifest":      func(g, _ []*nats.Msg) []*nats.Msg { return g[1:] },
		"a manifest before the end":      func(g, h []*nats.Msg) []*nats.Msg { return append(g[:2:2], h...) },
		"the stream ends inside":         func(g, _ []*nats.Msg) []*nats.Msg { return g[:3] },
		"a message of another batch":     func(g, h []*nats.Msg) []*nats.Msg { return append(g[:3:3], h[3]) },
		"a message on another's subject": func(g, _ []*nats.Msg) []*nats.Msg { return swapSubjects(g, 1, 2) },
		"a batch's messages out of order": func(g, _ []*nats.Msg) []*nats.Msg {
			return []*nats.Msg{g[0], g[2], g[1], g[3]}
		},
		"a group after another position": func(_, _ []*nats.Msg) []*nats.Msg {
			return rawBatch(t, "g", 4, groupAcross("g"))
		},
	}
	for name, msgsOf := range cases {
		t.Run(name, func(t *testing.T) {
			js := connect(t, startServer(t))
			w := openLog(t, js) // creates the stream
			publishRaw(t, js, msgsOf(rawBatch(t, "g", 0, groupAcross("g")), rawBatch(t, "h", 0, groupAcross("h")))...)
			_, err := w.CatchUp(context.Background())
			require.ErrorIs(t, err, ErrDiverged)
			head, _ := w.Local().Head()
			require.Zero(t, head)
		})
	}
	// The same messages, whole, copy.
	js := connect(t, startServer(t))
	w := openLog(t, js)
	publishRaw(t, js, rawBatch(t, "g", 0, groupAcross("g"))...)
	n, err := w.CatchUp(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func swapSubjects(msgs []*nats.Msg, i, j int) []*nats.Msg {
	out := make([]*nats.Msg, len(msgs))
	for k, m := range msgs {
		c := *m
		out[k] = &c
	}
	out[i].Subject, out[j].Subject = msgs[j].Subject, msgs[i].Subject
	return out
}

// A batch the server says it did not store is published again under a new
// id, against the same fence: the commit succeeds once, nothing is stored
// twice. The server refuses whole a batch it did not receive whole; and while
// the stream has no leader a batch reaches no one — its messages are dropped
// and its commit is answered "no responders" — so a stream leader election
// costs the writer a wait, not a failover (docs/cluster.md). Here the first
// two attempts of each batch meet that.
func TestBatchNotStoredIsPublishedAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(msgs []*nats.Msg) []*nats.Msg
	}{
		{"a message lost", func(msgs []*nats.Msg) []*nats.Msg {
			return append(msgs[:1:1], msgs[2:]...) // the first chunk never arrives
		}},
		{"no stream leader", func(msgs []*nats.Msg) []*nats.Msg {
			out := make([]*nats.Msg, len(msgs))
			for i, m := range msgs {
				c := *m
				c.Subject = "crewlog.nobody.listens" // as every message goes while the stream elects a leader
				out[i] = &c
			}
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := connect(t, startServer(t))
			w := openLog(t, js)
			lost := 0
			w.loseMessages = func(attempt int, msgs []*nats.Msg) []*nats.Msg {
				if attempt > 2 {
					return msgs
				}
				lost++
				return tc.lose(msgs)
			}
			first, err := w.Commit(groupAcross("g"))
			require.NoError(t, err, "a batch the server did not store fails the writer")
			require.Equal(t, uint64(1), first)
			require.Equal(t, 2, lost)
			info, err := w.stream.Info(context.Background())
			require.NoError(t, err)
			require.Equal(t, uint64(groupAcrossMessages), info.State.Msgs, "stored once")
			requireCopy(t, w.Local(), openLog(t, js).Local(), 4)
		})
	}
}

// A group of more messages than one pull brings (500, the copy's consumer's
// default) is reassembled across pulls, by a catching-up copy and by a
// follower.
func TestGroupAcrossPullsIsCopied(t *testing.T) {
	js := connect(t, startServer(t))
	w, f := openLog(t, js), openLog(t, js)
	var ws []eventlog.Write
	for i := range 600 {
		ws = append(ws, eventlog.Write{Principal: "admin", CommandID: strconv.Itoa(i), Result: []byte("{}"),
			Events: []eventlog.Event{{Stream: "run-" + strconv.Itoa(i), Type: "run.created", Time: 1, Payload: []byte{0x80}}}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	copied := make(chan struct{}, 4)
	done := make(chan error, 1)
	go func() { done <- f.Follow(ctx, func() { copied <- struct{}{} }) }()
	_, err := w.Commit(ws)
	require.NoError(t, err)
	require.Equal(t, uint64(601), w.Sequence())
	requireCopy(t, w.Local(), openLog(t, js).Local(), 600)
	for f.Sequence() < w.Sequence() {
		<-copied
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	requireCopy(t, w.Local(), f.Local(), 600)
}

// CheckWrite lets through exactly the writes a batch can carry: an event
// as large as it allows, with every other field at the log's limits, is
// committed; one byte more is refused (eventlog.ErrInvalid) before
// anything is published.
func TestCheckWriteRefusesAnEventNoMessageCarries(t *testing.T) {
	const maxPayload = 64 << 10
	srv, err := StartServer(ServerOptions{Name: "t", StoreDir: filepath.Join(t.TempDir(), "nats"), MaxPayload: maxPayload})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	js := connect(t, srv)
	w := openLog(t, js)
	write := func(payload int) eventlog.Write {
		long := strings.Repeat("x", eventlog.MaxIDLen)
		return eventlog.Write{Principal: "admin", CommandID: long, Result: []byte("{}"),
			Events: []eventlog.Event{{Stream: strings.Repeat("$", eventlog.MaxStreamLen), Type: strings.Repeat("t", eventlog.MaxTypeLen),
				SchemaVersion: 65535, Time: -1, CausationID: long, CorrelationID: long, ActorRole: long, ActorTask: long,
				Payload: make([]byte, payload)}}}
	}
	empty := write(0)
	largest := maxPayload - eventBytes(&empty.Events[0]) - eventlog.MaxStreamLen - chunkRoom

	over := write(largest + 1)
	require.ErrorIs(t, w.CheckWrite(&over), eventlog.ErrInvalid)
	fits := write(largest)
	require.NoError(t, w.CheckWrite(&fits))
	_, err = w.Commit([]eventlog.Write{fits})
	require.NoError(t, err)
}

// CheckWrite's refusal of a write no batch carries names the limit the write met and what to change, and is still
// ErrGroupTooLarge: too many messages for a batch (max_batch_size), or an outcome too large for a batch's manifest
// (half of the servers' max_payload). An outcome too large for the manifest was told as events that "need more
// messages".
func TestCheckWriteNamesTheLimitAWriteMeets(t *testing.T) {
	const maxPayload = 2 << 10
	srv, err := StartServer(ServerOptions{Name: "t", StoreDir: filepath.Join(t.TempDir(), "nats"), MaxPayload: maxPayload})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	cfg := testConfig
	cfg.MaxBatchMessages = 4
	w, err := Open(context.Background(), connect(t, srv), openLocal(t), cfg)
	require.NoError(t, err)
	ev := func(stream string) eventlog.Event {
		return eventlog.Event{Stream: stream, Type: "run.created", Time: 1, Payload: []byte{0x80}}
	}
	for _, tc := range []struct {
		name  string
		write eventlog.Write
		says  []string
	}{
		{"too many messages", eventlog.Write{Principal: "admin", CommandID: "c", Result: []byte("{}"),
			Events: []eventlog.Event{ev("x"), ev("y"), ev("x"), ev("y")}},
			[]string{"need 5 messages", "(4:", "max_batch_size", "--nats-max-batch"}},
		{"an outcome too large for the manifest", eventlog.Write{Principal: "admin", CommandID: "c", Code: "no-manifest",
			Reason: "no-manifest", Result: bytes.Repeat([]byte("r"), 1100)},
			[]string{"outcome of about", "manifest, which may hold 1024 bytes", "max_payload is 2048 bytes",
				"raise max_payload above crewd's --max-frame"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := w.CheckWrite(&tc.write)
			require.ErrorIs(t, err, ErrGroupTooLarge)
			require.ErrorIs(t, err, eventlog.ErrInvalid)
			for _, says := range tc.says {
				require.Contains(t, err.Error(), says)
			}
			require.NotContains(t, err.Error(), "invalid append")
		})
	}
}
