package natslog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A JetStream API request answered "JetStream system temporarily
// unavailable" (a meta or stream group without a leader, while NATS elects
// one) is asked again within the call's bound, not failed: crewd's start
// met it on the stream's create and info after NATS faults. The JetStream
// API here is the test's: a server without JetStream, whose stream info
// answers unavailable twice, then the stream.
func TestUnavailableJetStreamIsAskedAgain(t *testing.T) {
	nc := stubServer(t)
	cfg := Config{Stream: "CREWLOG", Existing: true}
	asked := answerUnavailableTwice(t, nc, "$JS.API.STREAM.INFO."+cfg.Stream, "stream_info_response", stubStreamInfo(cfg, true))

	st, err := EnsureStream(context.Background(), stubJetStream(t, nc), cfg)
	require.NoError(t, err)
	require.Equal(t, cfg.Stream, st.CachedInfo().Config.Name)
	require.Equal(t, int32(3), asked.Load())
}

// A JetStream API request whose reply is lost (a NATS node that stopped,
// a leader moving) is given up after the call's own bound, whatever the
// caller's deadline: jetstream bounds a call only when its context has
// none, and crewd starts under --open-timeout (2 minutes), which a lost
// reply of the stream's create or info held its start for. The stub's
// JetStream takes the requests and never answers.
func TestAJetStreamCallWhoseReplyIsLostIsBoundedWhateverTheCallersDeadline(t *testing.T) {
	shortAPITimeout(t)
	for _, existing := range []bool{true, false} { // the stream's info, its create
		nc := stubServer(t)
		cfg := Config{Stream: "CREWLOG", Replicas: 3, Existing: existing}
		_, err := nc.Subscribe("$JS.API.STREAM.>", func(*nats.Msg) {})
		require.NoError(t, err)

		// NB: a failure here takes the caller's deadline, not the bound.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = EnsureStream(ctx, stubJetStream(t, nc), cfg)
		require.ErrorIs(t, err, context.DeadlineExceeded, "existing %v", existing)
		require.NoError(t, ctx.Err(), "given up at the call's bound, not at the caller's deadline (existing %v)", existing)
	}
}

// The consumer a copier reads the stream with is created by one JetStream
// API call, bounded alike: a crewd's start that catches up (cluster.Start)
// was held past a minute by a consumer create whose reply was lost. The
// stub's stream answers its info, and takes consumer creates without
// answering.
func TestAConsumerCreateWhoseReplyIsLostIsBoundedWhateverTheCallersDeadline(t *testing.T) {
	nc := stubServer(t)
	cfg := Config{Stream: "CREWLOG", Existing: true}
	answerUnavailableTwice(t, nc, "$JS.API.STREAM.INFO."+cfg.Stream, "stream_info_response", stubStreamInfo(cfg, true))
	st, err := EnsureStream(context.Background(), stubJetStream(t, nc), cfg)
	require.NoError(t, err)
	_, err = nc.Subscribe("$JS.API.CONSUMER.>", func(*nats.Msg) {})
	require.NoError(t, err)
	shortAPITimeout(t)

	// NB: a failure here takes the caller's deadline, not the bound.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = (&Log{stream: st}).consume(ctx, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, ctx.Err(), "given up at the call's bound, not at the caller's deadline")
}

// Open reads the batch the local copy ends with (batchAt), a start's
// JetStream call as the stream's info is, and asks again while JetStream
// answers that it is temporarily unavailable. The stub's stream serves its
// messages through the API's message get (no direct get), which answers
// unavailable twice, then the manifest of batch "w-1".
func TestUnavailableJetStreamIsAskedAgainForTheCopysLastBatch(t *testing.T) {
	nc, cfg, manifest := stubStreamEndingWithW1(t, false)
	asked := answerUnavailableTwice(t, nc, "$JS.API.STREAM.MSG.GET."+cfg.Stream, "stream_msg_get_response", map[string]any{
		"message": map[string]any{"subject": cfg.Subject(), "seq": 7, "data": base64.StdEncoding.EncodeToString(manifest),
			"time": time.Now().UTC()}})

	requireLastBatchIsW1(t, nc, cfg, asked)
}

// crewlog's streams allow direct gets, so Open's read of the copy's last
// batch goes to $JS.API.DIRECT.GET, answered by the stream's replicas: while
// none answers (a stream leader being elected), the request fails with no
// responders, and it is asked again. The stub answers no responders (a 503
// status) twice, then the manifest of batch "w-1".
func TestNoRespondersToADirectGetIsAskedAgainForTheCopysLastBatch(t *testing.T) {
	nc, cfg, manifest := stubStreamEndingWithW1(t, true)
	requireLastBatchIsW1(t, nc, cfg, answerDirectGetTwice(t, nc, cfg, "503", manifest))
}

