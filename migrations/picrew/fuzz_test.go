package picrew

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// The runs of testdata/root: a finished one with archives, mailboxes and
// shadows, and a running one with the envelope form of tasks.json and
// steering.
const (
	fuzzRunDone = "team_20261002080000_0123456789abcdef"
	fuzzRunLive = "team_20261003080000_fedcba9876543210"
)

// fuzzTargets are the files of testdata/root the import reads, one of each
// kind: the fuzzer picks one (its first argument, modulo the length) and
// replaces its bytes.
var fuzzTargets = []string{
	"state/runs/" + fuzzRunDone + "/manifest.json",
	"state/runs/" + fuzzRunDone + "/tasks.json",
	"state/runs/" + fuzzRunDone + "/events.jsonl",
	"state/runs/" + fuzzRunDone + "/events.jsonl.2026-10-02T08-30-00Z.archive.jsonl",
	"state/runs/" + fuzzRunDone + "/mailbox/inbox.jsonl",
	"state/runs/" + fuzzRunDone + "/mailbox/tasks/02_exec/inbox.jsonl",
	"state/runs/" + fuzzRunDone + "/mailbox/delivery.json",
	"state/runs/" + fuzzRunLive + "/manifest.json",
	"state/runs/" + fuzzRunLive + "/tasks.json",
	"artifacts/" + fuzzRunLive + "/steering/01_plan.jsonl",
}

// sampleTree reads testdata/root into memory (slash paths relative to it →
// contents; directories map to nil), so that every fuzz input starts from
// the same tree without reading the repository again.
func sampleTree(t testing.TB) map[string][]byte {
	tree := map[string][]byte{}
	root := filepath.Join("testdata", "root")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			tree[filepath.ToSlash(rel)] = nil
			return nil
		}
		b, err := os.ReadFile(p)
		tree[filepath.ToSlash(rel)] = b
		return err
	})
	require.NoError(t, err)
	for _, p := range fuzzTargets {
		require.Contains(t, tree, p, "testdata/root lost a file the fuzzers replace")
	}
	return tree
}

// writeTree writes tree under dir.
func writeTree(t testing.TB, dir string, tree map[string][]byte) {
	for p, b := range tree {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if b == nil {
			require.NoError(t, os.MkdirAll(full, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, b, 0o644))
	}
}

// replaced writes data over the file rel of the tree written under dir and
// returns what puts the sample's bytes back. Writing one file per input
// instead of a whole tree keeps an input to about a millisecond of file
// work; the inputs of one fuzz process run one after the other, and
// neither the import nor the follower writes to the root.
func replaced(t testing.TB, dir string, tree map[string][]byte, rel string, data []byte) (restore func()) {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return func() { require.NoError(t, os.WriteFile(p, tree[rel], 0o644)) }
}

// openFuzzStore opens a fresh in-memory store, small: Pebble sets up its
// memtable and block cache at every open, and at their defaults (16 and
// 32 MiB) that is most of an input's time.
func openFuzzStore(t testing.TB) *eventlog.Log {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 1 << 20,
		RecentOutcomes: 1024, RecentOutcomeBytes: 1 << 20})
	require.NoError(t, err)
	return l
}

