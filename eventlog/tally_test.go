package eventlog

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// refusal is an outcome of principal's command id that wrote no event.
func refusal(principal, id string) Write {
	return Write{Principal: principal, CommandID: id, Code: "conflict", Reason: "r", Result: []byte("no")}
}

func requireTallies(t *testing.T, l *Log, want map[string]uint64) {
	t.Helper()
	for p, n := range want {
		got, err := l.EventlessOutcomes(p)
		require.NoError(t, err)
		require.Equal(t, n, got, "principal %q", p)
	}
}

// A principal's tally counts its outcomes that wrote no event, however
// they were appended (several in one append, staged and not yet synced),
// and nothing else: not an outcome with events, not a write without a
// command id, not another principal's. It survives a reopen.
func TestTallyCountsEachPrincipalsEventlessOutcomes(t *testing.T) {
	l, fs := openMem(t)
	_, err := l.Append(
		refusal("wA", "a1"), refusal("wA", "a2"), refusal("wB", "b1"),
		Write{Principal: "wA", CommandID: "a3", Events: evs("run", 1)},
		Write{Events: evs("run", 1)},
	)
	require.NoError(t, err)
	requireTallies(t, l, map[string]uint64{"wA": 2, "wB": 1, "wC": 0, "": 0})

	s, err := l.Stage(refusal("wA", "a4"))
	require.NoError(t, err)
	requireTallies(t, l, map[string]uint64{"wA": 3})
	_, err = s.Wait()
	require.NoError(t, err)

	_, err = l.Append(Write{Principal: "wB", CommandID: "b2", Events: evs("run", 2)}, refusal("wC", "c1"))
	require.NoError(t, err)
	requireTallies(t, l, map[string]uint64{"wA": 3, "wB": 1, "wC": 1})

	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.Equal(t, 3, rep.Tallies)
	require.NoError(t, l.Close())

	r, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer r.Close()
	requireTallies(t, r, map[string]uint64{"wA": 3, "wB": 1, "wC": 1})
}

// A group's tally counts the outcomes with no event of the principals
// SetTallyGroup puts in it, appended once the function is set, and no
// outcome with events.
func TestGroupTallyCountsItsPrincipalsEventlessOutcomes(t *testing.T) {
	l, fs := openMem(t)
	_, err := l.Append(refusal("a/w1", "before"))
	require.NoError(t, err)
	l.SetTallyGroup(func(p string) string {
		group, _, _ := strings.Cut(p, "/")
		return group
	})
	_, err = l.Append(refusal("a/w1", "x1"), refusal("a/w2", "x1"), refusal("b/w1", "x1"), refusal("admin", "x1"),
		Write{Principal: "a/w1", CommandID: "x2", Events: evs("run", 1)})
	require.NoError(t, err)
	s, err := l.Stage(refusal("a/w3", "x1"))
	require.NoError(t, err)
	requireGroups := func(l *Log) {
		t.Helper()
		for g, n := range map[string]uint64{"a": 3, "b": 1, "admin": 1, "c": 0} {
			got, err := l.EventlessOutcomesOfGroup(g)
			require.NoError(t, err)
			require.Equal(t, n, got, "group %q", g)
		}
	}
	requireGroups(l)
	_, err = s.Wait()
	require.NoError(t, err)
	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.Equal(t, 5+3, rep.Tallies, "five principals' tallies and three groups'")
	require.NoError(t, l.Close())

	r, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	defer r.Close()
	requireGroups(r)
}

// A tally is written in the batch that records its outcomes: after a crash
// at any point, the tally of every principal, and of their group, is
// exactly its number of eventless outcomes that survived.
func TestTallyAndItsOutcomesSurviveACrashTogether(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l, err := Open("db", &Options{FS: mem})
	require.NoError(t, err)
	l.SetTallyGroup(func(string) string { return "all" })
	rng := rand.New(rand.NewPCG(7, 7))
	var clones []*vfs.MemFS
	for i := range 40 {
		ws := []Write{refusal(fmt.Sprintf("w%d", i%3), fmt.Sprintf("r%d", i))}
		if i%4 == 0 {
			ws = append(ws, Write{Principal: "w0", CommandID: fmt.Sprintf("e%d", i), Events: evs("run", 1)})
		}
		s, err := l.Stage(ws...)
		require.NoError(t, err)
		if i%5 == 0 {
			clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng}))
		}
		_, err = s.Wait()
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())

	for i, fs := range clones {
		r, err := Open("db", &Options{FS: fs})
		require.NoError(t, err, "clone %d", i)
		_, err = r.Verify(nil)
		require.NoError(t, err, "clone %d", i)
		var all uint64
		for p := range 3 {
			principal := fmt.Sprintf("w%d", p)
			var refusals uint64
			for j := p; j < 40; j += 3 {
				if _, err := r.Outcome(principal, fmt.Sprintf("r%d", j)); err == nil {
					refusals++
				}
			}
			got, err := r.EventlessOutcomes(principal)
			require.NoError(t, err)
			require.Equal(t, refusals, got, "clone %d, principal %s", i, principal)
			all += refusals
		}
		got, err := r.EventlessOutcomesOfGroup("all")
		require.NoError(t, err)
		require.Equal(t, all, got, "clone %d: the group's tally", i)
		require.NoError(t, r.Close())
	}
}

// Verify reads every tally: one that does not decode, or that counts more
// outcomes with no event than its principal has (a group's: than the log
// has), is corruption.
func TestVerifyChecksTallies(t *testing.T) {
	cases := []struct {
		name  string
		key   []byte
		value []byte
		want  string
	}{
		{"more than the outcomes", appendTallyKey(nil, "wA"), appendTallyValue(nil, 3), "tally of 3 outcomes with no event where the principal has 2"},
		{"a principal with none", appendTallyKey(nil, "wZ"), appendTallyValue(nil, 1), "where the principal has 0"},
		{"a flipped byte", appendTallyKey(nil, "wA"), func() []byte { v := appendTallyValue(nil, 2); v[5] ^= 1; return v }(), "checksum mismatch"},
		{"not one count", appendTallyKey(nil, "wA"), seal([]byte{2, 2}), "is not one count"},
		{"a malformed key", []byte{prefixTally, 9, 'w'}, appendTallyValue(nil, 0), "malformed tally key"},
		{"a group's more than all", appendGroupTallyKey(nil, "g"), appendTallyValue(nil, 3), "group tally of 3 outcomes with no event where the log has 2"},
		{"a group's flipped byte", appendGroupTallyKey(nil, "g"), func() []byte { v := appendTallyValue(nil, 2); v[5] ^= 1; return v }(), "checksum mismatch"},
		{"a malformed group key", []byte{prefixGroupTally, 9, 'g'}, appendTallyValue(nil, 0), "malformed group tally key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := openMem(t)
			defer l.Close()
			_, err := l.Append(refusal("wA", "a1"), refusal("wA", "a2"))
			require.NoError(t, err)
			_, err = l.Verify(nil)
			require.NoError(t, err)
			require.NoError(t, l.db.Set(c.key, c.value, pebble.Sync))
			_, err = l.Verify(nil)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, c.want)
		})
	}
}
