package picrew

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

const (
	runA = "team_20261201120000_00000000000000aa"
	runB = "team_20261201120000_00000000000000bb"
)

func newRoot(t *testing.T) *picrewtest.Root {
	t.Helper()
	root, err := picrewtest.New(t.TempDir())
	require.NoError(t, err)
	return root
}

func newRun(t *testing.T, root *picrewtest.Root, id string) *picrewtest.Run {
	t.Helper()
	r, err := root.NewRun(id)
	require.NoError(t, err)
	return r
}

func runSteps(t *testing.T, steps []func() error) {
	t.Helper()
	for i, s := range steps {
		require.NoError(t, s(), "step %d", i)
	}
}

// copyOf tunes requireCopy.
type copyOf struct {
	// live: the runs are still being written, so the one-shot import's
	// reconcile (which the follower does once a run has finished) is left
	// out of the comparison.
	live bool
	// run, when set, compares that run only.
	run string
	// extra are writes the follower made from lines the files no longer
	// hold (a compaction dropped them after they were imported).
	extra []string
}

// requireCopy checks that the sink holds exactly what a one-shot import of
// the files as they are now writes: every write once, none missing, none
// extra.
func requireCopy(t *testing.T, root string, sink *memSink, o copyOf) {
	t.Helper()
	_, count := sink.imported()
	for id, n := range count {
		require.Equal(t, 1, n, "write %s appended %d times", id, n)
	}
	got, want := copyIDs(t, root, sink, o)
	require.Equal(t, want, got)
}

// copyIDs are the ids of the writes the sink holds (got) and of those a
// one-shot import of the files as they are now writes (want), both sorted,
// each kept as o says.
func copyIDs(t *testing.T, root string, sink *memSink, o copyOf) (got, want []string) {
	t.Helper()
	ids, _ := sink.imported()
	keep := func(id string) bool {
		if o.run != "" && !strings.HasPrefix(id, "import:"+o.run+":") {
			return false
		}
		return !o.live || !(strings.Contains(id, ":reconcile:") || strings.Contains(id, ":usage:") ||
			strings.Contains(id, ":shadow:"))
	}
	for _, id := range ids {
		if keep(id) {
			got = append(got, id)
		}
	}
	for _, id := range append(plannedIDs(t, root), o.extra...) {
		if keep(id) {
			want = append(want, id)
		}
	}
	sortStrings(got)
	sortStrings(want)
	return got, want
}

// TestFollowKeepsACopy: a follower started on an empty root imports two
// runs as they are written, step by step, and ends holding what a one-shot
// import of the final files holds: nothing twice, nothing missing.
func TestFollowKeepsACopy(t *testing.T) {
	root := newRoot(t)
	sink := newMemSink()
	fl := startFollow(t, root.Dir, sink, nil)
	a, b := newRun(t, root, runA), newRun(t, root, runB)
	stepsA, stepsB := picrewtest.Lifecycle(a, 25), picrewtest.Lifecycle(b, 5)
	for i := range max(len(stepsA), len(stepsB)) {
		if i < len(stepsA) {
			require.NoError(t, stepsA[i]())
		}
		if i < len(stepsB) {
			require.NoError(t, stepsB[i]())
		}
		if i%7 == 0 {
			fl.settle(t)
		}
	}
	st := fl.settle(t)
	requireCopy(t, root.Dir, sink, copyOf{})
	require.Zero(t, st.Refused)
	types := sink.eventTypes()
	require.Equal(t, 25+5, types[events.TypeForeignImported], "every task.progress kept as foreign.imported")
	require.Equal(t, 2, types[events.TypeRunCompleted], "each run completed once")
	require.Empty(t, fl.reported(""), "nothing to report on well-formed files")
}

