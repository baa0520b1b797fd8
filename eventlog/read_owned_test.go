package eventlog

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestReadEventsOwnTheirMemory: an event Read or ReadStream returned is the caller's for good, unlike one of
// ReadTransient: its strings and Payload stay what they were however Pebble's memory moves on after it was read (the
// iterator reading on and closed, the memtable that held the records flushed and filled again by later appends,
// the same records read again from the table they were flushed to, and that iterator closed).
func TestReadEventsOwnTheirMemory(t *testing.T) {
	const n = 64
	write := func(t *testing.T, l *Log, prefix string) {
		for i := range n {
			e := ev(fmt.Sprintf("%s-%d", prefix, i%2), fmt.Sprintf("test.%s%d", prefix, i))
			e.ActorTask = fmt.Sprintf("%s_task_%d", prefix, i)
			e.Payload = fmt.Appendf(nil, "\xc4\x10%s payload %06d", prefix, i) // bin 8 of 16 bytes
			_, err := l.Append(Write{CommandID: fmt.Sprintf("%s-cmd-%d", prefix, i), Events: []Event{e}})
			require.NoError(t, err)
		}
	}
	readers := map[string]func(l *Log) *Iterator{
		"Read":       func(l *Log) *Iterator { return l.Read(1) },
		"ReadStream": func(l *Log) *Iterator { return l.ReadStream("a-0", 1) },
	}
	for name, read := range readers {
		t.Run(name, func(t *testing.T) {
			// NB: memtables all of Pebble's first size (256 KiB; they grow to MemTableSize otherwise), since Pebble
			// reuses a flushed memtable's memory for a later one only when their sizes match.
			l, err := Open("db", &Options{FS: vfs.NewMem(), MemTableSize: 256 << 10})
			require.NoError(t, err)
			defer l.Close()
			write(t, l, "a")
			<-l.filterDone // its scan holds the memtable, which no flush could then reuse

			// The first events, kept as Read hands them out, and copies of them made at once.
			it := read(l)
			var kept, want []Event
			for len(kept) < 4 && it.Next() {
				kept = append(kept, *it.Event())
				want = append(want, cloneEvent(it.Event()))
			}
			require.Len(t, kept, 4)
			for it.Next() { // read on
			}
			require.NoError(t, it.Close())

			// Each flush moves the memtable's records to a table and leaves its memory to the memtable after the
			// next: the writes after the second flush fill the memory that held the records.
			for _, prefix := range []string{"b", "c", "d"} {
				require.NoError(t, l.db.Flush())
				write(t, l, prefix)
				tr := l.ReadTransient(1) // the records again, from the table's blocks
				for tr.Next() {
				}
				require.NoError(t, tr.Close())
			}
			require.Equal(t, want, kept)
		})
	}
}