// fuzzSeeds are hand-made variants of the sample's files, each a shape of
// damage or a corner of the format the sample does not show, by target.
var fuzzSeeds = map[string][]string{
	"state/runs/" + fuzzRunDone + "/manifest.json": {
		``,
		`null`,
		`{"runId":"team_other","status":"completed"}`,
		`{"status":"weird","createdAt":1790928000000,"updatedAt":"","budgetTotal":"12"}`,
		`{"status":"cancelled","createdAt":-1,"budgetTotal":"x"}`,
		`{"status":"failed","createdAt":1e300,"updatedAt":"2026-13-40T99:00:00Z","artifactsRoot":"artifacts/x"}`,
	},
	"state/runs/" + fuzzRunDone + "/tasks.json": {
		`{"schemaVersion":1,"tasks":[{"id":"01_explore","stepId":"explore","status":"failed"}]}`,
		`[{"id":"01_explore","stepId":"explore","status":"completed"},{"id":"01_explore","stepId":"again"},` +
			`{"id":"bad id"}]`, `[{"id":"02_exec","stepId":"exec","status":"queued",` +
			`"allocation":{"tokensGranted":10,"tokensSpent":-5}}]`, `[{"id":"gc-0a1b2c3d-0000-4000-8000-0000000` +
			`00001","status":"running","depth":-3},{"id":"02_exec","stepId":"","status":"waiting",` +
			`"waiting":{"deadline":"x"}}]`, `{"tasks":null}`, `[null]`,
		`{`,
	},
	"state/runs/" + fuzzRunDone + "/events.jsonl": {
		`{"type":"task.started","taskId":"02_exec","metadata":{"seq":5}}` + "\n" +
			`{"type":"task.completed","taskId":"02_exec","metadata":{"seq":5}}` + "\n",
		`{"type":"delegate.admitted","taskId":"02_exec","data":{"subId":"s1","reservedTokens":-1,` +
			`"timeoutSec":1e308},"metadata":{"seq":4}}` + "\n" +
			`{"type":"delegate.admitted","taskId":"02_exec","data":{"subId":"s1"},"metadata":{"seq":5}}` + "\n" +
			`{"type":"delegate.timed_out","taskId":"02_exec","data":{"subId":"s1"},"metadata":{"seq":6}}` + "\n" +
			`{"type":"delegate.cancelled","taskId":"02_exec","data":{"subId":"s1"},"metadata":{"seq":7}}` + "\n",
		`{"type":"ask.requested","taskId":"02_exec","data":{"questionId":"q","deadline":"2026-10-02T09:00:00Z",` +
			`"options":["a"]},"metadata":{"seq":4}}` + "\n" +
			`{"type":"ask.timedout","data":{"questionId":"q"},"metadata":{"seq":5}}` + "\n" +
			`{"type":"task.waiting","taskId":"02_exec","data":"not an object","metadata":{"seq":6}}` + "\n" +
			`{"type":"run.budget_abort","data":{"x":1},"metadata":{"seq":7}}` + "\n",
		`{"type":"run.blocked","metadata":{"seq":18446744073709551615}}` + "\n" + `{"type":"x","metadata":{}}` +
			"\n" + `{"type":""}`, `{"type":"task.progress","time":-5,"data":[1,2,{"a":null}],"metadata":{"seq":1}}`,
	},
	"state/runs/" + fuzzRunDone + "/mailbox/inbox.jsonl": {
		`{"id":"m1","direction":"outbox","from":"02_exec","body":"x","createdAt":5}` + "\n" +
			`{"id":"m1","body":"the same id again"}` + "\n" +
			`{"id":"m:2","taskId":"02_exec","data":{"subId":"s","ok":true,"timedOut":true}}` + "\n",
		`{"id":""}` + "\n" + `[]` + "\n" + "\x00\xff" + "\n",
	},
	"state/runs/" + fuzzRunDone + "/mailbox/delivery.json": {
		`{"messages":{"msg_mfxk2a00_a1b2c3":"acknowledged","nope":"delivered"}}`,
		`{"messages":null}`,
		`[]`,
	},
	"artifacts/" + fuzzRunLive + "/steering/01_plan.jsonl": {
		`{"message":"legacy","ts":1790928300000}` + "\n" + `{"message":""}` + "\n" + `{"message":"partial"`,
	},
}

// fuzzSeedMax is the size cutSeed keeps a seed within, but for a single
// value larger than it. The fuzzer minimises every input that finds new
// code, removing each of its bytes and each of its ranges in turn and
// importing the root for each: a seed of kilobytes (the sample's tasks.json
// and events.jsonl) kept it minimising for all of a run.
const fuzzSeedMax = 96

// fuzzInputs are every target's sample bytes and its hand-made variants,
// cut small (cutSeed).
func fuzzInputs(t testing.TB, tree map[string][]byte) (targets []uint8, inputs [][]byte) {
	for i, p := range fuzzTargets {
		for _, s := range append([][]byte{tree[p]}, stringsAsBytes(fuzzSeeds[p])...) {
			for _, c := range cutSeed(t, s) {
				targets, inputs = append(targets, uint8(i)), append(inputs, c)
			}
		}
	}
	return targets, inputs
}

func stringsAsBytes(ss []string) [][]byte {
	var bs [][]byte
	for _, s := range ss {
		bs = append(bs, []byte(s))
	}
	return bs
}

