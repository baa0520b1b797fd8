package commands

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestShapeProxyResult: a result keeps T14's fields (content, structuredContent, isError, terminate), canonical,
// and is an error result only when isError is exactly true (T20's reading of a flag: nothing truthy).
func TestShapeProxyResult(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		isError   bool
	}{
		{`{"content":[],"isError":true}`, `{"content":[],"isError":true}`, true},
		{`{"content":[],"isError":false}`, `{"content":[],"isError":false}`, false},
		{`{"content":[],"isError":1}`, `{"content":[],"isError":1}`, false},
		{`{"content":[],"isError":"true"}`, `{"content":[],"isError":"true"}`, false},
		{`{"terminate":true,"usage":{"in":1},"details":{},"structuredContent":{"b":1,"a":2}}`,
			`{"structuredContent":{"a":2,"b":1},"terminate":true}`, false},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			got, isError, err := ShapeProxyResult(json.RawMessage(tc.raw))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.isError, isError)
		})
	}
}

// TestProxyResultLimitAsRecorded: the limit bounds a delivered result as it is recorded (canonical, "<" written as
// \u003c), and the limit itself is allowed: a result recorded in exactly proxyPayloadBytes bytes is delivered, one a
// byte longer is refused payload-too-large with the recorded size, though each is shorter as sent.
func TestProxyResultLimitAsRecorded(t *testing.T) {
	for _, tc := range []struct {
		result  string
		bytes   int64 // as recorded
		refused bool
	}{
		{`{"content":"<"}`, 20, false},
		{`{"content":"<a"}`, 21, true},
	} {
		t.Run(tc.result, func(t *testing.T) {
			w := runWorld(t, "proxyPayloadBytes=20")
			for _, r := range []loopRequest{
				orch("job.create", `{"jobId":"J","taskId":"W","tools":`+loopGrant+`}`),
				orch("lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"root"}`),
				{events.RoleWorker, "proxy.request", `{"jobId":"J","requestId":"r1","nonce":"secret-1","tool":"read"}`},
				orch("manifest.revalidate", `{"jobId":"J","requestId":"r1","tools":`+loopGrant+`}`),
			} {
				require.Nil(t, w.send(r).err, "setup %s", r.method)
			}
			o := w.send(orch("proxy.complete", `{"jobId":"J","requestId":"r1","nonce":"secret-1","result":`+
				tc.result+`}`))
			require.Len(t, o.events, 1)
			if !tc.refused {
				require.Nil(t, o.err)
				p := events.PayloadAs[events.ProxyCompleted](o.events[0])
				require.NotNil(t, p)
				require.Equal(t, tc.bytes, p.ResultBytes)
				return
			}
			require.NotNil(t, o.err)
			require.Equal(t, events.ProxyReasonPayloadTooLarge, o.err.Reason)
			p := events.PayloadAs[events.ProxyRejected](o.events[0])
			require.NotNil(t, p)
			require.Equal(t, tc.bytes, p.Bytes)
			require.Equal(t, int64(20), p.Limit)
		})
	}
}
