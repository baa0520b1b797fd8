package eventlog

import (
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// TestVerifyNamesTheDamagedOutcome: an outcome whose positions lie past the head, wrap past 2^64, name records of
// another command, or hold a first position without a count (or the converse) is damage to that outcome, and Verify
// names its key: not a record it happens to point at, nor the records a later check finds named by no outcome or by
// two. A later check alone would report each case elsewhere, or not at all: an outcome stretched over the next
// command's first record leaves every record inside an outcome of its own command.
func TestVerifyNamesTheDamagedOutcome(t *testing.T) {
	// buildSample: cmd-a wrote positions 1-2, cmd-b 3-4, cmd-c 5-6, cmd-d 7-8; the head is 8.
	cases := map[string]struct {
		id      string
		outcome Outcome
		reason  string
	}{
		"last position one past the head": {"cmd-d", Outcome{First: 7, Count: 3}, "beyond the head 8"},
		"count wrapping past 2^64 to position 0": {"cmd-b", Outcome{First: 4, Count: math.MaxUint64 - 2},
			"beyond the head 8"},
		"an id of no record naming another command's records": {"cmd-0", Outcome{First: 1, Count: 2},
			`points to position 1, which belongs to command "cmd-a"`},
		"last position the next command's first record": {"cmd-b", Outcome{First: 3, Count: 3},
			`points to position 5, which belongs to command "cmd-c"`},
		"a first position with no count": {"rej-a", Outcome{First: 5}, "outcome positions first=5 count=0"},
		"a count with no first position": {"cmd-a", Outcome{Count: 2}, "outcome positions first=0 count=2"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := buildSample(t)
			defer l.Close()
			key := outcomeKey("", c.id)
			require.NoError(t, l.db.Set(key, c.outcome.encode(), pebble.Sync))
			_, err := l.Verify(nil)
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, keyString(key), ce.Key, "%v", err)
			require.Zero(t, ce.Position, "%v", err)
			require.Contains(t, ce.Reason, c.reason)
		})
	}
}