// TestFollowSurvivesLostAnswers: the daemon commits writes and the answer
// is lost, or refuses calls for a while; the follower sends again, and the
// command ids keep every write to one copy.
func TestFollowSurvivesLostAnswers(t *testing.T) {
	root := newRoot(t)
	sink := newMemSink()
	fl := startFollow(t, root.Dir, sink, nil)
	a := newRun(t, root, runA)
	steps := picrewtest.Lifecycle(a, 20)
	for i, s := range steps {
		require.NoError(t, s())
		if i%5 == 0 {
			sink.mu.Lock()
			sink.loseAnswer, sink.failBefore = 1, 1
			sink.mu.Unlock()
		}
	}
	st := fl.settle(t)
	require.NotZero(t, st.SendErrors, "the test must lose answers to mean anything")
	require.NotZero(t, st.Replayed)
	requireCopy(t, root.Dir, sink, copyOf{})
}

// TestFollowResumesFromCheckpoints: a follower restarted on the same log
// reads a finished run not at all, and a live one from its checkpoints, and
// imports only what was written while it was down.
func TestFollowResumesFromCheckpoints(t *testing.T) {
	root := newRoot(t)
	sink := newMemSink()
	done, live := newRun(t, root, runA), newRun(t, root, runB)
	runSteps(t, picrewtest.Lifecycle(done, 30))
	stepsLive := picrewtest.Lifecycle(live, 30)
	runSteps(t, stepsLive[:20])
	fl := startFollow(t, root.Dir, sink, nil)
	fl.settle(t)
	fl.stop(t)
	before := len(sink.appended)

	runSteps(t, stepsLive[20:30]) // written while no follower runs
	fl2 := startFollow(t, root.Dir, sink, nil)
	st := fl2.settle(t)
	requireCopy(t, root.Dir, sink, copyOf{live: true})
	require.Positive(t, len(sink.appended)-before)
	// The finished run is not read at all: its files match their
	// checkpoints. The live run's lines up to its checkpoints are read
	// again to rebuild what the planner knew (Reread), and only the lines
	// written while no follower ran are imported.
	require.Equal(t, uint64(10), st.Lines, "%+v", st)
	require.Positive(t, st.Reread)
	require.Less(t, st.Reread, uint64(20), "only the live run is read again: %+v", st)
	require.LessOrEqual(t, st.Replayed, uint64(3), "run.created and the tasks, sent again: %+v", st)

	runSteps(t, stepsLive[30:])
	fl2.settle(t)
	requireCopy(t, root.Dir, sink, copyOf{})
}

// TestFollowPartialLastLine: a line without its newline yet is left for
// later, and reported once when it has stayed so for SettleAfter (a writer
// stopped mid-line); when the rest arrives it is imported once.
func TestFollowPartialLastLine(t *testing.T) {
	root := newRoot(t)
	sink := newMemSink()
	a := newRun(t, root, runA)
	runSteps(t, picrewtest.Lifecycle(a, 3)[:6])
	fl := startFollow(t, root.Dir, sink, nil)
	fl.settle(t)
	line := `{"time":"2026-12-01T12:00:00.000Z","type":"task.progress","runId":"` + runA +
		`","taskId":"01_plan","metadata":{"seq":99}}`
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), []byte(line[:40])))
	fl.settle(t)
	require.Eventually(t, func() bool { return len(fl.reported("events.jsonl")) > 0 }, 30*time.Second,
		10*time.Millisecond)
	fl.settle(t)
	require.Len(t, fl.reported("events.jsonl"), 1)
	require.Contains(t, fl.reported("events.jsonl")[0], "partial last line")
	_, count := sink.imported()
	require.Zero(t, count["import:"+runA+":seq:99"])

	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), []byte(line[40:]+"\n")))
	fl.settle(t)
	_, count = sink.imported()
	require.Equal(t, 1, count["import:"+runA+":seq:99"])
}

// TestFollowLineBeingWritten: a reader can find a line cut where a write is
// still going on (at a page boundary, say). Such a line is read when it is
// complete and reported never: its writer did not stop.
func TestFollowLineBeingWritten(t *testing.T) {
	root := newRoot(t)
	sink := newMemSink()
	a := newRun(t, root, runA)
	runSteps(t, picrewtest.Lifecycle(a, 3)[:6])
	o := fastFollow()
	o.SettleAfter = time.Hour
	fl := startFollow(t, root.Dir, sink, o)
	fl.settle(t)
	line := `{"time":"2026-12-01T12:00:00.000Z","type":"task.progress","runId":"` + runA +
		`","taskId":"01_plan","metadata":{"seq":3}}`
	for _, part := range []string{line[:40], line[40:80], line[80:] + "\n"} {
		require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), []byte(part)))
		fl.settle(t)
		fl.settle(t)
	}
	_, count := sink.imported()
	require.Equal(t, 1, count["import:"+runA+":seq:3"])
	require.Empty(t, fl.reported(""))
}