// A direct get may reach a replica that has not yet applied the copy's
// last message, which answers that it has no such message (a 404 status):
// the copy holds it, so the stream has it, and it is asked again. A crewd
// started right after a fault failed its start for it.
func TestNotFoundFromALaggingReplicaIsAskedAgainForTheCopysLastBatch(t *testing.T) {
	nc, cfg, manifest := stubStreamEndingWithW1(t, true)
	requireLastBatchIsW1(t, nc, cfg, answerDirectGetTwice(t, nc, cfg, "404", manifest))
}

// answerDirectGetTwice answers cfg's direct gets with status twice, then
// with data as the message at sequence 7; it counts them.
func answerDirectGetTwice(t *testing.T, nc *nats.Conn, cfg Config, status string, data []byte) *atomic.Int32 {
	t.Helper()
	asked := new(atomic.Int32)
	_, err := nc.Subscribe("$JS.API.DIRECT.GET."+cfg.Stream, func(m *nats.Msg) {
		resp := nats.NewMsg(m.Reply)
		if asked.Add(1) <= 2 {
			resp.Header.Set("Status", status)
		} else {
			resp.Header.Set(jetstream.StreamHeader, cfg.Stream)
			resp.Header.Set(jetstream.SequenceHeader, "7")
			resp.Header.Set(jetstream.TimeStampHeaer, time.Now().UTC().Format(time.RFC3339Nano))
			resp.Header.Set(jetstream.SubjectHeader, cfg.Subject())
			resp.Data = data
		}
		_ = m.RespondMsg(resp)
	})
	require.NoError(t, err)
	return asked
}

// stubStreamEndingWithW1 is a stub whose stream (with or without direct
// gets) answers its info unavailable twice, then itself; and the manifest
// of batch "w-1", for the test to serve at sequence 7.
func stubStreamEndingWithW1(t *testing.T, direct bool) (*nats.Conn, Config, []byte) {
	t.Helper()
	nc := stubServer(t)
	cfg := Config{Stream: "CREWLOG", Existing: true}
	answerUnavailableTwice(t, nc, "$JS.API.STREAM.INFO."+cfg.Stream, "stream_info_response", stubStreamInfo(cfg, direct))
	manifest, err := encodeWire(wireManifest{Batch: "w-1", Messages: 1}, 64)
	require.NoError(t, err)
	return nc, cfg, manifest
}

// requireLastBatchIsW1 opens cfg's stream on the stub and requires that the
// copy's last batch, at sequence 7, reads as "w-1" after three requests.
func requireLastBatchIsW1(t *testing.T, nc *nats.Conn, cfg Config, asked *atomic.Int32) {
	t.Helper()
	st, err := EnsureStream(context.Background(), stubJetStream(t, nc), cfg)
	require.NoError(t, err)
	batch, err := batchAt(context.Background(), st, cfg, 7)
	require.NoError(t, err)
	require.Equal(t, "w-1", batch)
	require.Equal(t, int32(3), asked.Load())
}

// stubServer is a server without JetStream: the test answers the JetStream
// API requests it needs.
func stubServer(t *testing.T) *nats.Conn {
	t.Helper()
	srv, err := server.NewServer(&server.Options{DontListen: true, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second))
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

func stubJetStream(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// stubStreamInfo is the info of a crewlog stream of cfg, with or without
// direct gets.
func stubStreamInfo(cfg Config, direct bool) map[string]any {
	return map[string]any{
		"config": map[string]any{"name": cfg.Stream, "subjects": []string{cfg.Subject(), cfg.eventsWildcard()},
			"storage": "file", "retention": "limits", "discard": "new", "num_replicas": 3, "allow_atomic": true,
			"allow_direct": direct},
		"created": time.Now().UTC(), "state": map[string]any{}}
}

// answerUnavailableTwice answers the API requests on subject "JetStream
// system temporarily unavailable" twice, then with answer; it counts them.
func answerUnavailableTwice(t *testing.T, nc *nats.Conn, subject, kind string, answer map[string]any) *atomic.Int32 {
	t.Helper()
	var asked atomic.Int32
	_, err := nc.Subscribe(subject, func(m *nats.Msg) {
		resp := map[string]any{"type": "io.nats.jetstream.api.v1." + kind}
		if asked.Add(1) <= 2 {
			resp["error"] = map[string]any{"code": 503, "err_code": jsErrClusterNotAvail, "description": "JetStream system temporarily unavailable"}
		} else {
			for k, v := range answer {
				resp[k] = v
			}
		}
		b, _ := json.Marshal(resp)
		_ = m.Respond(b)
	})
	require.NoError(t, err)
	return &asked
}

// shortAPITimeout makes apiTimeout 50 ms for t, so a test of a call whose reply is lost is quick.
func shortAPITimeout(t *testing.T) {
	bound := apiTimeout
	apiTimeout = 50 * time.Millisecond
	t.Cleanup(func() { apiTimeout = bound })
}
