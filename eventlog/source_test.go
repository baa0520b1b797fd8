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