// TestFollowCorruptLine: a line that is not JSON is skipped and reported;
// the lines after it are imported.
func TestFollowCorruptLine(t *testing.T) {
	root := newRoot(t)
	sink := newMemSink()
	a := newRun(t, root, runA)
	steps := picrewtest.Lifecycle(a, 3)
	runSteps(t, steps[:6])
	fl := startFollow(t, root.Dir, sink, nil)
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), []byte("{not json\n")))
	runSteps(t, steps[6:])
	fl.settle(t)
	require.Equal(t, []string{"corrupt event line: skipped"}, fl.reported("events.jsonl"))
	requireCopy(t, root.Dir, sink, copyOf{})
}

// TestFollowTruncatedFile: events.jsonl cut shorter than what was read
// (same inode) is read again from its start and reported; nothing is
// imported twice, and what is appended after is imported.
func TestFollowTruncatedFile(t *testing.T) {
	root := newRoot(t)
	sink := newMemSink()
	a := newRun(t, root, runA)
	steps := picrewtest.Lifecycle(a, 10)
	runSteps(t, steps[:16])
	fl := startFollow(t, root.Dir, sink, nil)
	fl.settle(t)
	require.NoError(t, a.Truncate(0))
	runSteps(t, steps[16:])
	fl.settle(t)
	reasons := fl.reported("events.jsonl")
	require.NotEmpty(t, reasons)
	// Noticed as truncated, or, when the file grew past what was read
	// before a pass looked, as rewritten in place.
	require.Contains(t, reasons[0], "read again from the start")
	require.NotContains(t, strings.Join(reasons, "\n"), "corrupt")
	_, count := sink.imported()
	for id, n := range count {
		require.Equal(t, 1, n, id)
	}
	require.Equal(t, 1, count["import:"+runA+":seq:"+itoa(a.Seq())], "the last event, written after the truncation")
}

// TestFollowRotatedFile: pi-crew's rotation renames events.jsonl to an
// archive and starts a new file, and its compaction rewrites the file with
// its last lines under a new inode. Both are reported and nothing is
// imported twice or lost.
func TestFollowRotatedFile(t *testing.T) {
	root := newRoot(t)
	sink := newMemSink()
	a := newRun(t, root, runA)
	steps := picrewtest.Lifecycle(a, 20)
	runSteps(t, steps[:14])
	fl := startFollow(t, root.Dir, sink, nil)
	fl.settle(t)
	require.NoError(t, a.Rotate())
	runSteps(t, steps[14:20])
	fl.settle(t)
	plannedAt := plannedIDs(t, root.Dir)
	require.NoError(t, a.Compact(3))
	runSteps(t, steps[20:])
	fl.settle(t)
	reasons := fl.reported("events.jsonl")
	require.NotEmpty(t, reasons)
	require.Contains(t, reasons[len(reasons)-1], "replaced (rotated")
	// Seqs 7..9 were in events.jsonl when it was rotated: the archive keeps
	// them. The compaction dropped what came before the last 3 lines of the
	// new file, imported already.
	var dropped []string
	for _, id := range plannedAt {
		if strings.Contains(id, ":seq:") && !slices.Contains(plannedIDs(t, root.Dir), id) {
			dropped = append(dropped, id)
		}
	}
	require.NotEmpty(t, dropped, "the compaction must drop imported lines to mean anything")
	requireCopy(t, root.Dir, sink, copyOf{extra: dropped})
}

