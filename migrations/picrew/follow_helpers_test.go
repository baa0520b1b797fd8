package picrew

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// memSink is a Sink that keeps what a daemon would: the command ids it
// recorded (with the request, to tell a retry from a reuse) and every write
// appended, in order. failBefore makes the next calls fail unsent;
// loseAnswer makes the next calls record and then fail, as a connection
// lost after the daemon committed.
type memSink struct {
	mu         sync.Mutex
	requests   map[string]string // command id → its items as JSON
	appended   []Write
	failBefore int
	loseAnswer int
}

var errSinkDown = errors.New("memsink: down")

func newMemSink() *memSink { return &memSink{requests: map[string]string{}} }

func (m *memSink) Import(_ context.Context, ws []Write) ([]WriteResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failBefore > 0 {
		m.failBefore--
		return nil, errSinkDown
	}
	out := make([]WriteResult, len(ws))
	for i, w := range ws {
		b, err := json.Marshal(w.Items)
		if err != nil {
			return nil, err
		}
		key := w.RunID + "\x00" + w.ID
		if prev, ok := m.requests[key]; ok {
			if prev != string(b) {
				out[i] = WriteResult{Code: "bad-params", Message: "import.append: " + reusedIDText}
			} else {
				out[i] = WriteResult{Replayed: true}
			}
			continue
		}
		m.requests[key] = string(b)
		m.appended = append(m.appended, w)
		out[i] = WriteResult{Appended: len(w.Items)}
	}
	if m.loseAnswer > 0 {
		m.loseAnswer--
		return nil, errSinkDown
	}
	return out, nil
}

func (m *memSink) Checkpoints(context.Context) ([]events.ImportCheckpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	latest := map[string]events.ImportCheckpoint{}
	for _, w := range m.appended {
		if w.RunID == events.ImportStream {
			c := *w.Items[0].Payload.(*events.ImportCheckpoint)
			latest[c.Path] = c
		}
	}
	out := make([]events.ImportCheckpoint, 0, len(latest))
	for _, c := range latest {
		out = append(out, c)
	}
	return out, nil
}

// imported returns the ids of the writes appended to runs (checkpoints
// left out), in order, and how many times each was appended.
func (m *memSink) imported() (ids []string, count map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	count = map[string]int{}
	for _, w := range m.appended {
		if w.RunID == events.ImportStream {
			continue
		}
		ids = append(ids, w.ID)
		count[w.ID]++
	}
	return ids, count
}

// eventTypes counts the appended events by type (checkpoints left out).
func (m *memSink) eventTypes() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, w := range m.appended {
		for _, it := range w.Items {
			if it.Type != events.TypeImportCheckpoint {
				out[it.Type]++
			}
		}
	}
	return out
}

// following is a Follower running in the background of a test.
type following struct {
	f      *Follower
	cancel context.CancelFunc
	done   chan error
	passes chan FollowStats
	mu     sync.Mutex
	seen   []Skipped
}

// fastFollow are options that make a test's follower quick: short polls,
// settle and checkpoint intervals.
func fastFollow() *FollowOptions {
	return &FollowOptions{Poll: 20 * time.Millisecond, SettleAfter: 200 * time.Millisecond,
		CheckpointEvery: time.Millisecond}
}

func startFollow(t *testing.T, root string, sink Sink, o *FollowOptions) *following {
	t.Helper()
	if o == nil {
		o = fastFollow()
	}
	fl := &following{passes: make(chan FollowStats, 1), done: make(chan error, 1)}
	o.OnPass = func(st FollowStats) {
		select { // keep only the newest
		case <-fl.passes:
		default:
		}
		fl.passes <- st
	}
	o.Report = func(s Skipped) {
		fl.mu.Lock()
		fl.seen = append(fl.seen, s)
		fl.mu.Unlock()
	}
	fl.f = NewFollower(root, sink, o)
	ctx, cancel := context.WithCancel(context.Background())
	fl.cancel = cancel
	go func() { fl.done <- fl.f.Run(ctx) }()
	t.Cleanup(func() { fl.stop(t) })
	return fl
}

// settle waits for a pass that began after the call and found nothing new
// to do, and returns its counters.
func (fl *following) settle(t *testing.T) FollowStats {
	t.Helper()
	after := fl.f.Stats().Passes + 1
	return fl.awaitPassThat(t, func() string { return "the follower did not settle" },
		func(st FollowStats) bool { return st.Passes > after && st.Settled })
}

