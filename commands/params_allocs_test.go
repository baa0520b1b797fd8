package commands

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseMembersAllocatesWhatItKeeps: a parse allocates its reader, its command and what the command keeps, nothing
// to note the keys it read or to look for one it did not (a strict method's unknown key), where the list of keys read
// grew by append, an allocation at its 1st, 2nd, 3rd, 5th and 9th key, and the look for an unknown key made a list of
// every key given: about half the allocations of a settle's parse.
func TestParseMembersAllocatesWhatItKeeps(t *testing.T) {
	for _, tc := range []struct {
		method  string
		caller  Caller
		members string
		want    float64 // the reader and the command, then what the command keeps, as summed
	}{
		// Three strings and the *int64 of usageTokens.
		{"delegate.settle", fxOrch, `{"subId":"sub-1","outcome":"done","text":"ok","usageTokens":3}`, 2 + 3 + 1},
		// The list of one recipient and its string, the body compacted (its buffer and its string), two strings.
		{"msg.send", fxWorker, `{"to":"orchestrator","body":{"x":1},"kind":"note","priority":"high"}`, 2 + 2 + 2 + 2},
		// Six strings (ten keys read, four of them absent).
		{"task.create", fxOrch,
			`{"taskId":"t2","role":"rr","agent":"aa","title":"tt","cwd":"/w","stepId":"s1","depth":1}`, 2 + 6},
		// The prompt, the role and its pointer, maxTurns' *int64 and its *int, timeoutSec's *float64.
		{"delegate.request", fxWorker, `{"prompt":"pp","role":"rr","maxTurns":2,"timeoutSec":30}`, 2 + 1 + 2 + 2 + 1},
	} {
		t.Run(tc.method, func(t *testing.T) {
			var members map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(tc.members), &members))
			cmd, err := ParseMembers(tc.method, members, tc.caller)
			require.NoError(t, err)
			require.Equal(t, tc.method, cmd.Kind())
			allocs := testing.AllocsPerRun(100, func() {
				_, _ = ParseMembers(tc.method, members, tc.caller)
			})
			if raceDetector {
				// A scanner the race detector's pool dropped is made again: about one measurement of 100 parses
				// in forty averages one allocation more (race_on_test.go).
				require.GreaterOrEqual(t, allocs, tc.want)
				require.LessOrEqual(t, allocs, tc.want+1)
			} else {
				require.Equal(t, tc.want, allocs)
			}
		})
	}
}

// TestEveryMethodsReadsFitTheReadersOwnList: no method reads more keys than the reader notes without an allocation.
func TestEveryMethodsReadsFitTheReadersOwnList(t *testing.T) {
	for _, name := range Methods() {
		info, ok := DescribeMethod(name)
		require.True(t, ok, name)
		require.LessOrEqual(t, len(info.Params), len(paramReader{}.readInline), name)
	}
}
