package broker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
)

// TestMessageBodyPastItsBoundIsOversizeFrame: a msg.send or escalate body longer than pi-crew's 262,144 chars is
// refused oversize-frame, the code pi-crew's broker answers for its body checks (D§7.5, D§7.6), and the connection
// stays. A frame of the default size cannot carry such a body; one of a larger MaxFrame (up to 1 MiB) can. A body
// at the bound is taken.
func TestMessageBodyPastItsBoundIsOversizeFrame(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: 1 << 20}})
	s := f.seed()
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	p := f.dial()
	p.hello(runR, taskP, s.p)
	// msg.send stores its body as its JSON text: a string of n chars takes n+2.
	atBound := strings.Repeat("x", commands.MaxBodyChars-2)
	past := strings.Repeat("x", commands.MaxBodyChars-1)
	tests := []struct {
		name   string
		c      *client
		method string
		params map[string]any
		want   wire.Code // "" for a result
	}{
		{"msg.send at the bound", o, "msg.send", map[string]any{"to": taskP, "body": atBound}, ""},
		{"msg.send past it", o, "msg.send", map[string]any{"to": taskP, "body": past}, wire.CodeOversizeFrame},
		{"msg.send of a worker past it", p, "msg.send", map[string]any{"to": "parent", "body": past},
			wire.CodeOversizeFrame},
		{"escalate at the bound", p, "escalate", map[string]any{"body": strings.Repeat("x", commands.MaxBodyChars)}, ""},
		{"escalate past it", p, "escalate", map[string]any{"body": past + "xx"}, wire.CodeOversizeFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				tc.c.ok(tc.method, tc.params)
				return
			}
			e := tc.c.fails(tc.method, tc.params, tc.want)
			require.Equal(t, tc.method+": body too large", e.Message)
			tc.c.ok("ping", nil)
		})
	}
}
