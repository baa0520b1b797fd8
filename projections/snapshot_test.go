package projections

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func TestSnapshotEmptyState(t *testing.T) {
	b, err := EncodeSnapshot(New())
	require.NoError(t, err)
	s, err := DecodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, New(), s)
}

func TestSnapshotBadBytes(t *testing.T) {
	good, err := EncodeSnapshot(fold(realisticHistory(200)))
	require.NoError(t, err)
	withFormat := func(v any) []byte {
		b, err := msgpack.Marshal(SnapshotFormat)
		require.NoError(t, err)
		body, err := msgpack.Marshal(v)
		require.NoError(t, err)
		return append(b, body...)
	}
	// hot is a snapshot's body around runs: a run count and one ordinal a run, so that the runs reach the checks of
	// their records rather than the ordinals' check, which comes first.
	hot := func(runs ...any) []byte {
		ords := make([]any, len(runs))
		for i := range runs {
			ords[i] = i
		}
		return withFormat(map[string]any{"runCount": len(runs), "ords": ords, "runs": runs})
	}
	run := map[string]any{"runId": "r", "status": "running"}
	tests := []struct {
		name string
		b    []byte
		// says is the refusal's reason, where a case means one check: another check, or a panic the decoder
		// recovers from, refusing it would not show that check at work.
		says string
	}{
		{"empty", nil, ""},
		{"format only", good[:1], ""},
		{"truncated", good[:len(good)-1], ""},
		{"trailing", append(append([]byte{}, good...), 0xc0), ""},
		{"other format", append([]byte{0x02}, good[1:]...), ""},
		{"format not a number", append([]byte{0xa1, 'x'}, good[1:]...), ""},
		{"never-used code", []byte{0x01, 0xc1}, ""},
		{"huge array", []byte{0x01, 0x81, 0xa4, 'r', 'u', 'n', 's', 0xdd, 0xff, 0xff, 0xff, 0xff}, ""},
		{"huge string", []byte{0x01, 0xdb, 0xff, 0xff, 0xff, 0xff}, ""},
		{"deep nesting", append([]byte{0x01}, []byte(strings.Repeat("\x91", 100)+"\xc0")...), ""},
		{"runs without ordinals", withFormat(map[string]any{"runs": []any{map[string]any{"run": run}}}),
			"1 runs listed with 0 ordinals, of 0 runs"},
		{"nil run", hot(map[string]any{"run": nil}), "run 0 missing or duplicate"},
		{"nil task", hot(map[string]any{"run": run, "tasks": []any{nil}}), "run r: task missing or duplicate"},
		{"duplicate run", hot(map[string]any{"run": run}, map[string]any{"run": run}), "run 1 missing or duplicate"},
		{"duplicate message", hot(map[string]any{"run": run,
			"messages": []any{map[string]any{"id": "m"}, map[string]any{"id": "m"}}}),
			`run r: duplicate message "m"`},
		{"wrong type", withFormat(map[string]any{"position": "one"}), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeSnapshot(tc.b)
			require.Nil(t, s)
			require.ErrorIs(t, err, ErrBadSnapshot)
			require.True(t, strings.HasPrefix(err.Error(), "projections: "), err.Error())
			if tc.says != "" {
				require.Equal(t, ErrBadSnapshot.Error()+": "+tc.says, err.Error())
			}
		})
	}
}

func TestSnapshotFlippedBytesNeverPanic(t *testing.T) {
	good, err := EncodeSnapshot(fold(realisticHistory(300)))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := append([]byte{}, good...)
		for range 1 + rng.IntN(3) {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
		}
		if s, err := DecodeSnapshot(b); err == nil {
			// A flip that still decodes gives a state the fold can use.
			queryAll(t, s)
			for _, ev := range realisticHistory(100) {
				Apply(s, ev)
			}
		}
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	for _, n := range []int{0, 40} {
		b, err := EncodeSnapshot(fold(realisticHistory(n)))
		require.NoError(f, err)
		f.Add(b)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	b, err := EncodeSnapshot(fold(randomHistory(rng, 120)))
	require.NoError(f, err)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSnapshot(b)
		if err != nil {
			require.ErrorIs(t, err, ErrBadSnapshot)
			return
		}
		// Whatever decodes re-encodes to a fixed point.
		again, err := EncodeSnapshot(s)
		require.NoError(t, err)
		s2, err := DecodeSnapshot(again)
		require.NoError(t, err)
		third, err := EncodeSnapshot(s2)
		require.NoError(t, err)
		require.Equal(t, again, third)
	})
}

// A job's calls are records of a snapshot, as a run's messages are: each is encoded and decoded as one, and a job
// holds as many as the config's proxyMaxRequests. The engine takes its next snapshot once twice the last one's
// records were written, so a job counted as one record would have a snapshot of a run's calls taken again and again,
// at a size it does not count.
func TestSnapshotRecordsCountEveryCallOfAJob(t *testing.T) {
	none, calls := fold(jobHeavyHistory(2, 4, 0)), fold(jobHeavyHistory(2, 4, 500))
	require.Equal(t, none.SnapshotRecords()+2*500, calls.SnapshotRecords())
	b, err := EncodeSnapshot(calls)
	require.NoError(t, err)
	_, records, err := decodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, calls.SnapshotRecords(), records, "the decoder counts them as well")
}

// A snapshot (or a run's view, decoded alike) whose job contradicts itself is refused, as one with a record missing
// or twice is, and the state is rebuilt from the log: no fold makes such a job, and what reads one would go wrong.
// A grant's lists are read index for index (query.job's grant, the revalidation before a continue or a call), so a
// tool without its fingerprint or callable is an index past the end; a call listed twice is in flight twice, and
// job.disconnect would cancel it twice.
func TestSnapshotRefusesAJobThatContradictsItself(t *testing.T) {
	snapshotOf := func(job map[string]any) []byte {
		b, err := msgpack.Marshal(SnapshotFormat)
		require.NoError(t, err)
		body, err := msgpack.Marshal(map[string]any{"runCount": 1, "ords": []any{0}, "runs": []any{map[string]any{
			"run": map[string]any{"runId": "r", "status": "running"}, "jobs": []any{job}}}})
		require.NoError(t, err)
		return append(b, body...)
	}
	call := func(id string) map[string]any { return map[string]any{"requestId": id, "state": ProxyAdmitted} }
	s, err := DecodeSnapshot(snapshotOf(map[string]any{"jobId": "J", "tools": []any{"a", "b"},
		"fingerprints": []any{"fa", "fb"}, "callables": []any{"ca", "cb"},
		"requests": []any{call("q1"), call("q2")}}))
	require.NoError(t, err, "a job whose lists agree")
	require.Equal(t, []string{"q1", "q2"}, s.LiveRequests("r", "J"))
	for name, job := range map[string]map[string]any{
		"a tool without its fingerprint": {"jobId": "J", "tools": []any{"a", "b"}, "fingerprints": []any{"fa"},
			"callables": []any{"ca", "cb"}},
		"a tool without its callable": {"jobId": "J", "tools": []any{"a", "b"}, "fingerprints": []any{"fa", "fb"},
			"callables": []any{"ca"}},
		"a fingerprint without its tool": {"jobId": "J", "tools": []any{"a"}, "fingerprints": []any{"fa", "fb"},
			"callables": []any{"ca"}},
		"a call listed twice": {"jobId": "J", "requests": []any{call("q"), call("q")}},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := DecodeSnapshot(snapshotOf(job))
			require.Nil(t, s)
			require.ErrorIs(t, err, ErrBadSnapshot)
		})
	}
}