// TestFollowRunDeleted: a run directory removed by pi-crew's retention is
// reported, what was imported stays, its checkpoints are marked gone, and
// the follower goes on with the other runs.
func TestFollowRunDeleted(t *testing.T) {
	root := newRoot(t)
	sink := newMemSink()
	a, b := newRun(t, root, runA), newRun(t, root, runB)
	runSteps(t, picrewtest.Lifecycle(a, 5))
	stepsB := picrewtest.Lifecycle(b, 5)
	runSteps(t, stepsB[:10])
	fl := startFollow(t, root.Dir, sink, nil)
	fl.settle(t)
	imported, _ := sink.imported()
	require.NoError(t, a.Delete())
	runSteps(t, stepsB[10:])
	fl.settle(t)
	require.Contains(t, fl.reported(runA)[0], "run directory removed")
	after, count := sink.imported()
	require.Subset(t, after, imported, "what was imported stays")
	for id, n := range count {
		require.Equal(t, 1, n, id)
	}
	cks, err := sink.Checkpoints(t.Context())
	require.NoError(t, err)
	gone := 0
	for _, c := range cks {
		if filepath.Base(filepath.Dir(c.Path)) == runA || filepath.Base(c.Path) == runA {
			require.True(t, c.Gone, c.Path)
			gone++
		}
	}
	require.Positive(t, gone)
	requireCopy(t, root.Dir, sink, copyOf{run: runB})
}

// TestFollowNotARoot: a directory without state/runs is refused at start.
func TestFollowNotARoot(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "state"), 0o755))
	err := NewFollower(dir, newMemSink(), nil).Run(t.Context())
	require.ErrorContains(t, err, "not a pi-crew crew root")
}

// A root whose state/runs is a symbolic link out of the root is refused at start, as the one-shot import refuses it:
// os.Stat followed the link, and every pass then failed to list it (the reader opens nothing outside the root), so
// the follower reported the runs unreadable, retrying, for good.
func TestFollowRefusesARunsDirectoryOutsideTheRoot(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "state"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "state", "runs")))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := NewFollower(dir, newMemSink(), fastFollow()).Run(ctx)
	require.ErrorContains(t, err, "not a pi-crew crew root")
}

// TestFollowBatchesByBytes: writes that together exceed what the daemon
// takes in one request, each fitting, go over several calls, in the order
// an unbounded follower sends them, and none is refused for its size.
func TestFollowBatchesByBytes(t *testing.T) {
	root := newRoot(t)
	runSteps(t, picrewtest.Lifecycle(newRun(t, root, runA), 40))

	ref := newMemSink()
	startFollow(t, root.Dir, ref, nil).settle(t)
	want, _ := ref.imported()

	sink, fl := startCapped(t, root.Dir, 4<<10)
	st := fl.settle(t)
	got, _ := sink.imported()
	require.Equal(t, want, got, "every write, in order")
	require.Zero(t, st.SendErrors)
	require.Zero(t, st.Refused)
	require.Empty(t, fl.reported(""))
	sink.mu.Lock()
	calls := sink.calls
	sink.mu.Unlock()
	require.Greater(t, calls, 1, "the writes must not fit one call for the test to mean anything")
	requireCopy(t, root.Dir, sink.memSink, copyOf{})
}

// TestFollowWriteLargerThanARequest: a write that alone exceeds what the
// daemon takes in one request is reported and dropped, and the writes
// after it are still sent.
func TestFollowWriteLargerThanARequest(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	steps := picrewtest.Lifecycle(a, 5)
	runSteps(t, steps[:8])
	big, err := a.Message("02_exec", strings.Repeat("x", 8<<10))
	require.NoError(t, err)
	runSteps(t, steps[8:])

	sink, fl := startCapped(t, root.Dir, 4<<10)
	st := fl.settle(t)
	require.Zero(t, st.SendErrors)
	require.Equal(t, uint64(1), st.Refused)

	reasons := fl.reported("")
	require.Len(t, reasons, 1)
	require.Contains(t, reasons[0], big)
	require.Contains(t, reasons[0], "larger than the daemon takes in one request")

	// Every other write, those after it included, is imported once.
	dropped := "import:" + runA + ":msg:" + big
	require.Contains(t, reasons[0], dropped)
	var want []string
	for _, id := range plannedIDs(t, root.Dir) {
		if id != dropped {
			want = append(want, id)
		}
	}
	got, count := sink.imported()
	for id, n := range count {
		require.Equal(t, 1, n, "write %s appended %d times", id, n)
	}
	sortStrings(got)
	require.Equal(t, want, got)
}