// cutSeed cuts b into inputs of at most fuzzSeedMax bytes that hold its
// lines and values: a JSON document compacted, and then an object into
// objects of some of its members and an array into one-element arrays, each
// cut the same way when still too large; a JSONL file into runs of whole
// lines in their order, a line too large cut as a document. What is not
// JSON, or is one value too large to cut (a long string), is kept whole.
func cutSeed(t testing.TB, b []byte) [][]byte {
	if len(b) <= fuzzSeedMax {
		return [][]byte{b}
	}
	if lines := bytes.SplitAfter(b, []byte("\n")); len(lines) > 1 && !json.Valid(b) {
		var cuts [][]byte
		var run []byte
		for _, line := range lines {
			if len(run) > 0 && len(run)+len(line) > fuzzSeedMax {
				cuts, run = append(cuts, run), nil
			}
			if len(line) > fuzzSeedMax {
				cuts = append(cuts, cutSeed(t, bytes.TrimSuffix(line, []byte("\n")))...)
				continue
			}
			run = append(run, line...)
		}
		if len(run) > 0 {
			cuts = append(cuts, run)
		}
		return cuts
	}
	var compact bytes.Buffer
	if json.Compact(&compact, b) != nil {
		return [][]byte{b}
	}
	if compact.Len() <= fuzzSeedMax {
		return [][]byte{compact.Bytes()}
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(compact.Bytes(), &members) == nil {
		var cuts [][]byte
		group := map[string]json.RawMessage{}
		size := 0
		flush := func() {
			if len(group) > 0 {
				cuts = append(cuts, marshalSeed(t, group))
			}
			group, size = map[string]json.RawMessage{}, 0
		}
		for _, k := range slices.Sorted(maps.Keys(members)) {
			entry := len(k) + len(members[k]) + 4
			if entry+2 > fuzzSeedMax {
				for _, c := range cutSeed(t, members[k]) {
					cuts = append(cuts, marshalSeed(t, map[string]json.RawMessage{k: c}))
				}
				continue
			}
			if size+entry+2 > fuzzSeedMax {
				flush()
			}
			group[k] = members[k]
			size += entry
		}
		flush()
		return cuts
	}
	var elems []json.RawMessage
	if json.Unmarshal(compact.Bytes(), &elems) == nil {
		var cuts [][]byte
		for _, e := range elems {
			for _, c := range cutSeed(t, e) {
				cuts = append(cuts, append(append([]byte("["), c...), ']'))
			}
		}
		return cuts
	}
	return [][]byte{compact.Bytes()}
}

func marshalSeed(t testing.TB, v map[string]json.RawMessage) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// requireWellFormed holds one write of run to what the daemon's
// import.append takes (broker.importCommand, commands.Import): a command id
// under import:<run>: that fits the log's limit, 1..MaxImportEvents events,
// each payload the struct of its type, each time one the daemon records
// (0..maxTimeMs, TestTimeRangeIsWhatTheDaemonTakes), each reservation one it
// records (events.SpendTokensOK). The one-shot import and a follower
// plan the same writes; a follower whose write the daemon refuses as a
// whole call sends it again at every pass, for ever.
func requireWellFormed(t testing.TB, run string, w Write) {
	require.True(t, strings.HasPrefix(w.ID, "import:"+run+":"), "write %q of run %s", w.ID, run)
	require.LessOrEqual(t, len(w.ID), eventlog.MaxIDLen, "write %q: the log refuses the command id", w.ID)
	require.True(t, utf8.ValidString(w.ID), "write %q", w.ID)
	require.NotEmpty(t, w.Items, "write %q has no events", w.ID)
	require.LessOrEqual(t, len(w.Items), commands.MaxImportEvents, "write %q", w.ID)
	for _, it := range w.Items {
		typ, ok := events.TypeOf(it.Payload)
		require.True(t, ok, "write %q: %T is not a payload", w.ID, it.Payload)
		require.Equal(t, it.Type, typ, "write %q", w.ID)
		require.True(t, it.TimeMs >= 0 && it.TimeMs <= maxTimeMs, "write %q: %s at %d ms", w.ID, it.Type, it.TimeMs)
		if r, ok := it.Payload.(*events.BudgetReserved); ok {
			require.True(t, events.SpendTokensOK(r.Tokens), "write %q: reserves %d tokens", w.ID, r.Tokens)
		}
	}
}

// requireTimeInRange holds a recorded event's time to what a pi-crew time
// may become (flexTime): after 1970 (an absent time is the recorder's
// clock) and no later than maxTimeMs.
func requireTimeInRange(t testing.TB, ev *eventlog.Event) {
	require.Positive(t, ev.Time, "%s %s: an event at 1970", ev.CommandID, ev.Type)
	require.LessOrEqual(t, ev.Time, int64(maxTimeMs*1e6), "%s %s", ev.CommandID, ev.Type)
}

// requireReports holds what was skipped to Skipped's promise: each says
// why, at a path relative to the crew root, so that a report never names
// the machine it was made on.
func requireReports(t testing.TB, skipped []Skipped) {
	for _, s := range skipped {
		require.NotEmpty(t, s.Reason, "%+v", s)
		require.NotEmpty(t, s.Path, "%+v", s)
		require.False(t, filepath.IsAbs(s.Path), "%+v", s)
	}
}

// FuzzImport replaces one file of the sample crew root with arbitrary bytes
// and imports the root into a fresh in-memory store. The files are written
// by another program and may be damaged, and the package promises (doc.go)
// that a damaged file is skipped and reported, never fatal. So:
//
//   - every write planned is one the daemon's import.append takes (the
//     follower sends the same writes);
//   - the import succeeds: the root is a crew root, and an in-memory store
//     does not fail;
//   - every event recorded has a time after 1970 and within what crewlog
//     records (a damaged pi-crew time is reported and taken as absent);
//   - the store passes what crewctl verify checks (audit.Verify): records,
//     chain, index and outcomes, payloads that decode, and the domain
//     invariants, but for reservations above what remained of the grant:
//     pi-crew's ledger may show those (its settle-time refunds, which
//     crewlog never undoes), and the import records them as the files say;
//   - a second import of the same files appends nothing and reports the
//     same things (doc.go's idempotence).
func FuzzImport(f *testing.F) {
	tree := sampleTree(f)
	targets, inputs := fuzzInputs(f, tree)
	for i := range targets {
		f.Add(targets[i], inputs[i])
	}
	dir := f.TempDir()
	writeTree(f, dir, tree)
	f.Fuzz(func(t *testing.T, target uint8, data []byte) { importReplaced(t, dir, tree, target, data) })
}

// importReplaced is FuzzImport's input: the sample crew root written under
// dir with the file target replaced by data.
func importReplaced(t *testing.T, dir string, tree map[string][]byte, target uint8, data []byte) {
	rel := fuzzTargets[int(target)%len(fuzzTargets)]
	defer replaced(t, dir, tree, rel, data)()

	// What the import appends, as the follower would send it.
	src := &source{root: dir}
	runs, err := src.readRuns()
	require.NoError(t, err)
	for _, r := range runs {
		for _, w := range newPlanner(src, r, time.Now).plan() {
			requireWellFormed(t, r.id, Write{ID: w.id, RunID: r.id, Items: w.items})
		}
	}

	l := openFuzzStore(t)
	defer l.Close()
	sum, err := Import(l, dir, nil)
	require.NoError(t, err, "a damaged file is reported, never fatal")
	head, _ := l.Head()
	require.Equal(t, uint64(sum.Appended), head, "the summary counts what was appended")

	forEachEvent(t, l, func(*eventlog.Event) {})

	rep, err := audit.Verify(l, nil)
	require.NoError(t, err, "the import left a store that does not verify")
	for _, pr := range rep.Check.Problems {
		require.Equal(t, audit.InvariantReservation, pr.Invariant, "%v", pr)
		// A negative amount is one no decision writes, and the ledger
		// does not add it (projections' addSpend).
		require.NotContains(t, pr.Detail, "reserved -", "%v", pr)
	}

	again, err := Import(l, dir, nil)
	require.NoError(t, err)
	require.Zero(t, again.Appended, "a second import of the same files appends nothing")
	h, _ := l.Head()
	require.Equal(t, head, h)
	requireReports(t, sum.Skipped)
	require.Equal(t, sum.Skipped, again.Skipped, "the same things are reported again")
	for i, r := range again.Runs {
		require.Equal(t, r.Writes, r.Existing, "run %s: every write found recorded", r.RunID)
		require.Equal(t, sum.Runs[i].Writes, r.Writes)
	}
}

// checkingSink is a Sink that holds every write to what the daemon takes
// and answers it appended; it keeps nothing.
type checkingSink struct {
	t      testing.TB
	writes int
}

func (s *checkingSink) Import(_ context.Context, ws []Write) ([]WriteResult, error) {
	out := make([]WriteResult, len(ws))
	for i, w := range ws {
		if w.RunID == events.ImportStream {
			require.Len(s.t, w.Items, 1)
			require.IsType(s.t, &events.ImportCheckpoint{}, w.Items[0].Payload)
		} else {
			requireWellFormed(s.t, w.RunID, w)
		}
		out[i] = WriteResult{Appended: len(w.Items)}
		s.writes++
	}
	return out, nil
}

func (*checkingSink) Checkpoints(context.Context) ([]events.ImportCheckpoint, error) { return nil, nil }

// FuzzFollow replaces one file of the sample crew root with the first cut
// bytes of an input, lets a follower make a pass over the root, writes the
// rest (a JSONL file grows by it, a whole file is rewritten) and makes two
// more passes. A pass is what Follower.Run does at every poll, without the
// notifications and the ticker, so an input runs in one goroutine; the
// settle time is a nanosecond, so a finished run is reconciled at once and
// a steering line waits for its message no longer than a pass. The
// follower reads the same bytes as the one-shot import with readers of its
// own (a tail that splits complete lines from a partial last one, whole
// files compared by stamp): nothing in them may panic it, every write it
// sends must be one the daemon takes, and none may stay pending.
func FuzzFollow(f *testing.F) {
	tree := sampleTree(f)
	targets, inputs := fuzzInputs(f, tree)
	for i := range targets {
		f.Add(targets[i], inputs[i], uint16(len(inputs[i])/2))
	}
	dir := f.TempDir()
	writeTree(f, dir, tree)
	f.Fuzz(func(t *testing.T, target uint8, data []byte, cut uint16) {
		followReplaced(t, dir, tree, target, data, cut)
	})
}

// followReplaced is FuzzFollow's input: the sample crew root written under
// dir with the file target replaced by data, first cut.
func followReplaced(t *testing.T, dir string, tree map[string][]byte, target uint8, data []byte, cut uint16) {
	runsDir := filepath.Join(dir, "state", "runs")
	rel := fuzzTargets[int(target)%len(fuzzTargets)]
	defer replaced(t, dir, tree, rel, data[:min(int(cut), len(data))])()

	sink := &checkingSink{t: t}
	var reported []Skipped
	fl := NewFollower(dir, sink, &FollowOptions{SettleAfter: time.Nanosecond, CheckpointEvery: time.Nanosecond,
		Report: func(s Skipped) { reported = append(reported, s) }})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	fl.pass(t.Context(), runsDir, true, nil)
	require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), data, 0o644))
	fl.pass(t.Context(), runsDir, true, nil)
	fl.pass(t.Context(), runsDir, true, nil)
	for id, r := range fl.runs {
		require.Empty(t, r.pending, "run %s: writes left pending with a daemon that takes everything", id)
	}
	require.Positive(t, sink.writes, "the sample's other run is imported whatever the input")
	requireReports(t, reported)
}

