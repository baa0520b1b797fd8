package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

func TestReplayGolden(t *testing.T) {
	data := scenarioData(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"replay.txt", nil},
		{"replay-explain.txt", []string{"--explain"}},
		{"replay-run-explain.txt", []string{"--run", audittest.RunUnlimited, "--explain"}},
		{"replay-to.txt", []string{"--to", "15"}},
		{"replay-at.txt", []string{"--at", "2026-10-01T09:00:10Z", "--run", audittest.RunBudget}},
		{"replay-diff.txt", []string{"--diff"}},
		// NB: --json writes its timeline entry by entry: the document it wrote when it held them all.
		{"replay.json", []string{"--json"}},
		{"replay-explain-diff.json", []string{"--explain", "--diff", "--json"}},
		{"replay-run-explain.json", []string{"--run", audittest.RunUnlimited, "--explain", "--json"}},
		{"replay-at.json", []string{"--at", "2026-10-01T09:00:10Z", "--run", audittest.RunBudget, "--json"}},
		{"replay-at-nothing.json", []string{"--at", "2001-01-01T00:00:00Z", "--json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := crewctl(t, nil, append([]string{"replay", "--data", data}, c.args...)...)
			require.Equal(t, exitOK, r.code, r.err)
			golden(t, c.name, r.out)
		})
	}
}

func TestReplayJSON(t *testing.T) {
	data := scenarioData(t)
	r := crewctl(t, nil, "replay", "--data", data, "--explain", "--diff", "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var out replayOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.Equal(t, scenario.head, out.Position)
	require.Len(t, out.Timeline, int(scenario.head))
	require.NotEmpty(t, out.Decisions)
	require.Zero(t, out.Drift)
	require.NotNil(t, out.Diff)
	require.Empty(t, out.Diff.Differences)
}

// TestReplayBeforeSnapshot compares a fold that stops before the snapshot
// with a fresh fold to it: still no difference.
func TestReplayBeforeSnapshot(t *testing.T) {
	data := scenarioData(t)
	r := crewctl(t, nil, "replay", "--data", data, "--to", "5", "--diff")
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, fmt.Sprintf("diff with the snapshot taken at %d, compared at position %d: 0 difference(s)", audittest.SnapshotAt, audittest.SnapshotAt))
}

// TestPolicyDrift: a log recording an admission today's code rejects.
func TestPolicyDrift(t *testing.T) {
	dir := t.TempDir()
	audittest.Drift(t, filepath.Join(dir, storeDir))
	r := crewctl(t, nil, "replay", "--data", dir, "--explain")
	require.Equal(t, exitProblem, r.code, r.err)
	require.Contains(t, r.err, "policy drift in 1 decision(s)")
	golden(t, "replay-drift.txt", r.out)

	r = crewctl(t, nil, "replay", "--data", dir, "--explain", "--json")
	require.Equal(t, exitProblem, r.code)
	var out replayOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.Equal(t, 1, out.Drift)
	for _, d := range out.Decisions {
		if d.Drift {
			require.Equal(t, audittest.DriftAt, d.Position)
			require.Equal(t, "rejected: slots-exhausted", d.Today)
		}
	}
}

// TestReplayAtAnyTime: --at takes any RFC 3339 time. One before every event replays nothing, the zero time
// (0001-01-01T00:00:00Z) included, which replayed the whole log as if --at were not given; one after every event
// replays them all, the year 2300 included, whose unix nanoseconds wrapped around to before every event.
func TestReplayAtAnyTime(t *testing.T) {
	data := scenarioData(t)
	for at, want := range map[string]uint64{
		"0001-01-01T00:00:00Z": 0, "1600-01-01T00:00:00Z": 0, "2300-01-01T00:00:00Z": scenario.head,
		"9999-12-31T23:59:59Z": scenario.head,
	} {
		r := crewctl(t, nil, "replay", "--data", data, "--at", at, "--json")
		require.Equal(t, exitOK, r.code, "%s: %s", at, r.err)
		var out replayOutput
		require.NoError(t, json.Unmarshal([]byte(r.out), &out))
		require.Equal(t, want, out.Position, at)
	}
}