// TestFollowRefusesAnImpossibleCheckpoint: a checkpoint that cannot be (a negative offset) is not resumed from: it
// is reported, its file is read from the start, and what the follower records holds.
func TestFollowRefusesAnImpossibleCheckpoint(t *testing.T) {
	root := newRoot(t)
	live := newRun(t, root, runA)
	runSteps(t, picrewtest.Lifecycle(live, 10))
	inode, size, err := (&crewRoot{dir: root.Dir}).fileID(live.EventsPath())
	require.NoError(t, err)
	rel, err := filepath.Rel(root.Dir, live.EventsPath())
	require.NoError(t, err)
	sink := newMemSink()
	sink.appended = append(sink.appended, Write{ID: "forged", RunID: events.ImportStream, Items: []Item{{
		Type: events.TypeImportCheckpoint, Payload: &events.ImportCheckpoint{Source: events.ForeignSourcePicrew,
			Path: filepath.ToSlash(rel), Inode: inode, Size: size, Offset: -1}}}})

	fl := startFollow(t, root.Dir, sink, nil)
	fl.settle(t)
	reports := fl.reported("/events.jsonl")
	require.Len(t, reports, 1, "%v", reports)
	require.Contains(t, reports[0], "checkpoint refused (events: import checkpoint of")
	require.Contains(t, reports[0], "offset -1 is negative): read again from the start")
	requireCopy(t, root.Dir, sink, copyOf{})
	cks, err := sink.Checkpoints(t.Context())
	require.NoError(t, err)
	for _, c := range cks {
		require.NoError(t, c.Validate(), "the follower recorded %+v", c)
	}
}

// TestFollowCheckpointsAtTheDefaultInterval: every checkpoint is an event
// the log keeps for good, so a file written all the time gets one every ten
// seconds (docs/picrew.md), not one per pass; a follower that stops writes the
// last ones, and a new one started from them reads nothing again.
func TestFollowCheckpointsAtTheDefaultInterval(t *testing.T) {
	const every = 10 * time.Second // NB: the interval the docs give, not DefaultCheckpointEvery, which it holds
	root := newRoot(t)
	sink := newMemSink()
	a := newRun(t, root, runA)
	steps := picrewtest.Lifecycle(a, 40)
	runSteps(t, steps[:20])
	var clock atomic.Int64 // the follower's, in unix nanoseconds: it moves only when the test moves it
	clock.Store(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	o := fastFollow()
	o.CheckpointEvery = 0 // the default
	o.now = func() time.Time { return time.Unix(0, clock.Load()) }
	fl := startFollow(t, root.Dir, sink, o)
	first := fl.settle(t).Checkpoints
	require.Positive(t, first, "the first pass checkpoints what it read")

	// Steady writing up to just short of ten seconds after the last
	// checkpoint: every new line is read and sent, none checkpointed.
	clock.Add(int64(every - time.Nanosecond))
	runSteps(t, steps[20:30])
	fl.awaitCopy(t, root.Dir, sink)
	require.Equal(t, first, fl.f.Stats().Checkpoints, "no checkpoint within ten seconds of the last")

	// Ten seconds after the last: the lines read meanwhile are checkpointed.
	clock.Add(int64(time.Nanosecond))
	second := fl.awaitCheckpoints(t, first)

	runSteps(t, steps[30:35])
	fl.awaitCopy(t, root.Dir, sink)
	require.Equal(t, second, fl.f.Stats().Checkpoints, "no checkpoint within ten seconds of the last")
	st := fl.stop(t)
	require.Greater(t, st.Checkpoints, second, "a follower that stops writes its checkpoints")

	fl2 := startFollow(t, root.Dir, sink, nil)
	st2 := fl2.settle(t)
	require.Zero(t, st2.Lines, "nothing read again: %+v", st2)
	runSteps(t, steps[35:])
	fl2.settle(t)
	requireCopy(t, root.Dir, sink, copyOf{})
}

// TestFollowHoldsAtMostMaxPendingWrites: a run holds at most maxPending writes waiting for the daemon, however many
// lines its files gained: past that they are not read further until the daemon takes the writes. A pass read every
// complete line a file had (up to maxTailRead bytes of each of its files, archives as many as its workers make), so
// with the daemon away a run of short lines planned tens of thousands of writes in one pass, all held in memory.
// Once the daemon answers, every line is imported, once.
func TestFollowHoldsAtMostMaxPendingWrites(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.SetStatus("running"))
	var lines bytes.Buffer
	for seq := 1; seq <= 2*maxPending+1; seq++ {
		fmt.Fprintf(&lines, `{"time":"2026-12-01T12:00:00.000Z","type":"task.progress","runId":%q,`+
			`"taskId":"01_plan","metadata":{"seq":%d}}`+"\n", runA, seq)
	}
	require.Less(t, lines.Len(), maxTailRead, "one pass reads them all")
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), lines.Bytes()))

	sink := newMemSink()
	sink.failBefore = 1 << 30
	fl := NewFollower(root.Dir, sink, &FollowOptions{SettleAfter: time.Hour, CheckpointEvery: time.Nanosecond})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	runsDir := filepath.Join(root.Dir, "state", "runs")
	for range 3 {
		fl.pass(t.Context(), runsDir, true, nil)
		require.LessOrEqual(t, fl.Stats().Pending, maxPending, "writes waiting for a daemon that is away")
	}
	require.Equal(t, maxPending, fl.Stats().Pending, "the run read on up to the bound")

	sink.mu.Lock()
	sink.failBefore = 0
	sink.mu.Unlock()
	for i := 0; fl.Stats().Lines < 2*maxPending+1; i++ {
		require.Less(t, i, 10, "the lines were not all read: %+v", fl.Stats())
		fl.pass(t.Context(), runsDir, true, nil)
		require.LessOrEqual(t, fl.Stats().Pending, maxPending)
	}
	fl.pass(t.Context(), runsDir, true, nil)
	require.Zero(t, fl.Stats().Pending)
	requireCopy(t, root.Dir, sink, copyOf{live: true})
}

