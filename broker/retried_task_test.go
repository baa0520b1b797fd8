package broker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestARetryEndsThePreviousAttemptsConnections: a worker connection belongs to the attempt of its task it said hello
// in. A retry starts a new attempt: the connections of the one before are ended at once, and none of them acts for
// the new one — not when the task was retried while running, and not when it ended and was retried before the feed,
// which ends the connections of ended credentials, got to the end (the retry made the task live again, and the
// credential's secret is still the task's). A hello with that secret after the retry is the new attempt's.
func TestARetryEndsThePreviousAttemptsConnections(t *testing.T) {
	for _, tc := range []struct {
		name string
		// aheadOfTheFeed: the task fails and is retried before the feed acts on the failure.
		aheadOfTheFeed bool
	}{
		{"retried while running", false},
		{"retried after it failed, ahead of the feed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, s, o, w := endingRun(t)
			if tc.aheadOfTheFeed {
				entered, release := f.holdFeed()
				o.ok("task.transition", map[string]any{"taskId": taskP, "to": "failed", "error": "crashed"})
				recv(t, entered, "stop of the feed at the task's failure") // the feed has seen the end, and ended nothing yet
				o.ok("task.transition", map[string]any{"taskId": taskP, "to": "queued", "reason": "retry"})

				r := w.call("msg.send", map[string]any{"to": "parent", "body": "from the ended attempt"})
				require.NotNil(t, r.Error, "the ended attempt's connection sent a message for the next: %s", r.Result)
				require.Equal(t, wire.CodeStaleToken, r.Error.Code)
				release()
			} else {
				o.ok("task.transition", map[string]any{"taskId": taskP, "to": "queued", "reason": "retry"})
				end := w.untilError()
				require.Equal(t, "", end.ID, "ended without a request")
				require.Equal(t, wire.CodeStaleToken, end.Error.Code)
				require.Equal(t, wire.MsgTaskTerminal, end.Error.Message)
			}
			w.closed()

			next := f.dial()
			next.hello(runR, taskP, s.p)
			o.ok("task.transition", map[string]any{"taskId": taskP, "to": "running"})
			next.ok("msg.send", map[string]any{"to": "parent", "body": "from the new attempt"})
		})
	}
}
