package eventlog

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// The filter never calls a key it was given absent, across the growth of
// its chain, and calls few others present: under 0.5 % of new keys after
// 150,000 outcomes (a busy hour's). Every part adds its own false
// positives (about 0.2 % once full), so a chain that started small, 4,096
// keys, had six parts there and called 0.9 % present, each a read of
// Pebble on the writer's path.
func TestOutcomeFilterNoFalseNegatives(t *testing.T) {
	f := newOutcomeFilter()
	f.ready = true
	const n = 150_000
	for i := range n {
		f.add(f.hash(outcomeKey("oR", fmt.Sprintf("cmd-%d", i))))
	}
	require.Greater(t, len(f.parts), 1, "the chain grew")
	for i := range n {
		require.False(t, f.provesAbsent(f.hash(outcomeKey("oR", fmt.Sprintf("cmd-%d", i)))), "cmd-%d", i)
	}
	fp := 0
	for i := range n {
		if !f.provesAbsent(f.hash(outcomeKey("oR", fmt.Sprintf("new-%d", i)))) {
			fp++
		}
	}
	require.Less(t, fp, n/200, "false positives among %d new keys", n)

	f.ready = false
	require.False(t, f.provesAbsent(f.hash(outcomeKey("oR", "new-1"))), "an unready filter proves nothing")
	var none *outcomeFilter
	none.add(none.hash([]byte("k")))
	require.False(t, none.provesAbsent(none.hash([]byte("k"))), "no filter proves nothing")
}

// appendIDs records one outcome per id for principal, in writes of up to
// 100, and fails the test on an error.
func appendIDs(t *testing.T, l *Log, principal string, ids []string) {
	t.Helper()
	require.NoError(t, appendIDsErr(l, principal, ids))
}

func appendIDsErr(l *Log, principal string, ids []string) error {
	for len(ids) > 0 {
		k := min(len(ids), 100)
		ws := make([]Write, k)
		for i, id := range ids[:k] {
			ws[i] = Write{Principal: principal, CommandID: id, Events: evs("S", 1), Result: []byte(`{}`), Fingerprint: []byte{1}}
		}
		if _, err := l.Append(ws...); err != nil {
			return err
		}
		ids = ids[k:]
	}
	return nil
}

