package eventlog

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// openMem opens a log on a fresh in-memory file system.
func openMem(t testing.TB) (*Log, vfs.FS) {
	t.Helper()
	fs := vfs.NewMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	return l, fs
}

func ev(stream, typ string) Event {
	return Event{
		Stream: stream, Type: typ, SchemaVersion: 1, Time: 1_700_000_000_000_000_000,
		ActorRole: "worker", ActorTask: "01_explore",
		Payload: []byte{0x81, 0xa1, 'k', 0xa1, 'v'},
	}
}

func evs(stream string, n int) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = ev(stream, fmt.Sprintf("test.e%d", i))
	}
	return out
}

// readAll returns every durable event.
func readAll(t testing.TB, l *Log) []Event {
	t.Helper()
	var out []Event
	it := l.Read(1)
	for it.Next() {
		out = append(out, *it.Event())
	}
	require.NoError(t, it.Close())
	return out
}

// principalByStream is a VerifyOptions.Principal for tests: the stream's
// orchestrator wrote every record.
func principalByStream(dst []byte, ev *Event) []byte { return append(append(dst, 'o'), ev.Stream...) }

// cloneEvent is a copy of ev that owns its memory, for an event of
// ReadTransient or VerifyOptions.Visit kept past the call.
func cloneEvent(ev *Event) Event {
	c := *ev
	for _, s := range []*string{&c.Stream, &c.Type, &c.CommandID, &c.CausationID, &c.CorrelationID, &c.ActorRole, &c.ActorTask} {
		*s = strings.Clone(*s)
	}
	c.Payload = bytes.Clone(c.Payload)
	return c
}

// flipLastByte corrupts the value under k behind the log's back.
func flipLastByte(t *testing.T, l *Log, k []byte) {
	t.Helper()
	v, closer, err := l.db.Get(k)
	require.NoError(t, err)
	bad := append([]byte(nil), v...)
	closer.Close()
	bad[len(bad)-1] ^= 1
	require.NoError(t, l.db.Set(k, bad, pebble.Sync))
}