// TestFollowSteeringLinesWaitTogether: a steering line whose mailbox message is not there yet waits for it until the
// run's mailbox files have been read to their end in a pass after the one that first read it. Lines read together
// wait together: each waited after the one before it was let through, so a steering file of n lines whose messages
// never came (a worker's, or lost) took n waits to import, and kept its run from settling all that time. A line
// appended after the wait still waits for its own message.
func TestFollowSteeringLinesWaitTogether(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_exec", "executor"))
	require.NoError(t, a.SetStatus("running"))
	steering := filepath.Join(root.Dir, "artifacts", runA, "steering", "01_exec.jsonl")
	steer := func(id string) {
		require.NoError(t, picrewtest.AppendRaw(steering, fmt.Appendf(nil,
			`{"type":"steer","message":"go on","id":%q,"ts":"2026-12-01T12:00:00.000Z"}`+"\n", id)))
	}
	for _, id := range []string{"steer_lost_1", "steer_lost_2", "steer_lost_3"} {
		steer(id)
	}
	steers := func(sink *memSink) []string { return withPrefix(mustImported(sink), "import:"+runA+":steer:") }

	sink := newMemSink()
	_, pass, _ := stepFollower(t, root.Dir, sink)
	pass()
	require.Empty(t, steers(sink), "the lines wait for their messages")
	pass()
	require.Len(t, steers(sink), 3, "the lines read together waited together")

	steer("steer_late")
	pass()
	require.Len(t, steers(sink), 3, "a line read later waits for its message")
	msg := map[string]any{"id": "steer_late", "runId": runA, "direction": "inbox", "from": "orchestrator",
		"to": "01_exec", "taskId": "01_exec", "body": "go on", "createdAt": "2026-12-01T12:00:00.000Z",
		"status": "queued", "kind": "steer"}
	line, err := json.Marshal(msg)
	require.NoError(t, err)
	require.NoError(t, picrewtest.AppendRaw(filepath.Join(a.Dir, "mailbox", "tasks", "01_exec", "inbox.jsonl"),
		append(line, '\n')))
	pass()
	require.Len(t, steers(sink), 4)
	requireCopy(t, root.Dir, sink, copyOf{live: true})
}