// awaitPassThat waits for the end of a pass whose counters satisfy ok, and returns them. ok is asked once per pass
// ended (the newest, when several ended since it was last asked). After 30 s, a guard against a hang and not a
// measure, it stops the follower and fails with why (asked then) and what the follower holds.
func (fl *following) awaitPassThat(t *testing.T, why func() string, ok func(FollowStats) bool) FollowStats {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case st := <-fl.passes:
			if ok(st) {
				return st
			}
		case err := <-fl.done:
			require.FailNow(t, "the follower stopped", "%v", err)
		case <-timeout.C:
			fl.stop(t)
			var state []string
			for _, r := range fl.f.runs {
				state = append(state, fmt.Sprintf("run %s: pending %d, dirty %v, reconciled %q, status %q", r.id,
					len(r.pending), r.anyDirty(), r.reconciled, r.p.r.manifest.Status))
			}
			require.FailNow(t, why(), "%+v\n%s\n%v", fl.f.Stats(), state, fl.seen)
		}
	}
}

// stop ends the follower and returns its counters.
func (fl *following) stop(t *testing.T) FollowStats {
	if fl.cancel == nil {
		return fl.f.Stats()
	}
	fl.cancel()
	fl.cancel = nil
	require.ErrorIs(t, <-fl.done, context.Canceled)
	return fl.f.Stats()
}

// awaitCopy waits until the sink holds every write a one-shot import of the files as they are now makes (a live
// run's reconcile left out), then for the pass that sent the last of them to end: its checkpoints, if due, are
// written then. The sink is compared with the files once per pass ended: only a pass sends writes.
func (fl *following) awaitCopy(t *testing.T, root string, sink *memSink) {
	t.Helper()
	var got, want []string
	sent := func(FollowStats) bool {
		got, want = copyIDs(t, root, sink, copyOf{live: true})
		return slices.Equal(got, want)
	}
	why := func() string {
		return fmt.Sprintf("the follower did not send every write:\ngot %v\nwant %v", got, want)
	}
	fl.awaitPassThat(t, why, sent)
	fl.awaitPass(t)
}

// awaitPass waits until a pass that began after the call has ended.
func (fl *following) awaitPass(t *testing.T) {
	t.Helper()
	after := fl.f.Stats().Passes + 1
	fl.awaitPassThat(t, func() string { return "no pass ended" }, func(st FollowStats) bool {
		return st.Passes > after
	})
}

// awaitCheckpoints waits until the follower has written more than n checkpoints and the pass that wrote them has
// ended (it counts them one by one), and returns how many it has.
func (fl *following) awaitCheckpoints(t *testing.T, n uint64) uint64 {
	t.Helper()
	fl.awaitPassThat(t, func() string { return fmt.Sprintf("no checkpoint past %d", n) },
		func(st FollowStats) bool { return st.Checkpoints > n })
	fl.awaitPass(t)
	return fl.f.Stats().Checkpoints
}

// reported returns the reasons reported so far for paths ending in suffix.
func (fl *following) reported(suffix string) []string {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	var out []string
	for _, s := range fl.seen {
		if len(s.Path) >= len(suffix) && s.Path[len(s.Path)-len(suffix):] == suffix {
			out = append(out, s.Reason)
		}
	}
	sort.Strings(out)
	return out
}

// plannedIDs is what a one-shot import of the root as it is now would
// write: its command ids per run.
func plannedIDs(t *testing.T, root string) []string {
	t.Helper()
	ids, _ := importPlan(t, root)
	return ids
}

// importPlan is plannedIDs and what the reading of the files reported.
func importPlan(t *testing.T, root string) (ids []string, skipped []Skipped) {
	t.Helper()
	src := &source{root: root}
	runs, err := src.readRuns()
	require.NoError(t, err)
	for _, r := range runs {
		for _, w := range newPlanner(src, r, time.Now).plan() {
			ids = append(ids, w.id)
		}
	}
	sort.Strings(ids)
	return ids, src.skipped
}

func sortStrings(s []string) { sort.Strings(s) }

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// cappedSink is a memSink behind a frame cap, as the broker client is: a
// call whose writes encode to more than limit bytes fails unsent.
type cappedSink struct {
	*memSink
	limit int
	calls int // calls that carried run writes (checkpoints left out)
}

var errTooLarge = errors.New("cappedsink: request frame too large")

func (c *cappedSink) Import(ctx context.Context, ws []Write) ([]WriteResult, error) {
	total := 0
	for _, w := range ws {
		n, err := w.encodedSize()
		if err != nil {
			return nil, err
		}
		total += n
	}
	if total > c.limit {
		return nil, errTooLarge
	}
	c.mu.Lock()
	if ws[0].RunID != events.ImportStream {
		c.calls++
	}
	c.mu.Unlock()
	return c.memSink.Import(ctx, ws)
}

