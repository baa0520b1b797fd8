package eventlog

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// damagingFS serves a table's bytes as a disk that damaged them would, once on: every read of a table flips a byte
// of what it returns, so each block read from then on fails its checksum (the blocks read before stay cached, whole).
// With eio it answers EIO instead: a read that fails.
type damagingFS struct {
	vfs.FS
	on  *atomic.Bool
	eio bool
}

func (fs damagingFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return damagingFile{File: f, fs: fs}, nil
}

type damagingFile struct {
	vfs.File
	fs damagingFS
}

func (f damagingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	switch {
	case !f.fs.on.Load() || n == 0:
	case f.fs.eio:
		return 0, &os.PathError{Op: "read", Path: "table", Err: syscall.EIO}
	default:
		p[0] ^= 0xff
	}
	return n, err
}

// TestReadsReportADamagedTableAsCorrupt: every read of the log that meets a table block failing its checksum, on a
// read-only open (whose reads return it rather than crash), returns damage (ErrCorrupt), as Verify does; they
// returned Pebble's report as it came, which a caller (crewctl replay) could not tell from a read that failed. A read
// that fails (EIO) stays an error of its own, never ErrCorrupt. Open's own reads are reads of the log too.
func TestReadsReportADamagedTableAsCorrupt(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, nil)
	require.NoError(t, err)
	big := bytes.Repeat([]byte{'x'}, 64<<10) // a block of its own
	for i := range 200 {                     // tables of many blocks
		_, err = l.Append(Write{Principal: "p", CommandID: fmt.Sprintf("c%d", i), Events: []Event{ev("a", "test.e")}})
		require.NoError(t, err)
	}
	_, err = l.Append(Write{Principal: "q", CommandID: "r", Code: "rejected", Reason: "no"}) // a tally of q's
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(200, big))
	require.NoError(t, l.SaveView("a", 200, big))
	require.NoError(t, l.SaveSummaries([]Summary{{Stream: "a", Ord: 1, Position: 200, Data: big}}))
	require.NoError(t, l.db.Flush())
	require.NoError(t, l.Close())

	drain := func(it *Iterator) error {
		for it.Next() {
		}
		return it.Close()
	}
	reads := []struct {
		name string
		read func(l *Log) error
	}{
		{"Read", func(l *Log) error { return drain(l.Read(1)) }},
		{"ReadTransient", func(l *Log) error { return drain(l.ReadTransient(1)) }},
		{"ReadChained", func(l *Log) error { return drain(l.ReadChained(1)) }},
		{"ReadChained from 100", func(l *Log) error { return drain(l.ReadChained(100)) }},
		{"ReadChainedTransient", func(l *Log) error { return drain(l.ReadChainedTransient(1)) }},
		{"ReadChainedTransient from 100", func(l *Log) error { return drain(l.ReadChainedTransient(100)) }},
		{"ReadStream", func(l *Log) error { return drain(l.ReadStream("a", 1)) }},
		{"Event", func(l *Log) error { _, err := l.Event(1); return err }},
		{"Streams", func(l *Log) error { _, err := l.Streams(); return err }},
		{"Outcome", func(l *Log) error { _, err := l.Outcome("p", "c99"); return err }},
		{"Outcomes", func(l *Log) error { return l.Outcomes(func(Outcome) error { return nil }) }},
		{"LatestSnapshot", func(l *Log) error { _, err := l.LatestSnapshot(); return err }},
		{"View", func(l *Log) error { _, _, err := l.View("a"); return err }},
		{"LatestSummary", func(l *Log) error { _, err := l.LatestSummary("a", 200); return err }},
		{"Summaries", func(l *Log) error {
			_, err := l.Summaries(0, false, 200, func(Summary) bool { return true })
			return err
		}},
		{"EventlessOutcomes", func(l *Log) error { _, err := l.EventlessOutcomes("q"); return err }},
	}
	for _, r := range reads {
		for _, eio := range []bool{false, true} {
			name := r.name
			if eio {
				name += " EIO"
			}
			t.Run(name, func(t *testing.T) {
				on := new(atomic.Bool)
				ro, err := Open(dir, &Options{ReadOnly: true, FS: damagingFS{FS: vfs.Default, on: on, eio: eio}})
				require.NoError(t, err)
				defer ro.Close()
				on.Store(true)
				err = r.read(ro)
				require.Error(t, err, "the read met no block it had not cached")
				if eio {
					require.ErrorIs(t, err, syscall.EIO)
					require.NotErrorIs(t, err, ErrCorrupt, "a read that failed is not damage")
					return
				}
				require.ErrorIs(t, err, ErrCorrupt)
				var ce *CorruptError
				require.ErrorAs(t, err, &ce)
				require.Regexp(t, `(file|table) 0*[1-9][0-9]*`, ce.Reason, "it names the damaged table")
			})
		}
	}

	// Open reads the format marker and the head from the tables too.
	for _, eio := range []bool{false, true} {
		on := new(atomic.Bool)
		on.Store(true)
		_, err := Open(dir, &Options{ReadOnly: true, FS: damagingFS{FS: vfs.Default, on: on, eio: eio}})
		if eio {
			require.ErrorIs(t, err, syscall.EIO)
			require.NotErrorIs(t, err, ErrCorrupt, "a read that failed is not damage")
			continue
		}
		require.ErrorIs(t, err, ErrCorrupt)
	}
}

// TestLatestSnapshotReadFailureIsNotCorruption: a read of a snapshot's first chunk that fails (EIO), after the read
// of its last found it, is not damage: LatestSnapshot said the snapshot had vanished, a *CorruptError, so crewctl
// replay --diff called a store corrupt that may be whole.
func TestLatestSnapshotReadFailureIsNotCorruption(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = l.Append(Write{Events: evs("a", 10)})
	require.NoError(t, err)
	require.NoError(t, l.db.Flush())
	data := bytes.Repeat([]byte{'x'}, 3*snapshotChunk) // chunks of a block each, in a table of their own
	require.NoError(t, l.SaveSnapshot(10, data))
	require.NoError(t, l.db.Flush())
	require.NoError(t, l.Close())

	eio := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpFileReadAt && op.Offset == 0 {
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	})}
	ro, err := Open(dir, &Options{ReadOnly: true, FS: errorfs.Wrap(vfs.Default, eio)})
	require.NoError(t, err)
	defer ro.Close()
	eio.On() // the snapshot's header, in its table's first block; its last chunk lies further on
	_, err = ro.LatestSnapshot()
	require.ErrorIs(t, err, syscall.EIO)
	require.NotErrorIs(t, err, ErrCorrupt, "a read that failed is not damage")

	eio.Off()
	snap, err := ro.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, data, snap.Data)
}