// TestFuzzRegressions runs the inputs of past failures under
// testdata/regressions (in the fuzz corpus format) as FuzzImport and
// FuzzFollow do. They are kept out of testdata/fuzz because they are long
// (an id past the log's limit): the fuzzer minimises what it derives from
// a corpus input that finds new code, importing the root for each byte and
// range it tries to remove, and such an input kept it minimising for all
// of a run. The short ones stay in testdata/fuzz.
func TestFuzzRegressions(t *testing.T) {
	tree := sampleTree(t)
	dir := t.TempDir()
	writeTree(t, dir, tree)
	for _, fuzz := range []string{"FuzzImport", "FuzzFollow"} {
		paths, err := filepath.Glob(filepath.Join("testdata", "regressions", fuzz, "*"))
		require.NoError(t, err)
		require.NotEmpty(t, paths, fuzz)
		for _, p := range paths {
			t.Run(fuzz+"/"+filepath.Base(p), func(t *testing.T) {
				args := readCorpusFile(t, p)
				target, data := args[0].(byte), args[1].([]byte)
				if fuzz == "FuzzImport" {
					require.Len(t, args, 2)
					importReplaced(t, dir, tree, target, data)
					return
				}
				require.Len(t, args, 3)
				followReplaced(t, dir, tree, target, data, args[2].(uint16))
			})
		}
	}
}