func TestReplayUsageAndOpenErrors(t *testing.T) {
	data := scenarioData(t)
	r := crewctl(t, nil, "replay", "--data", data, "--to", "3", "--at", "2026-10-01T09:00:10Z")
	require.Equal(t, exitUsage, r.code)
	r = crewctl(t, nil, "replay", "--data", data, "--at", "yesterday")
	require.Equal(t, exitUsage, r.code)
	r = crewctl(t, nil, "replay", "--bogus")
	require.Equal(t, exitUsage, r.code)
	r = crewctl(t, nil, "frobnicate")
	require.Equal(t, exitUsage, r.code)
	r = crewctl(t, nil, "replay", "--data", filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, exitOpen, r.code, r.err)
	r = crewctl(t, nil, "replay", "--data", data, "--run", "no-such-run")
	require.Equal(t, exitProblem, r.code)
}

// TestReplayToRefusesWhatItCannotAnswer: --to 0 (positions start at 1), a
// position past the head and, with --explain, one inside a decision are
// errors, never the head's state or a cut decision's false drift shown in
// their place.
func TestReplayToRefusesWhatItCannotAnswer(t *testing.T) {
	data := scenarioData(t)
	r := crewctl(t, nil, "replay", "--data", data, "--to", "0")
	require.Equal(t, exitUsage, r.code, r.out)
	require.Contains(t, r.err, "--to")
	r = crewctl(t, nil, "replay", "--data", data, "--to", fmt.Sprint(scenario.head+1))
	require.Equal(t, exitProblem, r.code, r.out)
	require.Contains(t, r.err, fmt.Sprintf("%d, the head is %d", scenario.head+1, scenario.head))
	r = crewctl(t, nil, "replay", "--data", data, "--to", "9", "--explain")
	require.Equal(t, exitProblem, r.code, r.out)
	require.Contains(t, r.err, "9 is inside the decision at positions 8..10; stop at 7 or 10")
	require.NotContains(t, r.err, "drift")
}

