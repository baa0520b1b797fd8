package natslog

import (
	"context"
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
func TestWritersCopyLostInACrashIsCopiedFromTheStream(t *testing.T) {
	js := connect(t, startServer(t))
	fs := vfs.NewCrashableMem()
	local, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	w, err := Open(context.Background(), js, local, testConfig)
	require.NoError(t, err)
	for _, err := range stage(t, w, group1("g1"), groupAcross("g2"), group1("g3")) {
		require.NoError(t, err)
	}

	crashed, err := eventlog.Open("db", &eventlog.Options{FS: fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})})
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
