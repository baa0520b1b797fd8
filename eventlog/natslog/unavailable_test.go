package natslog

import (
	"context"
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
	srv, err := server.NewServer(&server.Options{DontListen: true, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second))
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	require.NoError(t, err)
	t.Cleanup(nc.Close)

	cfg := Config{Stream: "CREWLOG", Existing: true}
	var asked atomic.Int32
	_, err = nc.Subscribe("$JS.API.STREAM.INFO."+cfg.Stream, func(m *nats.Msg) {
		resp := map[string]any{"type": "io.nats.jetstream.api.v1.stream_info_response"}
		if asked.Add(1) <= 2 {
			resp["error"] = map[string]any{"code": 503, "err_code": jsErrClusterNotAvail, "description": "JetStream system temporarily unavailable"}
		} else {
			resp["config"] = map[string]any{"name": cfg.Stream, "subjects": []string{cfg.Subject(), cfg.eventsWildcard()},
				"storage": "file", "retention": "limits", "discard": "new", "num_replicas": 3, "allow_atomic": true}
			resp["created"] = time.Now().UTC()
			resp["state"] = map[string]any{}
		}
		b, _ := json.Marshal(resp)
		_ = m.Respond(b)
	})
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	st, err := EnsureStream(context.Background(), js, cfg)
	require.NoError(t, err)
	require.Equal(t, cfg.Stream, st.CachedInfo().Config.Name)
	require.Equal(t, int32(3), asked.Load())
}
