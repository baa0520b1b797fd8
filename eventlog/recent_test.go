package eventlog

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// outcomeAnswer is what Outcome said: the outcome, or that it found none.
type outcomeAnswer struct {
	Outcome  Outcome
	NotFound bool
}

func askOutcome(t *testing.T, l *Log, principal, id string) outcomeAnswer {
	t.Helper()
	o, err := l.Outcome(principal, id)
	if err != nil {
		require.ErrorIs(t, err, ErrNotFound)
		return outcomeAnswer{NotFound: true}
	}
	return outcomeAnswer{Outcome: o}
}

// A log with the index of recent outcomes answers exactly as one without
// it — for recorded ids, unknown ids, another principal's id, an id two
// principals share with different fingerprints, rejections with and
// without events, outcomes the bounds have evicted — and so does each after
// a reopen, when the index starts empty.
func TestRecentOutcomesAnswerAsPebble(t *testing.T) {
	logs := map[string]*Options{
		"indexed":   nil,
		"tiny":      {RecentOutcomes: 3, RecentOutcomeBytes: 1 << 20},
		"few bytes": {RecentOutcomes: 1000, RecentOutcomeBytes: 2 * recentOverhead},
		"unindexed": {RecentOutcomes: -1},
	}
	fss := map[string]vfs.FS{}
	open := func(name string) *Log {
		var o Options
		if logs[name] != nil {
			o = *logs[name]
		}
		if fss[name] == nil {
			fss[name] = vfs.NewMem()
		}
		o.FS = fss[name]
		l, err := Open("db", &o)
		require.NoError(t, err)
		return l
	}
	appends := [][]Write{
		{
			{Principal: "oA", CommandID: "x", Events: evs("A", 2), Result: []byte(`{"ref":"gc-1"}`), Fingerprint: []byte{1, 2}},
			// The same id, another principal and another request.
			{Principal: "oB", CommandID: "x", Events: evs("B", 1), Result: []byte(`{"ref":"gc-2"}`), Fingerprint: []byte{9}},
			{Principal: "e", CommandID: "expire:A:gc-1", Code: "bad-params", Reason: "r", Result: []byte("m")},
		},
		{{Principal: "oA", CommandID: "rejected", Events: evs("A", 2), Code: "slots-exhausted", Reason: "full", Fingerprint: []byte{3}}},
		{{Principal: "wA\x00T", CommandID: "empty", Events: evs("A", 1)}},
	}
	for i := range 6 {
		appends = append(appends, []Write{{Principal: "oA", CommandID: fmt.Sprintf("later-%d", i), Events: evs("C", 1),
			Result: make([]byte, 40*i), Fingerprint: []byte{byte(i)}}})
	}
	queries := [][2]string{
		{"oA", "x"}, {"oB", "x"}, {"oC", "x"}, {"", "x"}, {"e", "expire:A:gc-1"}, {"oA", "expire:A:gc-1"},
		{"oA", "rejected"}, {"oB", "rejected"}, {"wA\x00T", "empty"}, {"wA", "\x00Tempty"}, {"oA", "never"},
	}
	for i := range 6 {
		queries = append(queries, [2]string{"oA", fmt.Sprintf("later-%d", i)})
	}

	answers := func(l *Log) []outcomeAnswer {
		var out []outcomeAnswer
		for _, q := range queries {
			out = append(out, askOutcome(t, l, q[0], q[1]))
		}
		return out
	}
	got := map[string][]outcomeAnswer{}
	for name := range logs {
		l := open(name)
		for _, ws := range appends {
			// Each log gets its own copy: Append stamps the events.
			cp := make([]Write, len(ws))
			for i, w := range ws {
				cp[i] = w
				cp[i].Events = append([]Event(nil), w.Events...)
			}
			_, err := l.Append(cp...)
			require.NoError(t, err)
		}
		got[name] = answers(l)
		// A caller that changes what it got changes nothing in the log.
		o, err := l.Outcome("oA", "x")
		require.NoError(t, err)
		o.Result[0], o.Fingerprint[0] = 'X', 0xff
		// A recorded id is refused, whether the index or Pebble knows it.
		for _, q := range [][2]string{{"oA", "x"}, {"oB", "x"}, {"e", "expire:A:gc-1"}, {"oA", "later-5"}} {
			_, err := l.Append(Write{Principal: q[0], CommandID: q[1], Fingerprint: []byte{7}})
			require.ErrorIs(t, err, ErrDuplicateCommand, "%s %v", name, q)
		}
		require.Equal(t, got[name], answers(l), "%s: answers changed by a caller's edit or a refused append", name)
		require.NoError(t, l.Close())

		l = open(name)
		require.Equal(t, got[name], answers(l), "%s: after reopen", name)
		require.NoError(t, l.Close())
	}
	want := got["unindexed"]
	require.True(t, want[2].NotFound && !want[0].NotFound, "the queries cover found and not found")
	require.Equal(t, []byte{1, 2}, want[0].Outcome.Fingerprint, "the id's first request")
	require.Equal(t, []byte{9}, want[1].Outcome.Fingerprint, "the other principal's request under the same id")
	for name := range logs {
		require.Equal(t, want, got[name], name)
	}
}

