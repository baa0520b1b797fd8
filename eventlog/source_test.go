package eventlog

import (
	"errors"
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

// A copy that appends the same writes in the same order, synced or not, has the same positions, versions,
// outcomes and hash chain as the log it copies: what a replica is checked against.
func TestACopyOfTheSameWritesHasTheSameChain(t *testing.T) {
	groups := [][]Write{
		{{Principal: "p", CommandID: "c1", Events: evs("r1", 2), Result: []byte("one")}},
		{{Principal: "p", CommandID: "c2", Code: "bad", Reason: "no"}, {Events: evs("r2", 1)}},
		{{Principal: "q", CommandID: "c1", Events: append(evs("r1", 1), evs("r2", 2)...), Fingerprint: []byte{7}}},
	}
	original, _ := openMem(t)
	defer original.Close()
	copies := map[string]func(l *Log, seq uint64, ws []Write) error{
		"AppendFrom": func(l *Log, seq uint64, ws []Write) error {
			_, err := l.AppendFrom(seq, ws...)
			return err
		},
		"AppendFromUnsynced": func(l *Log, seq uint64, ws []Write) error {
			_, err := l.AppendFromUnsynced(seq, ws...)
			return err
		},
	}
	for i, ws := range groups {
		_, err := original.Append(ws...)
		require.NoError(t, err, "group %d", i)
	}
	for name, appendFrom := range copies {
		t.Run(name, func(t *testing.T) {
			c, _ := openMem(t)
			defer c.Close()
			for i, ws := range groups {
				require.NoError(t, appendFrom(c, uint64(10*(i+1)), ws), "group %d", i)
			}
			require.Equal(t, readAll(t, original), readAll(t, c), "positions, versions and hashes")
			wantPos, wantHash := original.Head()
			gotPos, gotHash := c.Head()
			require.Equal(t, wantPos, gotPos)
			require.Equal(t, wantHash, gotHash)
			for _, k := range [][2]string{{"p", "c1"}, {"p", "c2"}, {"q", "c1"}} {
				want, err := original.Outcome(k[0], k[1])
				require.NoError(t, err)
				got, err := c.Outcome(k[0], k[1])
				require.NoError(t, err)
				require.Equal(t, want, got, "outcome %v", k)
			}
		})
	}
}

// Check refuses what Append would refuse, with the same error, and appends nothing either way.
func TestCheckRefusesWhatAppendWouldAndAppendsNothing(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	_, err := l.Append(Write{Principal: "p", CommandID: "done", Events: evs("r", 2)})
	require.NoError(t, err)
	headBefore, _ := l.Head()
	for _, c := range []struct {
		name string
		ws   []Write
		want error
	}{
		{"no writes", nil, ErrInvalid},
		{"no stream", []Write{{Events: []Event{{Type: "t"}}}}, ErrInvalid},
		{"recorded command", []Write{{Principal: "p", CommandID: "done", Events: evs("r", 1)}}, ErrDuplicateCommand},
		{"stale version", []Write{{Expected: []Expectation{{Stream: "r", Version: 1}}, Events: evs("r", 1)}},
			&ConflictError{Stream: "r", Expected: 1, Actual: 2}},
		{"sound", []Write{{Principal: "p", CommandID: "new", Events: evs("r", 1)}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := l.Check(c.ws...)
			if c.want == nil {
				require.NoError(t, err)
				return
			}
			var ce *ConflictError
			if errors.As(c.want, &ce) {
				var got *ConflictError
				require.ErrorAs(t, err, &got)
				require.Equal(t, ce, got)
			} else {
				require.ErrorIs(t, err, c.want)
			}
			head, _ := l.Head()
			require.Equal(t, headBefore, head, "Check appends nothing")
			_, appendErr := l.Append(c.ws...)
			require.Equal(t, err.Error(), appendErr.Error(), "Append refuses it alike")
		})
	}
	head, _ := l.Head()
	require.Equal(t, headBefore, head, "nothing was appended")
	o, err := l.Outcome("p", "new")
	require.ErrorIs(t, err, ErrNotFound, "a sound write checked is not recorded: %+v", o)
}