// TestReplayReadFailureIsNotCorruption: a read of the store that fails (the disk answers EIO) while replay folds the
// log, checks its stop or finds its time says nothing of the bytes stored: replay says it could not read the store
// and exits 3 ("cannot open or read the store"), as verify does, never 1 (a problem found in the store), which it
// returned for every error of the fold.
func TestReplayReadFailureIsNotCorruption(t *testing.T) {
	data, _ := scenarioInTables(t)
	requireUnreadable(t, data, nil, [][]string{
		{"replay"}, {"replay", "--json"}, {"replay", "--explain"}, {"replay", "--to", "2", "--explain"},
		{"replay", "--at", "2026-10-01T09:00:00Z"},
	})

	// The same store, read without the fault, replays.
	r := crewctl(t, nil, "replay", "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}

// TestReplayDamagedTable: a data block of a table that fails its checksum is damage, and replay reports it as such
// (exit 1, "corrupt", naming the file), where it printed Pebble's report with no mark of damage.
func TestReplayDamagedTable(t *testing.T) {
	data, store := scenarioInTables(t)
	tables, err := filepath.Glob(filepath.Join(store, "*.sst"))
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	for _, table := range tables { // one holds the events, whose first block holds the first of them
		f, err := os.OpenFile(table, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("damage"), 200) // inside its first data block
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}

	for _, args := range [][]string{
		{"replay"}, {"replay", "--json"}, {"replay", "--explain"}, {"replay", "--to", "2", "--explain"},
		{"replay", "--at", "2026-10-01T09:00:00Z"},
	} {
		r := crewctl(t, nil, append(args, "--data", data)...)
		require.Equal(t, exitProblem, r.code, "%v: %s%s", args, r.out, r.err)
		require.Empty(t, r.out, "%v", args)
		require.Contains(t, r.err, "corrupt", "%v", args)
		require.Contains(t, r.err, "checksum mismatch", "%v", args)
		require.Regexp(t, `file 0*[1-9][0-9]*`, r.err, "%v: it names the damaged table", args)
	}
}

// TestReplayDiffReadFailureIsNotCorruption: replay --diff reads the newest snapshot, which lies in a table the fold
// does not read. A read of it that fails is no difference found: replay said so (exit 1); it now says it could not
// read the store (exit 3). A damaged block of it is damage: corrupt, exit 1.
func TestReplayDiffReadFailureIsNotCorruption(t *testing.T) {
	data, store := scenarioInTables(t)
	snapshots := tableOf(t, store, 'n')
	requireUnreadable(t, data, []string{snapshots}, [][]string{{"replay", "--diff"}, {"replay", "--diff", "--json"}})
	r := crewctl(t, nil, "replay", "--data", data, "--diff")
	require.Equal(t, exitOK, r.code, r.out+r.err)

	f, err := os.OpenFile(snapshots, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("damage"), 200) // inside its first data block
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r = crewctl(t, nil, "replay", "--data", data)
	require.Equal(t, exitOK, r.code, "the fold does not read it: %s", r.err)
	r = crewctl(t, nil, "replay", "--data", data, "--diff")
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.err, "corrupt")
	require.Contains(t, r.err, "checksum mismatch")
}

// TestReplayDiffColdReadFailureIsNotADifference: the newest snapshot holds a finished run gone cold as a summary, its
// records in the log, and replay --diff reads it back from the log as the daemon does. A read of it that fails (the
// disk answers EIO) is no difference found: the run read back as if it held nothing, and replay reported its records
// as differences (exit 1); it now says it could not read the store (exit 3).
func TestReplayDiffColdReadFailureIsNotADifference(t *testing.T) {
	data := t.TempDir()
	store := filepath.Join(data, storeDir)
	head := audittest.Scenario(t, store)
	// The cancelled run has ended, the other one not yet.
	require.Equal(t, []string{audittest.RunUnlimited}, audittest.ColdSnapshot(t, store, head-1))
	cold := tablesOnlyOf(t, store, "suvw") // the stream index, the summaries and the views: what a read-back reads
	requireUnreadable(t, data, cold, [][]string{{"replay", "--diff"}, {"replay", "--diff", "--json"}})

	// The same store, read without the fault, has no difference.
	r := crewctl(t, nil, "replay", "--diff", "--data", data)
	require.Equal(t, exitOK, r.code, r.out+r.err)
	require.Contains(t, r.out, "0 difference(s)")
}

// tablesOnlyOf has Pebble compact store into tables of a key or so each and returns those whose keys all start with
// one of prefixes.
func tablesOnlyOf(t *testing.T, store, prefixes string) []string {
	t.Helper()
	o := &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: audittest.QuietPebble{}}
	for i := range o.TargetFileSizes {
		o.TargetFileSizes[i] = 1 // NB: no table then holds keys of two prefixes, but for the bound between them
	}
	db, err := pebble.Open(store, o)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Compact(t.Context(), []byte{0}, []byte{0xff}, false))
	out := tablesWithin(t, db, store, prefixes)
	require.NotEmpty(t, out)
	return out
}

// tableOf returns the path of the table of store that holds the keys with prefix alone.
func tableOf(t *testing.T, store string, prefix byte) string {
	t.Helper()
	db, err := pebble.Open(store, &pebble.Options{ReadOnly: true, Logger: audittest.QuietPebble{}})
	require.NoError(t, err)
	defer db.Close()
	tables := tablesWithin(t, db, store, string(prefix))
	if len(tables) == 0 {
		require.FailNow(t, "no table holds the prefix alone", "%c", prefix)
	}
	return tables[0]
}

// tablesWithin returns the paths of db's tables (db open on store) whose first and last keys both start with one of
// prefixes.
func tablesWithin(t *testing.T, db *pebble.DB, store, prefixes string) []string {
	t.Helper()
	levels, err := db.SSTables()
	require.NoError(t, err)
	var out []string
	for _, level := range levels {
		for _, tb := range level {
			if strings.IndexByte(prefixes, tb.Smallest.UserKey[0]) >= 0 && strings.IndexByte(prefixes, tb.Largest.UserKey[0]) >= 0 {
				out = append(out, filepath.Join(store, tb.FileNum.String()+".sst"))
			}
		}
	}
	return out
}

