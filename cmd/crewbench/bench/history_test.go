package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/events"
)

// TestWriteHistory writes a small history and checks that the store
// verifies, holds the events asked for (give or take one step of a run's
// work), has the runs asked for — all but the active ones completed, each
// active one with its delegation still in flight — and the whole mix.
func TestWriteHistory(t *testing.T) {
	const want, runs, active = 3000, 24, 3
	dir := t.TempDir()
	const span = 48 * time.Hour
	st, err := WriteHistory(context.Background(),
		HistoryOptions{Events: want, Runs: runs, Active: active, ActiveEvents: 200, Dir: dir,
			Submitters: 8, Span: span})
	require.NoError(t, err)
	require.EqualValues(t, want, st.Head, "events in the store")

	byType, first, last := verifiedHistory(t, dir, st.Head)
	require.Greater(t, last.Sub(first), span-time.Hour, "the events spread over the span")
	require.WithinDuration(t, time.Now(), last, time.Minute,
		"the history ends now, with the delegations left in flight")
	require.Equal(t, runs, byType[events.TypeRunCreated])
	require.Equal(t, runs-active, byType[events.TypeRunCompleted])
	require.Equal(t, active, byType[events.TypeDelegateAdmitted]-byType[events.TypeDelegateCompleted],
		"each active run has one delegation in flight")
	for _, typ := range []string{events.TypeDelegateRejected, events.TypeBudgetCharged, events.TypeAskAnswered,
		events.TypeTaskUsage, events.TypeMailboxDelivered, events.TypeMailboxAcknowledged,
		events.TypeCredentialIssued} {
		require.Positive(t, byType[typ], typ)
	}

	_, err = WriteHistory(context.Background(), HistoryOptions{Events: want, Runs: runs, Active: active,
		ActiveEvents: 200, Dir: dir})
	require.ErrorIs(t, err, errStoreExists)
}

// TestWriteHistoryNoneActive: with no active run the last one is held open
// for the top-up and completed after it, so the count is still met.
func TestWriteHistoryNoneActive(t *testing.T) {
	const want, runs = 1000, 10
	dir := t.TempDir()
	st, err := WriteHistory(context.Background(), HistoryOptions{Events: want, Runs: runs, Dir: dir})
	require.NoError(t, err)
	require.EqualValues(t, want, st.Head, "events in the store")
	byType, _, _ := verifiedHistory(t, dir, st.Head)
	require.Equal(t, runs, byType[events.TypeRunCompleted])
	require.Equal(t, byType[events.TypeDelegateAdmitted], byType[events.TypeDelegateCompleted], "nothing in flight")
}

func TestWriteHistoryTooFewEvents(t *testing.T) {
	_, err := WriteHistory(context.Background(), HistoryOptions{Events: 100, Runs: 10, Dir: t.TempDir()})
	require.ErrorIs(t, err, errHistoryEvents)
}

// TestHistoryFlagsOutOfRange: a count or span history cannot use is a usage error naming the flag, where it was
// replaced by the default and a history other than the one asked for was written and measured. --runs 0 stops a
// history these flags let through before it writes anything.
func TestHistoryFlagsOutOfRange(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"--submitters", "0", "--submitters must be at least 1, got 0"},
		{"--span", "-1h", "--span must be positive, got -1h0m0s"},
		{"--span", "0s", "--span must be positive, got 0s"},
		{"--active-events", "0", "--active-events must be at least " + strconv.Itoa(minActiveEvents) + ", got 0"},
		{"--starts", "-2", "--starts must be at least 1, got -2"},
		{"--calls", "0", "--calls must be at least 1, got 0"},
		{"--write", "-2", "--write must be -1 or more, got -2"},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			var out, errw bytes.Buffer
			code := Main(context.Background(), []string{"history", "--data", t.TempDir(), "--runs", "0",
				tc.flag + "=" + tc.value}, &out, &errw)
			require.Equal(t, 2, code, errw.String())
			require.Contains(t, errw.String(), tc.want)
		})
	}
}

// verifiedHistory checks the store in dir (integrity and invariants, head),
// counts its events by type and returns the first and the last event's time.
func verifiedHistory(t *testing.T, dir string, head uint64) (byType map[string]int, first, last time.Time) {
	t.Helper()
	l, err := audit.Open(filepath.Join(dir, daemon.StoreDir))
	require.NoError(t, err)
	defer l.Close()
	rep, err := audit.Verify(l, nil)
	require.NoError(t, err)
	require.Empty(t, rep.Check.Problems)
	require.Equal(t, head, rep.Store.Head)
	byType = map[string]int{}
	it := l.Read(1)
	for it.Next() {
		ev := it.Event()
		byType[ev.Type]++
		if first.IsZero() {
			first = time.Unix(0, ev.Time)
		}
		last = time.Unix(0, ev.Time)
	}
	require.NoError(t, it.Err())
	require.NoError(t, it.Close())
	return byType, first, last
}

func TestFinishedRunSample(t *testing.T) {
	s := finishedRunSample(1000, 10)
	require.Len(t, s, querySample)
	require.Equal(t, historyRunID(0), s[0], "the oldest run")
	require.Equal(t, historyRunID(989), s[querySample-1], "the newest finished run")
	require.NotContains(t, s, historyRunID(990), "an active run")
	require.Equal(t, []string{historyRunID(0)}, finishedRunSample(3, 2))
	require.Empty(t, finishedRunSample(2, 2))
	require.Equal(t, []string{historyRunID(8), historyRunID(9)}, activeRuns(10, 2))
}

func TestReadMemory(t *testing.T) {
	m, err := readMemory(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, m.rss)
	require.GreaterOrEqual(t, m.hwm, m.rss)
}

// TestHistoryDaemonFlags: crewd started with historyDaemonFlags puts in
// force the config the history was written under, so it records nothing.
func TestHistoryDaemonFlags(t *testing.T) {
	dir := t.TempDir()
	args := append([]string{"--data", dir, "--socket", filepath.Join(dir, "s", "crewd.sock")}, historyDaemonFlags...)
	cfg, err := daemon.Load(args, daemon.Env{Getenv: func(string) string { return "" }, UID: os.Getuid()})
	require.NoError(t, err)
	require.Equal(t, historyConfig(), cfg.Engine)
}

// TestCrewdCPUReadsAProcess: crewdCPU reads a process's user and system time from /proc/PID/stat, which grows as
// the process works (this one, here).
func TestCrewdCPUReadsAProcess(t *testing.T) {
	before := crewdCPU(os.Getpid())
	deadline := time.Now().Add(5 * time.Second) // a failure guard: the loop ends as soon as the time grows
	for crewdCPU(os.Getpid()) <= before && time.Now().Before(deadline) {
		for i := range 1_000_000 {
			_ = strconv.Itoa(i)
		}
	}
	require.Greater(t, crewdCPU(os.Getpid()), before, "no CPU time read after seconds of work")
	require.Zero(t, crewdCPU(-1), "no such process")
}
