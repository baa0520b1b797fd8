package eventlog

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// AppendFrom records the source sequence with the group, refuses one that
// does not grow, and the sequence survives a reopen; Verify accepts it.
func TestAppendFromRecordsSource(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	src, err := l.Source()
	require.NoError(t, err)
	require.Zero(t, src)

	w := Write{Principal: "p", CommandID: "c1", Events: []Event{{Stream: "r", Type: "run.created", Payload: []byte{0x80}}}}
	first, err := l.AppendFrom(7, w)
	require.NoError(t, err)
	require.Equal(t, uint64(1), first)
	_, err = l.AppendFrom(7, Write{Principal: "p", CommandID: "c2"})
	require.ErrorIs(t, err, ErrInvalid)
	head, _ := l.Head()
	require.Equal(t, uint64(1), head, "a refused AppendFrom leaves no trace")
	require.NoError(t, l.Close())

	l, err = Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	src, err = l.Source()
	require.NoError(t, err)
	require.Equal(t, uint64(7), src)
	_, err = l.Verify(nil)
	require.NoError(t, err)
}

// AppendFromUnsynced appends as AppendFrom does but does not wait for the
// sync: a crash before it loses a suffix of the groups, each whole, source
// included (the copy resumes before them); a synced append after them
// makes them durable too, in order.
func TestAppendFromUnsyncedIsDurableWithTheNextSync(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	w := func(id string) Write {
		return Write{Principal: "p", CommandID: id, Events: []Event{{Stream: "r", Type: "run.created", Payload: []byte{0x80}}}}
	}
	_, err = l.AppendFromUnsynced(3, w("c1"))
	require.NoError(t, err)
	_, err = l.AppendFromUnsynced(5, w("c2"))
	require.NoError(t, err)
	head, _ := l.Head()
	require.Equal(t, uint64(2), head, "readers see an unsynced group at once")

	reopen := func() (uint64, uint64) {
		c, err := Open("db", &Options{FS: fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})})
		require.NoError(t, err)
		defer c.Close()
		src, err := c.Source()
		require.NoError(t, err)
		head, _ := c.Head()
		return src, head
	}
	src, head := reopen()
	require.Contains(t, [][2]uint64{{0, 0}, {3, 1}, {5, 2}}, [2]uint64{src, head},
		"a crash loses a suffix of the unsynced groups, each whole with its source")

	_, err = l.AppendFrom(9, w("c3"))
	require.NoError(t, err)
	src, head = reopen()
	require.Equal(t, uint64(9), src)
	require.Equal(t, uint64(3), head, "the synced group made the unsynced ones before it durable")
}