// TestReplayToInsideADecisionWhoseStartCannotBeRead: --to inside a decision, with --explain, is refused with the
// decision's positions and the stops around it. A read of the log that fails (the disk answers EIO once) as replay
// looks back for where the decision begins is a store replay could not read (exit 3): it was taken for the decision's
// start, and replay named a decision at 9..10 and sent the operator to stop at 8, inside the decision at 8..10.
func TestReplayToInsideADecisionWhoseStartCannotBeRead(t *testing.T) {
	data, _ := scenarioInTables(t)
	var failed atomic.Bool
	once := errorfs.InjectorFunc(func(op errorfs.Op) error {
		// NB: the first read of a table's first data block, which Pebble's open does not make: the look back's.
		if strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpFileReadAt && op.Offset == 0 &&
			failed.CompareAndSwap(false, true) {
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	})
	r := crewctlOn(t, &eventlog.Options{FS: errorfs.Wrap(vfs.Default, once)}, "replay", "--data", data, "--to", "9",
		"--explain")
	require.True(t, failed.Load(), "no read failed")
	require.Equal(t, exitOpen, r.code, r.out+r.err)
	require.Empty(t, r.out)
	require.Contains(t, r.err, "could not read the store")
	require.Contains(t, r.err, "input/output error")
	require.NotContains(t, r.err, "stop at")

	r = crewctl(t, nil, "replay", "--data", data, "--to", "9", "--explain")
	require.Equal(t, exitProblem, r.code, r.out)
	require.Contains(t, r.err, "9 is inside the decision at positions 8..10; stop at 7 or 10")
}

// TestReplayDiffListsTheFirstDifferences: a store whose snapshot differs from the log everywhere (here: it lacks every
// run) made replay --diff print every difference, one line each and the whole record of a run one side lacks, and
// a damaged store can differ at millions of places: it lists the first --diff-max (100 unless given), says how many
// there are in all and how many are not listed, and --json holds the same; --diff-max 0 lists every one.
func TestReplayDiffListsTheFirstDifferences(t *testing.T) {
	dir := t.TempDir()
	l, err := eventlog.Open(filepath.Join(dir, storeDir), nil)
	require.NoError(t, err)
	head, err := audittest.Large(l, 6000)
	require.NoError(t, err)
	lacking := projections.New()
	lacking.Position = head
	b, err := projections.EncodeSnapshot(lacking)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(head, b))
	require.NoError(t, l.Close())

	all := crewctl(t, nil, "replay", "--data", dir, "--diff", "--diff-max", "0", "--json")
	require.Equal(t, exitProblem, all.code, all.err)
	var every replayOutput
	require.NoError(t, json.Unmarshal([]byte(all.out), &every))
	total := every.Diff.Total
	require.Greater(t, total, defaultDiffMax, "the snapshot differs at more places than are listed by default")
	require.Len(t, every.Diff.Differences, total)

	for _, c := range []struct {
		args   []string
		listed int
	}{
		{nil, defaultDiffMax},
		{[]string{"--diff-max", "5"}, 5},
		{[]string{"--diff-max", strconv.Itoa(total)}, total},
	} {
		t.Run(fmt.Sprint(c.args), func(t *testing.T) {
			args := append([]string{"replay", "--data", dir, "--diff"}, c.args...)
			r := crewctl(t, nil, append(args, "--json")...)
			require.Equal(t, exitProblem, r.code, r.err)
			require.Contains(t, r.err, fmt.Sprintf("%d difference(s) with the snapshot", total))
			var out replayOutput
			require.NoError(t, json.Unmarshal([]byte(r.out), &out))
			require.Equal(t, total, out.Diff.Total)
			require.Equal(t, every.Diff.Differences[:c.listed], out.Diff.Differences, "the first, in order")

			r = crewctl(t, nil, args...)
			require.Equal(t, exitProblem, r.code, r.err)
			require.Contains(t, r.out, fmt.Sprintf("compared at position %d: %d difference(s)\n", head, total))
			lines := 0
			for _, line := range strings.Split(r.out, "\n") {
				if strings.HasPrefix(line, "  $") {
					lines++
				}
			}
			require.Equal(t, c.listed, lines, "one line per difference listed")
			more := fmt.Sprintf("  … and %d more, not listed (--diff-max", total-c.listed)
			if c.listed == total {
				require.NotContains(t, r.out, "more, not listed")
			} else {
				require.Contains(t, r.out, more)
			}
		})
	}
	r := crewctl(t, nil, "replay", "--data", dir, "--diff", "--diff-max", "-1")
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "--diff-max -1")
}
