package eventlog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseKeys: every key parser takes any bytes (a store read back is
// outside the process) without a panic, and a key it accepts is the one the
// writer makes of the parts it returns, so that no two keys parse alike.
func FuzzParseKeys(f *testing.F) {
	for _, k := range [][]byte{
		streamKeyOf("run-1", 7), summaryKey("run-1", 9), outcomeKey("task:r/t", "cmd-1"), viewKey("$engine"),
		streamKeyOf("", 0), outcomeKey("", ""), viewKey(""), eventKey(3), snapshotKey(4), snapshotChunkKey(4, 1),
		appendTallyKey(nil, "task:r/t"), appendTallyKey(nil, ""),
	} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k []byte) {
		_ = keyString(k)
		if s, v, ok := parseStreamKey(k); ok {
			require.Equal(t, k, streamKeyOf(s, v))
		}
		if s, pos, ok := parseSummaryKey(k); ok {
			require.Equal(t, k, summaryKey(s, pos))
		}
		if p, id, ok := parseOutcomeKey(k); ok {
			require.Equal(t, k, outcomeKey(p, id))
		}
		if s, ok := parseViewKey(k); ok {
			require.Equal(t, k, viewKey(s))
		}
		if p, ok := parseTallyKey(k); ok {
			require.Equal(t, k, appendTallyKey(nil, p))
		}
	})
}

func streamKeyOf(stream string, version uint64) []byte { return appendStreamKey(nil, stream, version) }
