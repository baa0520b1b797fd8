package eventlog

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
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

// walFaults fails every operation of one of kinds on a WAL file while it is
// on.
func walFaults(kinds ...errorfs.OpKind) *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && slices.Contains(kinds, op.Kind) {
			return errorfs.ErrInjected
		}
		return nil
	})}
}

// walWriteFaults is a toggle that, on, fails every write to a WAL file, and a channel closed at the first one it
// fails: a write Pebble makes in its WAL's background, after the write it carries has returned.
func walWriteFaults() (*errorfs.Toggle, <-chan struct{}) {
	var once sync.Once
	injected := make(chan struct{})
	toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt) {
			once.Do(func() { close(injected) })
			return errorfs.ErrInjected
		}
		return nil
	})}
	return toggle, injected
}

// walSyncOps are the operations that sync a file.
var walSyncOps = []errorfs.OpKind{errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo}

// openTenAcked opens a log on fs with faults toggled by toggle, and
// acknowledges ten appends of two events each (commands ok-0 … ok-9,
// positions 1–20).
func openTenAcked(t *testing.T, fs vfs.FS, toggle *errorfs.Toggle) *Log {
	t.Helper()
	l, err := Open("db", &Options{FS: errorfs.Wrap(fs, toggle)})
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		_, err := l.Append(Write{CommandID: fmt.Sprintf("ok-%d", i), Events: evs("run", 2)})
		require.NoError(t, err)
	}
	return l
}

// reopenTenAcked reopens the store openTenAcked wrote on fs, after a fault, and requires that it verify and hold
// the ten acknowledged appends. The caller closes it.
func reopenTenAcked(t *testing.T, fs vfs.FS) *Log {
	t.Helper()
	r, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	_, err = r.Verify(nil)
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		_, err := r.Outcome("", fmt.Sprintf("ok-%d", i))
		require.NoError(t, err)
	}
	return r
}
