package commands

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAListIsDecodedNoFurtherThanOnePastItsBound: a worker's msg.send to, wait.request options and mailbox.ack /
// mailbox.deliver messageIds are lists the command refuses past a bound (MaxRecipients, MaxAskOptions,
// MaxMessageIDs) whatever they hold. A frame of tens of thousands of short strings is parsed into one past the bound,
// so that a request the decision refuses for its length is refused as it was (the same message), where it was decoded
// whole — a frame of 60,000 one-char strings cost megabytes of slices, and the command held its list in the writer's
// queue until the decision refused it. An element past the bound that is no string is refused by the parse as it was;
// one that is null is read as the empty string, as it was.
func TestAListIsDecodedNoFurtherThanOnePastItsBound(t *testing.T) {
	list := func(n int, last string) string {
		return "[" + strings.Repeat(`"ab",`, n-1) + last + "]"
	}
	const many = 20000
	for _, tc := range []struct {
		method, key, rest string
		bound             int
		kept              func(Command) []string
		// refusal is the decision's refusal of any list past the bound (decided without state), "" where the
		// decision reads the state first.
		refusal string
	}{
		{"msg.send", "to", `"body":"b"`, MaxRecipients, func(c Command) []string { return c.(*MessageSend).To },
			"msg.send: recipient count out of range"},
		{"wait.request", "options", `"question":"q"`, MaxAskOptions,
			func(c Command) []string { return c.(*WaitRequest).Options },
			"wait.request: options must hold 1..16 strings"},
		{"mailbox.ack", "messageIds", "", MaxMessageIDs,
			func(c Command) []string { return c.(*MailboxAck).MessageIDs },
			"mailbox.ack: messageIds must list 1..1024 ids"},
		{"mailbox.deliver", "messageIds", "", MaxMessageIDs,
			func(c Command) []string { return c.(*MailboxDeliver).MessageIDs },
			"mailbox.deliver: messageIds must list 1..1024 ids"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			params := func(l string) json.RawMessage {
				if tc.rest == "" {
					return json.RawMessage(`{"` + tc.key + `":` + l + `}`)
				}
				return json.RawMessage(`{"` + tc.key + `":` + l + `,` + tc.rest + `}`)
			}
			for _, n := range []int{tc.bound, tc.bound + 1, tc.bound + 2, many} {
				cmd, err := ParseCommand(tc.method, params(list(n, `"ab"`)), fxWorker)
				require.NoError(t, err, "%d elements", n)
				require.Len(t, tc.kept(cmd), min(n, tc.bound+1), "%d elements", n)
				if n > tc.bound {
					_, err := cmd.decide(nil, &Env{})
					var rej *RejectedError
					require.ErrorAs(t, err, &rej, "%d elements", n)
					require.Equal(t, tc.refusal, rej.Message, "%d elements", n)
				}
			}

			// An element past the bound that is no string is refused as one within it is; a null one is "".
			_, within := ParseCommand(tc.method, params(list(2, `7`)), fxWorker)
			require.Error(t, within)
			_, err := ParseCommand(tc.method, params(list(many, `7`)), fxWorker)
			require.Equal(t, within, err)
			cmd, err := ParseCommand(tc.method, params(list(many, `null`)), fxWorker)
			require.NoError(t, err)
			require.Len(t, tc.kept(cmd), tc.bound+1)
		})
	}
}
