package eventlog

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// A stream view is read back as saved, replaced by the next one, refused
// beyond the head or on a read-only log, and a flipped byte in it is
// corruption, for View and for Verify alike.
func TestStreamViews(t *testing.T) {
	l, _ := openMem(t)
	_, err := l.Append(Write{Events: []Event{ev("run-a", "x"), ev("run-b", "x"), ev("run-a", "y")}})
	require.NoError(t, err)

	_, _, err = l.View("run-a")
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, l.SaveView("run-a", 1, []byte("first")))
	require.NoError(t, l.SaveView("run-a", 3, []byte("second")))
	pos, data, err := l.View("run-a")
	require.NoError(t, err)
	require.EqualValues(t, 3, pos)
	require.Equal(t, []byte("second"), data)
	require.ErrorIs(t, l.SaveView("run-a", 4, []byte("ahead")), ErrInvalid)
	require.ErrorIs(t, l.SaveView("", 1, nil), ErrInvalid)

	// ViewFunc hands the same bytes to its reader, and returns its error;
	// a missing view never reaches the reader.
	var got []byte
	require.NoError(t, l.ViewFunc("run-a", func(pos uint64, data []byte) error {
		require.EqualValues(t, 3, pos)
		got = append(got, data...)
		return nil
	}))
	require.Equal(t, []byte("second"), got)
	errStop := errors.New("stop")
	require.ErrorIs(t, l.ViewFunc("run-a", func(uint64, []byte) error { return errStop }), errStop)
	require.ErrorIs(t, l.ViewFunc("run-c", func(uint64, []byte) error {
		t.Fatal("read called without a view")
		return nil
	}), ErrNotFound)

	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Views)

	require.NoError(t, l.SaveView("run-b", 3, []byte("not its position")))
	_, err = l.Verify(nil)
	require.ErrorIs(t, err, ErrCorrupt, "a view stamped with another stream's position")
	require.NoError(t, l.SaveView("run-b", 2, []byte("ok")))

	flipLastByte(t, l, viewKey("run-a"))
	_, _, err = l.View("run-a")
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = l.Verify(nil)
	require.ErrorIs(t, err, ErrCorrupt)
}