// TestFollowSkipsALongLineToItsEnd: a line longer than one read (maxTailRead) is reported and skipped to its
// newline, as the one-shot import skips a line it cannot decode. The follower skipped one read's worth of it and
// took what followed, the rest of the same line, for a line of its own: here an event the one-shot import never
// sees, since the line it ends is not JSON.
func TestFollowSkipsALongLineToItsEnd(t *testing.T) {
	root := newRoot(t)
	a := runOfOneEvent(t, root, "running")
	long := append(bytes.Repeat([]byte("x"), maxTailRead), `{"type":"task.progress","metadata":{"seq":2}}`+"\n"...)
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), long))
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(),
		[]byte(`{"type":"task.progress","metadata":{"seq":3}}`+"\n")))

	want, _ := importPlan(t, root.Dir)
	require.NotContains(t, want, "import:"+runA+":seq:2")
	require.Contains(t, want, "import:"+runA+":seq:3")

	sink, reported := followPasses(t, root.Dir, 5)
	reasons := reasonsFor(reported, "state/runs/"+runA+"/events.jsonl")
	require.Contains(t, reasons, fmt.Sprintf("line longer than %d bytes: skipped", maxTailRead))
	for _, r := range reasons {
		require.NotContains(t, r, "corrupt", "the rest of the long line read as a line")
	}
	requireCopy(t, root.Dir, sink, copyOf{live: true})
}

// TestFollowIsNotSettledWithLinesLeftUnread: a pass is settled (FollowStats.Settled, which crewctl's --json progress
// shows) only when the log holds what the files said when it began. A run at maxPending writes waiting for the daemon
// is not read; the pass that hands those writes to the daemon, once it answers, reads nothing new, sends every
// write and writes every checkpoint, and was taken as settled while the run's files had lines it had not read.
func TestFollowIsNotSettledWithLinesLeftUnread(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.SetStatus("running"))
	var lines bytes.Buffer
	for seq := 1; seq <= maxPending+1; seq++ {
		fmt.Fprintf(&lines, `{"type":"task.progress","metadata":{"seq":%d}}`+"\n", seq)
	}
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), lines.Bytes()))

	sink := newMemSink()
	sink.failBefore = 1
	fl := NewFollower(root.Dir, sink, &FollowOptions{SettleAfter: time.Hour, CheckpointEvery: time.Nanosecond})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	runsDir := filepath.Join(root.Dir, "state", "runs")
	fl.pass(t.Context(), runsDir, true, nil)
	require.Equal(t, maxPending, fl.Stats().Pending, "the run read up to the bound, the daemon away")
	for i := 0; fl.Stats().Lines < maxPending+1; i++ {
		require.Less(t, i, 10, "the lines were not all read: %+v", fl.Stats())
		fl.pass(t.Context(), runsDir, true, nil)
		require.False(t, fl.Stats().Settled, "a pass settled with lines left unread: %+v", fl.Stats())
	}
	fl.pass(t.Context(), runsDir, true, nil)
	require.True(t, fl.Stats().Settled, "%+v", fl.Stats())
	requireCopy(t, root.Dir, sink, copyOf{live: true})
}

// TestFollowSettlesOnceAHeldSteeringFileIsGone: a steering line waiting for its mailbox message keeps the follower
// from settling while it waits. Its file removed, nothing of it is read any more, so nothing waits: the wait was
// kept on the removed file's state, and the follower never settled again while the run lived.
func TestFollowSettlesOnceAHeldSteeringFileIsGone(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_exec", "executor"))
	require.NoError(t, a.SetStatus("running"))
	steering := filepath.Join(root.Dir, "artifacts", runA, "steering", "01_exec.jsonl")
	require.NoError(t, picrewtest.AppendRaw(steering, []byte(`{"type":"steer","message":"go on","id":"steer_lost",`+
		`"ts":"2026-12-01T12:00:00.000Z"}`+"\n")))

	sink := newMemSink()
	fl := NewFollower(root.Dir, sink, &FollowOptions{SettleAfter: time.Hour, CheckpointEvery: time.Nanosecond})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	runsDir := filepath.Join(root.Dir, "state", "runs")
	fl.pass(t.Context(), runsDir, true, nil)
	require.False(t, fl.Stats().Settled, "the steering line waits for its message")
	require.True(t, fl.runs[runA].holding())
	require.NoError(t, os.Remove(steering))
	for range 2 {
		fl.pass(t.Context(), runsDir, true, nil)
	}
	require.True(t, fl.Stats().Settled, "%+v", fl.Stats())
	require.Empty(t, withPrefix(mustImported(sink), "import:"+runA+":steer:"))
}