// startCapped starts a follower whose batches are bounded to limit bytes on
// a sink that refuses a call over limit.
func startCapped(t *testing.T, root string, limit int) (*cappedSink, *following) {
	t.Helper()
	sink := &cappedSink{memSink: newMemSink(), limit: limit}
	o := fastFollow()
	o.MaxBatchBytes = limit
	return sink, startFollow(t, root, sink, o)
}

// followPasses makes n passes of a new follower over root in the test's
// goroutine (what Follower.Run does at every poll, without notifications),
// settling in a nanosecond, and returns its sink and what it reported.
func followPasses(t *testing.T, root string, n int) (*memSink, []Skipped) {
	t.Helper()
	sink := newMemSink()
	_, pass, reported := stepFollower(t, root, sink)
	for range n {
		pass()
	}
	return sink, *reported
}

// stepFollower is a new follower over root, sending to sink, whose passes (what Follower.Run does at every poll,
// without notifications) the test makes one at a time in its goroutine with pass; it settles in a nanosecond.
// reported holds what it reported so far.
func stepFollower(t *testing.T, root string, sink Sink) (fl *Follower, pass func(), reported *[]Skipped) {
	t.Helper()
	reported = new([]Skipped)
	fl = NewFollower(root, sink, &FollowOptions{SettleAfter: time.Nanosecond, CheckpointEvery: time.Nanosecond,
		Report: func(s Skipped) { *reported = append(*reported, s) }})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	// NB: a clock that moves a millisecond at every reading, so that a run settles (SettleAfter) and a checkpoint
	// comes due (CheckpointEvery) by the next pass without the test waiting for the wall clock.
	var ticks atomic.Int64
	start := time.Now()
	fl.o.now = func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }
	pass = func() { fl.pass(t.Context(), filepath.Join(root, "state", "runs"), true, nil) }
	return fl, pass, reported
}

// restartedFollower is stepFollower over root and sink, started from the checkpoints sink holds (what Run loads
// first): a follower restarted.
func restartedFollower(t *testing.T, root string, sink *memSink) (fl *Follower, pass func(), reported *[]Skipped) {
	t.Helper()
	cks, err := sink.Checkpoints(t.Context())
	require.NoError(t, err)
	fl, pass, reported = stepFollower(t, root, sink)
	for _, c := range cks {
		fl.remember(c) // as Run loads them
	}
	return fl, pass, reported
}

// reasonsFor are the reasons reported for the path rel.
func reasonsFor(skipped []Skipped, rel string) []string {
	var out []string
	for _, s := range skipped {
		if s.Path == rel {
			out = append(out, s.Reason)
		}
	}
	return out
}

// withPrefix are the ids that start with prefix.
func withPrefix(ids []string, prefix string) []string {
	var out []string
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	return out
}

// readRuns reads every run under state/runs, in run-id order, all at once: the tests' view of a root. NB: the
// importers read one run at a time (runIDs, readRun), so their memory follows a run, not the root.
func (s *source) readRuns() ([]*run, error) {
	ids, err := s.runIDs()
	if err != nil {
		return nil, err
	}
	var runs []*run
	for _, id := range ids {
		if r := s.readRun(id, s.runDir(id)); r != nil {
			runs = append(runs, r)
		}
	}
	return runs, nil
}

// requireTaskAddedWhileListingIsRead follows root (runningPlanRun's run A) with a follower whose second pass, after
// it read tasks.json, lists the directory dir (made first): add adds a task of the run and writes a line of it in
// dir then, as pi-crew may between the two reads, and returns the id of the write the line makes. It requires that
// the follower made that write, reported no line as naming no task of tasks.json, and holds what a one-shot import of
// the files holds.
func requireTaskAddedWhileListingIsRead(t *testing.T, root, dir string, add func() string) {
	t.Helper()
	sink := newMemSink()
	_, pass, reported := stepFollower(t, root, sink)
	pass()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	list := readDir
	want := ""
	readDir = func(cr *crewRoot, p string) ([]os.DirEntry, error) {
		if p == dir && want == "" {
			want = add()
		}
		return list(cr, p)
	}
	t.Cleanup(func() { readDir = list })
	pass()
	readDir = list
	pass()
	require.NotEmpty(t, want, "the pass listed %s", dir)
	require.Contains(t, mustImported(sink), want)
	for _, s := range *reported {
		require.NotContains(t, s.Reason, "not a task of tasks.json")
	}
	requireCopy(t, root, sink, copyOf{live: true})
}