func idRange(prefix string, from, to int) []string {
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// A reopened log rebuilds the filter from the outcomes it holds, and the
// outcomes appended while the build reads its view of the store are in it
// too: every recorded id is still found and refused as a duplicate, and
// new ids are answered without reading Pebble.
func TestOutcomeFilterRebuiltAtOpen(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	stored := idRange("old", 0, 2*filterScanChunk+10) // more than one chunk of the scan
	appendIDs(t, l, "oR", stored)
	require.NoError(t, l.Close())

	reached, release := make(chan struct{}), make(chan struct{})
	l, err = Open("db", &Options{FS: fs, afterFilterView: func() { close(reached); <-release }})
	require.NoError(t, err)
	defer l.Close()
	require.Nil(t, l.filterDone, "no build before the first append")
	stored = append(stored, "first")
	appendIDs(t, l, "oR", stored[len(stored)-1:]) // starts the build
	<-reached
	// The build's view is taken; these are only in the filter if the
	// appends add them.
	during := idRange("during", 0, 50)
	appendIDs(t, l, "oR", during)
	close(release)
	<-l.filterDone
	l.mu.Lock()
	ready := l.filter.ready
	l.mu.Unlock()
	require.True(t, ready)

	for _, id := range append(append([]string(nil), stored...), during...) {
		o, err := l.Outcome("oR", id)
		require.NoError(t, err, id)
		require.Equal(t, []byte{1}, o.Fingerprint, id)
	}
	for _, id := range []string{stored[0], stored[len(stored)-1], during[0], during[len(during)-1]} {
		_, err := l.Append(Write{Principal: "oR", CommandID: id, Events: evs("S", 1)})
		require.ErrorIs(t, err, ErrDuplicateCommand, id)
		_, err = l.Outcome("oX", id)
		require.ErrorIs(t, err, ErrNotFound, "another principal's id: %s", id)
	}

	before := l.outcomeReads.Load()
	fresh := idRange("new", 0, 2000)
	for _, id := range fresh {
		_, err := l.Outcome("oR", id)
		require.ErrorIs(t, err, ErrNotFound, id)
	}
	appendIDs(t, l, "oR", fresh)
	require.Less(t, l.outcomeReads.Load()-before, int64(40),
		"2,000 new ids looked up and appended: only the filter's false positives read Pebble")
}

// Until the build has finished (it starts at the first append), lookups
// read Pebble; a log opened read-only, or at an older format, has no filter.
func TestOutcomeFilterUnreadyReadsPebble(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	appendIDs(t, l, "oR", idRange("old", 0, 10))
	require.NoError(t, l.Close())

	reached, release := make(chan struct{}), make(chan struct{})
	l, err = Open("db", &Options{FS: fs, afterFilterView: func() { close(reached); <-release }})
	require.NoError(t, err)
	before := l.outcomeReads.Load()
	_, err = l.Outcome("oR", "new-0")
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, before+1, l.outcomeReads.Load(), "a log nothing was appended to has not built its filter")
	appendIDs(t, l, "oR", []string{"first"})
	<-reached
	before = l.outcomeReads.Load()
	_, err = l.Outcome("oR", "new-1")
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, before+1, l.outcomeReads.Load(), "an unready filter sends the lookup to Pebble")
	_, err = l.Outcome("oR", "old-3")
	require.NoError(t, err)
	close(release)
	require.NoError(t, l.Close())

	ro, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	require.Nil(t, ro.filter)
	_, err = ro.Outcome("oR", "old-3")
	require.NoError(t, err)
	require.NoError(t, ro.Close())

	// A store at an older format has its outcomes in a layout the filter's build does not read, and a format step
	// writes outcome keys no append adds to it: it has no filter either.
	l, err = Open("db", &Options{FS: fs})
	require.NoError(t, err)
	toLegacy(t, l)
	require.NoError(t, l.Close())
	old, err := Open("db", &Options{FS: fs, AllowOlderFormat: true})
	require.NoError(t, err)
	defer old.Close()
	require.Nil(t, old.filter)
}

// TestOutcomeFilterPartsDoubleInSize: the first part is sized for filterFirstCap keys (128 KiB at 2 bytes a key,
// taken with the first key) and each next one, added when the newest is full, for twice the keys of the one before,
// so that the chain's parts, each adding its false positives, grow with the log's logarithm, not its size.
func TestOutcomeFilterPartsDoubleInSize(t *testing.T) {
	f := newOutcomeFilter()
	caps := func() []int {
		var out []int
		for _, p := range f.parts {
			out = append(out, p.cap)
		}
		return out
	}
	const bytesPerKey = filterBitsPerKey / 8
	added := 0
	for _, want := range []struct {
		keys int   // added so far
		caps []int // of the parts, in order
	}{
		{1, []int{filterFirstCap}},
		{filterFirstCap, []int{filterFirstCap}},
		{filterFirstCap + 1, []int{filterFirstCap, 2 * filterFirstCap}},
		{3 * filterFirstCap, []int{filterFirstCap, 2 * filterFirstCap}},
		{3*filterFirstCap + 1, []int{filterFirstCap, 2 * filterFirstCap, 4 * filterFirstCap}},
	} {
		for ; added < want.keys; added++ {
			f.add(f.hash(outcomeKey("oR", strconv.Itoa(added))))
		}
		require.Equal(t, want.caps, caps(), "after %d keys", added)
		sum := 0
		for _, c := range want.caps {
			sum += c
		}
		require.EqualValues(t, sum*bytesPerKey, f.bytes(), "after %d keys", added)
	}
	require.EqualValues(t, 128<<10, filterFirstCap*bytesPerKey)
}
