package eventlog

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// A record stored past the head, whether right after it or further on, is
// named as what it is, at its own position: not as a record missing after
// the head, which sends the operator looking for an event that was never
// acknowledged. Open refuses it too, as it refuses one right after the head,
// instead of starting a writer whose appends would overwrite it.
func TestRecordBeyondTheHead(t *testing.T) {
	for _, at := range []uint64{9, 11} {
		fs := vfs.NewMem()
		l, err := Open("db", &Options{FS: fs})
		require.NoError(t, err)
		for i := 0; i < 4; i++ {
			_, err := l.Append(Write{CommandID: "cmd-" + string(rune('a'+i)), Events: []Event{ev("run-1", "x"), ev("run-2", "y")}})
			require.NoError(t, err)
		}
		require.NoError(t, l.db.Set(eventKey(at), rawGet(t, l, eventKey(8)), pebble.Sync))

		_, err = l.Verify(nil)
		var ce *CorruptError
		require.ErrorAs(t, err, &ce, "at %d", at)
		require.Equal(t, at, ce.Position, "at %d: %v", at, err)
		require.ErrorContains(t, err, "beyond the head", "at %d", at)
		require.NoError(t, l.Close())

		_, err = Open("db", &Options{FS: fs})
		require.ErrorAs(t, err, &ce, "at %d", at)
		require.Equal(t, at, ce.Position, "at %d: %v", at, err)
	}
}