// The index holds at most its bounds, evicts the oldest first, and never
// indexes an outcome larger than its byte bound.
func TestRecentOutcomesBounded(t *testing.T) {
	r := newRecentOutcomes(4, 10*recentOverhead)
	o := Outcome{First: 1, Count: 1, Result: []byte("r")}
	for i := range 100 {
		r.add(fmt.Sprintf("k%d", i), &o)
		require.LessOrEqual(t, len(r.byKey), 4)
		require.Equal(t, len(r.byKey), r.n)
	}
	for i := range 100 {
		_, ok := r.get([]byte(fmt.Sprintf("k%d", i)))
		require.Equal(t, i >= 96, ok, "k%d", i)
	}

	big := Outcome{Result: make([]byte, 3*recentOverhead)}
	for i := range 10 {
		r.add(fmt.Sprintf("big%d", i), &big)
		require.LessOrEqual(t, r.bytes, r.maxBytes)
	}
	require.True(t, r.contains("big9"))
	require.False(t, r.contains("big7"), "three big entries do not fit in ten overheads")
	require.False(t, r.contains("k99"), "the oldest went first")

	huge := Outcome{Result: make([]byte, 10*recentOverhead)}
	r.add("huge", &huge)
	require.False(t, r.contains("huge"))
	require.True(t, r.contains("big9"), "an outcome too large to index evicts nothing")

	require.Nil(t, newRecentOutcomes(-1, 1<<20), "disabled")
	require.Nil(t, newRecentOutcomes(10, -1), "disabled")
}

// Slots span blocks and are reused: after many times its bound the index
// holds exactly the newest maxEntries outcomes, each under its own key,
// and its slots never outnumber the most entries it held at once — also
// when the byte bound, not the count, keeps it small.
func TestRecentOutcomesSlotsAcrossBlocks(t *testing.T) {
	const max = 2*recentBlock + 452
	r := newRecentOutcomes(max, 1<<30)
	for i := range 4 * max {
		o := Outcome{First: uint64(i + 1), Count: 1, Result: []byte{byte(i)}}
		r.add(fmt.Sprintf("k%d", i), &o)
		require.Equal(t, min(i+1, max), len(r.byKey))
	}
	require.Equal(t, max, r.slots())
	require.Len(t, r.blocks, 3)
	for i := range 4 * max {
		o, ok := r.get([]byte(fmt.Sprintf("k%d", i)))
		require.Equal(t, i >= 3*max, ok, "k%d", i)
		if ok {
			require.Equal(t, uint64(i+1), o.First, "k%d", i)
			require.Equal(t, []byte{byte(i)}, o.Result)
		}
	}
	r.reset()
	require.Empty(t, r.byKey)
	require.Zero(t, r.bytes)
	_, ok := r.get([]byte(fmt.Sprintf("k%d", 4*max-1)))
	require.False(t, ok)

	// Bounded by bytes to about 10 entries, with a count bound of 100,000.
	small := newRecentOutcomes(100_000, 10*(recentOverhead+20))
	for i := range 5 * recentBlock {
		o := Outcome{First: 1, Count: 1}
		small.add(fmt.Sprintf("s%05d", i), &o)
	}
	require.LessOrEqual(t, small.n, 10)
	require.LessOrEqual(t, small.slots(), 11, "evicted slots are reused")
	require.Len(t, small.blocks, 1)
	require.Equal(t, 10*(recentOverhead+20)/recentOverhead+1, small.maxEntries, "the count bound is what the bytes can hold")
}

// Outcome's not-found answers wrap ErrNotFound and name the command id.
func TestOutcomeNotFoundMessage(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	_, err := l.Outcome("oA", "cmd-7")
	require.ErrorIs(t, err, ErrNotFound)
	require.EqualError(t, err, `eventlog: not found: command "cmd-7"`)
	require.EqualError(t, &unrecordedError{commandID: "x", pending: true}, `eventlog: not found: command "x" is being recorded`)
	require.ErrorIs(t, &unrecordedError{pending: true}, ErrNotFound)
}

// BenchmarkRecentOutcomes is the index filling up to its default bounds
// and then turning over, one outcome of an admission's size per op.
//
//	go test ./eventlog -run '^$' -bench RecentOutcomes -benchtime 200000x -benchmem
func BenchmarkRecentOutcomes(b *testing.B) {
	r := newRecentOutcomes(DefaultRecentOutcomes, DefaultRecentBytes)
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = string(appendOutcomeKey(nil, "worker:run-1:02_exec", fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)))
	}
	o := Outcome{First: 1, Count: 3, Result: make([]byte, 120), Fingerprint: make([]byte, 32)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.add(keys[i], &o)
		if _, ok := r.get([]byte(keys[i])); !ok {
			b.Fatal("not indexed")
		}
	}
}
