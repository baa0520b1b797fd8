package eventlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
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

// A crash after views were saved loses at most the last one, never damages one: each save awaits the sync that
// followed the one before, and SaveSnapshot syncs the WAL first, so the view saved before it is durable with it.
func TestACrashLosesTheLastViewAndDamagesNone(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l, err := Open("db", &Options{FS: mem})
	require.NoError(t, err)
	_, err = l.Append(Write{Events: evs("run", 6)})
	require.NoError(t, err)
	type crash struct {
		fs       vfs.FS
		min, max uint64 // the view's position the reopened store may hold (0: none)
	}
	var crashes []crash
	for pos := uint64(1); pos <= 5; pos++ {
		require.NoError(t, l.SaveView("run", pos, fmt.Appendf(nil, "view@%d", pos)))
		for _, pct := range []int{0, 50, 100} {
			fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(pos, uint64(pct)))})
			crashes = append(crashes, crash{fs, pos - 1, pos})
		}
	}
	require.NoError(t, l.SaveView("run", 6, []byte("view@6")))
	require.NoError(t, l.SaveSnapshot(6, []byte("s6")))
	crashes = append(crashes, crash{mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), 6, 6})
	require.NoError(t, l.Close())

	for i, c := range crashes {
		r, err := Open("db", &Options{FS: c.fs})
		require.NoError(t, err, "crash %d", i)
		_, err = r.Verify(nil)
		require.NoError(t, err, "crash %d", i)
		pos, data, err := r.View("run")
		if c.min == 0 && errors.Is(err, ErrNotFound) {
			require.NoError(t, r.Close())
			continue
		}
		require.NoError(t, err, "crash %d", i)
		require.Equal(t, fmt.Sprintf("view@%d", pos), string(data), "crash %d", i)
		require.True(t, c.min <= pos && pos <= c.max, "crash %d: view at %d, want %d..%d", i, pos, c.min, c.max)
		require.NoError(t, r.Close())
	}
}