// TestFollowResumesAfterALongLine: a line longer than one read is skipped without being held whole, and its hash,
// which a checkpoint after it is checked by, was left unknown. A follower restarted from that checkpoint read the
// file again from its start, reporting it rewritten, and a finished run whose file ended in that line never matched
// its checkpoint, so it was never let go and the line was read back at every pass. Now the run is let go, and a
// follower started from its checkpoints reads nothing again.
func TestFollowResumesAfterALongLine(t *testing.T) {
	root := newRoot(t)
	a := runOfOneEvent(t, root, "completed")
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), append(bytes.Repeat([]byte("x"), maxTailRead+100), '\n')))

	sink := newMemSink()
	var reported []Skipped
	o := &FollowOptions{SettleAfter: time.Nanosecond, CheckpointEvery: time.Nanosecond,
		Report: func(s Skipped) { reported = append(reported, s) }}
	fl := NewFollower(root.Dir, sink, o)
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	runsDir := filepath.Join(root.Dir, "state", "runs")
	for range 4 {
		fl.pass(t.Context(), runsDir, true, nil)
	}
	require.True(t, fl.runs[runA].dormant, "the finished run is let go")
	require.Contains(t, mustImported(sink), "import:"+runA+":reconcile:run:completed")

	cks, err := sink.Checkpoints(t.Context())
	require.NoError(t, err)
	fl2 := NewFollower(root.Dir, sink, o)
	fl2.cks = map[string]events.ImportCheckpoint{}
	for _, c := range cks {
		fl2.remember(c) // as Run loads them
	}
	reported = nil
	fl2.pass(t.Context(), runsDir, true, nil)
	require.Zero(t, fl2.Stats().Lines+fl2.Stats().Writes, "read again: %+v", fl2.Stats())
	require.Empty(t, reported)
	requireCopy(t, root.Dir, sink, copyOf{})
}

// runOfOneEvent makes run runA of root with the status status and one event.
func runOfOneEvent(t *testing.T, root *picrewtest.Root, status string) *picrewtest.Run {
	t.Helper()
	a := newRun(t, root, runA)
	require.NoError(t, a.SetStatus(status))
	_, err := a.Event("task.progress", "", nil)
	require.NoError(t, err)
	return a
}

// TestFollowStopsBetweenRunsOfAPass: a stop during a pass ends it at the next run, where it went on to read every
// run of the root first (on a large crew root, a stop during the first pass waited minutes for it); what was read
// is sent, and the next start reads the rest, nothing lost.
func TestFollowStopsBetweenRunsOfAPass(t *testing.T) {
	root := newRoot(t)
	const runs = 12
	for i := range runs {
		runSteps(t, picrewtest.Lifecycle(newRun(t, root, fmt.Sprintf("team_20261201120000_%016x", i)), 2))
	}
	sink := newMemSink()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := fastFollow()
	looked := 0
	o.synced = func(string) {
		if looked++; looked == 3 {
			cancel() // as crewd's stop does
		}
	}
	require.ErrorIs(t, NewFollower(root.Dir, sink, o).Run(ctx), context.Canceled)
	require.Equal(t, 3, looked, "runs looked at after the stop")
	ids, _ := sink.imported()
	require.NotEmpty(t, ids, "what the pass read before the stop is sent")

	fl := startFollow(t, root.Dir, sink, nil)
	fl.settle(t)
	requireCopy(t, root.Dir, sink, copyOf{})
}