// readCorpusFile reads a file of go's fuzz corpus format ("go test fuzz
// v1", then one Go literal a line) holding the types FuzzImport's and
// FuzzFollow's arguments have: byte, []byte and uint16.
func readCorpusFile(t *testing.T, path string) []any {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Equal(t, "go test fuzz v1", lines[0], path)
	var args []any
	for _, line := range lines[1:] {
		typ, lit, ok := strings.Cut(strings.TrimSuffix(line, ")"), "(")
		require.True(t, ok, "%s: %q", path, line)
		switch typ {
		case "byte", "uint8":
			c, _, tail, err := strconv.UnquoteChar(strings.Trim(lit, "'"), '\'')
			require.NoError(t, err, "%s: %q", path, line)
			require.Empty(t, tail, "%s: %q", path, line)
			args = append(args, byte(c))
		case "[]byte":
			s, err := strconv.Unquote(lit)
			require.NoError(t, err, "%s: %q", path, line)
			args = append(args, []byte(s))
		case "uint16":
			n, err := strconv.ParseUint(lit, 0, 16)
			require.NoError(t, err, "%s: %q", path, line)
			args = append(args, uint16(n))
		default:
			require.Failf(t, "a type the fuzzers do not take", "%s: %q", path, line)
		}
	}
	return args
}
