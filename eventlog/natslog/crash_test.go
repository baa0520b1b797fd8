package natslog

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// The writer appends acknowledged groups to its local copy without a sync
// of its own (the stream holds them, fsynced by a majority): a crash that
// loses them from the copy loses nothing, for the copy resumes from the
// last group it holds and copies the rest from the stream, and the writer
// then writes on from there.
//
// NB: each copy is followed by a local sync the next awaits (eventlog's appendUnsynced), so that only the last one's
// may be pending at a crash, and the crash lost nothing when that sync won the race: the copies' syncs are dropped,
// as a disk that has not written them yet, so that the crash loses them all.
func TestWritersCopyLostInACrashIsCopiedFromTheStream(t *testing.T) {
	js := connect(t, startServer(t))
	mem := vfs.NewCrashableMem()
	fs := &syncDroppingFS{FS: mem}
	local, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	w, err := Open(context.Background(), js, local, testConfig)
	require.NoError(t, err)
	fs.drop.Store(true)
	for _, err := range stage(t, w, group1("g1"), groupAcross("g2"), group1("g3")) {
		require.NoError(t, err)
	}

	crashed, err := eventlog.Open("db", &eventlog.Options{FS: mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})})
	require.NoError(t, err)
	t.Cleanup(func() { crashed.Close() })
	source, err := crashed.Source()
	require.NoError(t, err)
	require.Less(t, source, w.Sequence(), "the crash lost the copy's unsynced groups")

	r, err := Open(context.Background(), js, crashed, testConfig)
	require.NoError(t, err)
	_, err = r.CatchUp(context.Background())
	require.NoError(t, err)
	require.Equal(t, w.Sequence(), r.Sequence())
	requireCopy(t, w.Local(), crashed, 6)

	_, err = r.Commit(group1("g4"))
	require.NoError(t, err)
	requireCopy(t, r.Local(), openLog(t, js).Local(), 7)
}

// syncDroppingFS is a file system whose files' syncs do nothing while drop holds: what they would have made durable
// stays unsynced, as on a disk that has not written it yet (a crash clone of the memory below loses it).
type syncDroppingFS struct {
	vfs.FS
	drop atomic.Bool
}

func (fs *syncDroppingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(f, err)
}

func (fs *syncDroppingFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(f, err)
}

func (fs *syncDroppingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &syncDroppingFile{File: f, drop: &fs.drop}, nil
}

type syncDroppingFile struct {
	vfs.File
	drop *atomic.Bool
}

func (f *syncDroppingFile) Sync() error {
	if f.drop.Load() {
		return nil
	}
	return f.File.Sync()
}

func (f *syncDroppingFile) SyncData() error {
	if f.drop.Load() {
		return nil
	}
	return f.File.SyncData()
}

func (f *syncDroppingFile) SyncTo(length int64) (fullSync bool, err error) {
	if f.drop.Load() {
		return false, nil
	}
	return f.File.SyncTo(length)
}
