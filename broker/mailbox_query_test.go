package broker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestMailboxQueryPending: query.mailbox lists every message of the mailbox, acknowledged ones too, and with pending
// true only those not acknowledged yet; pending is a boolean (null, as absent), anything else bad-params.
func TestMailboxQueryPending(t *testing.T) {
	o, p := orchestratorAndP(t, 0)
	for _, body := range []string{"one", "two"} {
		o.ok("msg.send", map[string]any{"to": taskP, "body": body})
	}
	var sent []any
	for _, m := range p.ok(wire.MethodMsgInbox, nil)["messages"].([]any) {
		sent = append(sent, m.(map[string]any)["id"])
	}
	require.Len(t, sent, 2)
	p.ok("mailbox.ack", map[string]any{"messageIds": sent[:1]})

	for _, tc := range []struct {
		pending any // nil: absent
		want    []any
	}{
		{pending: nil, want: sent},
		{pending: false, want: sent},
		{pending: true, want: sent[1:]},
	} {
		t.Run(fmt.Sprint(tc.pending), func(t *testing.T) {
			params := map[string]any{"taskId": taskP}
			if tc.pending != nil {
				params["pending"] = tc.pending
			}
			var got []any
			for _, m := range o.ok("query.mailbox", params)["messages"].([]any) {
				got = append(got, m.(map[string]any)["id"])
			}
			require.Equal(t, tc.want, got)
		})
	}
	for _, pending := range []any{"true", 1} {
		e := o.fails("query.mailbox", map[string]any{"taskId": taskP, "pending": pending}, wire.CodeBadParams)
		require.Contains(t, e.Message, "pending", "%v", pending)
	}
}
