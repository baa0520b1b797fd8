package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

func TestMain(m *testing.M) {
	// A file store whose sync was removed: the pre-check must refuse it.
	extraImpls = append(extraImpls, Impl{Name: "file-nosync", open: func(dir string, _ Spec) (Store, error) {
		f, err := openRawFile(dir)
		if err != nil {
			return nil, err
		}
		f.noSync = true
		return newGroupStore(f), nil
	}})
	// File stores whose sync does not make their file durable, which only counting the calls that succeeded on the
	// store's own files tells: one syncs a file outside its store, the other a descriptor that is no file.
	extraImpls = append(extraImpls,
		Impl{Name: "file-syncs-elsewhere", open: func(dir string, _ Spec) (Store, error) {
			return openWrongSync(dir, func(elsewhere *os.File) error { return unix.Fdatasync(int(elsewhere.Fd())) })
		}},
		Impl{Name: "file-sync-fails", open: func(dir string, _ Spec) (Store, error) {
			return openWrongSync(dir, func(*os.File) error { return unix.Fdatasync(-1) })
		}})
	// The socket cell's server and the pre-check's phases run in child processes: this binary.
	if status, ok := SocketServerChild(os.Stdin, os.Stdout, os.Stderr); ok {
		os.Exit(status)
	}
	if status, ok := PrecheckChild(os.Stdout, os.Stderr); ok {
		os.Exit(status)
	}
	// The host probe's synced writes alone, traced by TestProbeSyncIsFdatasync.
	if dir := os.Getenv(probeSyncEnv); dir != "" {
		if _, err := syncLatency(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// longEnv runs the slow tests (every implementation timed and pre-checked).
const longEnv = "CREWBENCH_LONG"

// TestCompareTiny runs compare on a few implementations with a tiny window
// and two rounds, so the pre-check, the rounds and the report cannot rot;
// with CREWBENCH_LONG=1, on every implementation with its syncs counted
// (TestPrecheckCountsSyncs covers the counting by default).
func TestCompareTiny(t *testing.T) {
	o := CompareOptions{Duration: 100 * time.Millisecond, Clients: []int{3}, Rounds: 2, Dir: t.TempDir(),
		Only: []string{"file", "crewlog", "picrew"}, SyncCount: inProcess{}}
	if os.Getenv(longEnv) != "" {
		o.Only, o.Clients, o.SyncCount = nil, []int{1, 8}, nil
	}
	var progress bytes.Buffer
	o.Progress = &progress
	cmp, err := Compare(context.Background(), o)
	require.NoError(t, err, progress.String())
	require.Empty(t, cmp.Excluded, progress.String())
	impls, err := selectImpls(o.Only)
	require.NoError(t, err)
	require.Len(t, cmp.Summary, len(impls)*2*len(o.Clients))
	require.Len(t, cmp.Rounds, 2)
	// NB: operations finished, not those counted in the window: a 100 ms
	// window on a stalled VM may be shorter than one operation, and then
	// counts none, rightly.
	finished := map[string]int64{}
	for _, rs := range cmp.Rounds {
		for _, r := range rs {
			require.NoError(t, r.Err, "%s %s", r.Impl, r.Cell)
			finished[r.Impl] += r.Finished
		}
	}
	for _, im := range impls {
		require.Positive(t, finished[im.Name], "%s finished no operation in any cell", im.Name)
		rep := cmp.Checks[im.Name]
		require.Positive(t, rep.Concurrent.Durable, im.Name)
		if _, err := exec.LookPath("strace"); err == nil && o.SyncCount == nil {
			require.GreaterOrEqual(t, rep.Sequential.Syncs, rep.Sequential.Durable, im.Name)
		}
	}
	// crewlog ÷ crewlog is 1 in every round where crewlog counted an
	// operation (a stalled VM may count none in 100 ms).
	for _, s := range cmp.Summary {
		if s.Impl != reference {
			continue
		}
		counted := 0
		for _, rs := range cmp.Rounds {
			if r, ok := findResult(rs, reference, s.Cell); ok && r.PerSec > 0 {
				counted++
			}
		}
		require.Equal(t, counted, s.VsCrewlog.N)
		if counted > 0 {
			require.InDelta(t, 1, s.VsCrewlog.Median, 1e-9)
		}
	}
	var md bytes.Buffer
	require.NoError(t, cmp.WriteMarkdown(&md))
	require.Contains(t, md.String(), fmt.Sprintf("| %d | own | picrew", o.Clients[0]))
	require.Contains(t, md.String(), "Machine: ")
	// The host is probed before the rounds and after each, and the report says what it found.
	require.Len(t, cmp.Probes, 3)
	for _, p := range cmp.Probes {
		require.Positive(t, p.HashMBps)
		require.Empty(t, p.SyncError)
		require.Positive(t, p.SyncP50)
	}
	require.Contains(t, md.String(), "Host probe, before the rounds and after each: SHA-256 on one core ")
}

// TestCompareOpenLoop: in the open loop the scheduled rate is what is
// offered, and the latency counts from the scheduled time.
func TestCompareOpenLoop(t *testing.T) {
	ctx := context.Background()
	im, _ := implByName("file")
	r := runCell(ctx, im, t.TempDir(), Cell{Clients: 4}, 100*time.Millisecond, 500*time.Millisecond, Load{Rate: 200},
		cellProfiling{}, nil)
	require.NoError(t, r.Err)
	// 200/s over 0.5 s: 100 ops scheduled in the window, all counted
	// (the ones in flight at its end are finished).
	require.Equal(t, 100, r.Ops)
}

// lessWork is a store that claims the work but skipped the reservations.
type lessWork struct{ Store }

func (l lessWork) Final(ctx context.Context) (map[string]Final, error) {
	f, err := l.Store.Final(ctx)
	for run, x := range f {
		delete(x.Events, "budget.reserved")
		x.Spent = 0
		f[run] = x
	}
	return f, err
}

// TestTimedRunRechecked: the state after a timed cell is read back, and a
// store that lost work fails the cell.
func TestTimedRunRechecked(t *testing.T) {
	ctx := context.Background()
	pebble, _ := implByName("pebble")
	good := runCell(ctx, pebble, t.TempDir(), Cell{Clients: 2}, 20*time.Millisecond, 100*time.Millisecond, Load{},
		cellProfiling{}, nil)
	require.NoError(t, good.Err)
	cheat := Impl{Name: "cheat", open: func(d string, s Spec) (Store, error) {
		st, err := pebble.open(d, s)
		return lessWork{st}, err
	}}
	bad := runCell(ctx, cheat, t.TempDir(), Cell{Clients: 2}, 20*time.Millisecond, 100*time.Millisecond, Load{},
		cellProfiling{}, nil)
	require.ErrorContains(t, bad.Err, "the state after the timed run")
	require.ErrorContains(t, bad.Err, "budget.reserved")
}

// TestCellProfileWritesItsFiles: a profiled cell writes its CPU and
// allocation profiles, and its execution trace when asked.
func TestCellProfileWritesItsFiles(t *testing.T) {
	pebble, _ := implByName("pebble")
	for _, withTrace := range []bool{false, true} {
		prefix := filepath.Join(t.TempDir(), "p")
		r := runCell(context.Background(), pebble, t.TempDir(), Cell{Clients: 2}, 10*time.Millisecond,
			50*time.Millisecond, Load{}, cellProfiling{prefix: prefix, trace: withTrace}, io.Discard)
		require.NoError(t, r.Err)
		for _, suffix := range []string{".cpu.pprof", ".allocs.pprof", ".allocs-base.pprof"} {
			require.FileExists(t, prefix+suffix)
		}
		if !withTrace {
			require.NoFileExists(t, prefix+".trace")
			continue
		}
		b, err := os.ReadFile(prefix + ".trace")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(b), "go 1."), "an execution trace starts with its header")
	}
}

// inProcess runs pre-check phases in this process, without counting syncs.
type inProcess struct{}

func (inProcess) Run(ctx context.Context, im Impl, phase, dir string) (PhaseResult, error) {
	return runPhase(ctx, im, phase, dir, func(bool) {})
}

// TestCheckRefusesLessWork: an implementation whose persisted state differs
// from crewlog's is reported, not timed.
func TestCheckRefusesLessWork(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	crewlog, _ := implByName(reference)
	ref, err := precheck(ctx, crewlog, filepath.Join(dir, "ref"), inProcess{}, nil)
	require.NoError(t, err)
	require.Empty(t, ref.Why)
	require.Positive(t, ref.Sequential.Check.Answers[ReasonSlots])
	require.Positive(t, ref.Sequential.Check.Answers[ReasonBudget])
	file, _ := implByName("file")
	got, err := precheck(ctx, file, filepath.Join(dir, "file"), inProcess{}, &ref)
	require.NoError(t, err)
	require.Empty(t, got.Why)
	cheat := Impl{Name: "cheat", open: func(d string, s Spec) (Store, error) {
		st, err := file.open(d, s)
		return lessWork{st}, err
	}}
	bad, err := precheck(ctx, cheat, filepath.Join(dir, "cheat"), inProcess{}, &ref)
	require.NoError(t, err)
	require.Contains(t, bad.Why, "budget.reserved")
}

// TestPrecheckCountsSyncs: the pre-check counts the sync calls of a store
// from outside it and refuses the file store with its fdatasync removed,
// which passes every other check.
func TestPrecheckCountsSyncs(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed")
	}
	ctx := context.Background()
	dir := t.TempDir()
	crewlog, _ := implByName(reference)
	ref, err := precheck(ctx, crewlog, filepath.Join(dir, "ref"), straceCounter{}, nil)
	require.NoError(t, err)
	require.Empty(t, ref.Why)
	require.GreaterOrEqual(t, ref.Sequential.Syncs, ref.Sequential.Durable)
	file, _ := implByName("file")
	good, err := precheck(ctx, file, filepath.Join(dir, "file"), straceCounter{}, &ref)
	require.NoError(t, err)
	require.Empty(t, good.Why)
	// The file store syncs once per group: in the sequential phase one per
	// answer (rejections included), under 8 clients once per commit.
	require.Equal(t, good.Sequential.Commits, good.Sequential.Syncs)
	require.Equal(t, good.Concurrent.Commits, good.Concurrent.Syncs)
	for _, name := range []string{"file-nosync", "file-syncs-elsewhere", "file-sync-fails"} {
		cheat, _ := implByName(name)
		bad, err := precheck(ctx, cheat, filepath.Join(dir, name), straceCounter{}, &ref)
		require.NoError(t, err, name)
		require.Contains(t, bad.Why, "0 sync calls for", name)
		require.NotContains(t, bad.Why, "run ", "%s leaves the same state: only the sync count tells", name)
	}
}

// wrongSync is the file store with its fdatasync replaced by sync, which is given a file outside the store.
type wrongSync struct {
	*rawFile
	elsewhere *os.File
	sync      func(elsewhere *os.File) error
}

func openWrongSync(dir string, sync func(elsewhere *os.File) error) (Store, error) {
	f, err := openRawFile(dir)
	if err != nil {
		return nil, err
	}
	f.noSync = true
	elsewhere, err := os.CreateTemp(filepath.Dir(dir), "elsewhere-*")
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return newGroupStore(&wrongSync{rawFile: f, elsewhere: elsewhere, sync: sync}), nil
}

func (w *wrongSync) Write(recs []sinkRecord, buf []byte) error {
	if err := w.rawFile.Write(recs, buf); err != nil {
		return err
	}
	_ = w.sync(w.elsewhere) // NB: its error ignored, as a store that syncs the wrong descriptor would not see one
	return nil
}

func (w *wrongSync) Close() error { return errors.Join(w.elsewhere.Close(), w.rawFile.Close()) }

func TestMainUsage(t *testing.T) {
	var out, errw bytes.Buffer
	require.Equal(t, 2, Main(context.Background(), []string{"compare", "--duration", "0s"}, &out, &errw))
	require.Equal(t, 1, Main(context.Background(), []string{"compare", "--only", "nosuch"}, &out, &errw))
	require.Contains(t, errw.String(), "unknown implementation")
	// --only nosuch stops a compare these flags let through before it times anything.
	for _, rounds := range []string{"0", "-1"} {
		errw.Reset()
		require.Equal(t, 2, Main(context.Background(), []string{"compare", "--rounds", rounds, "--only", "nosuch"},
			&out, &errw))
		require.Contains(t, errw.String(), "--rounds must be at least 1, got "+rounds)
	}
}

// TestCompareProfileFlags: a profile compare would not take is a usage error naming the flag, where the compare ran
// its hours and wrote no profile. --duration 0s stops a compare these flags let through before it times anything.
func TestCompareProfileFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace"}, "--profile-impl and --trace apply only with --profile"},
		{[]string{"--profile-impl", "sqlite-group"}, "--profile-impl and --trace apply only with --profile"},
		{[]string{"--profile", "p", "--profile-impl", "crewlg"},
			`--profile-impl "crewlg" is not among the implementations compared`},
		{[]string{"--profile", "p", "--only", "sqlite-group,pebble"},
			`--profile-impl "crewlog" is not among the implementations compared (sqlite-group, pebble)`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errw bytes.Buffer
			require.Equal(t, 2, Main(context.Background(),
				append([]string{"compare", "--duration", "0s"}, tc.args...), &out, &errw))
			require.Contains(t, errw.String(), tc.want)
		})
	}
}

// socketLine signals when crewd has printed its socket line.
type socketLine struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func (s *socketLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if strings.Contains(s.buf.String(), "crewd: socket ") {
		s.once.Do(func() { close(s.ready) })
	}
	return len(p), nil
}

// simCrewd starts an in-process crewd with delegation and asks on, as sim wants one, and returns its socket, its data
// directory and what it printed; it is stopped, and must have stopped cleanly, when the test ends.
func simCrewd(t *testing.T) (sock, data string, out *socketLine) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "data") // crewd makes it 0700; t.TempDir's own is 0777 minus the umask
	// NB: a short socket directory: unix socket paths are limited to 108 bytes.
	sockDir, err := os.MkdirTemp("", "crewbench-sim-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	sock = filepath.Join(sockDir, "s", "crewd.sock")
	cfg, err := daemon.Load([]string{"--data", data, "--socket", sock, "--max-slots", "8", "--log-level", "error",
		"--http", "127.0.0.1:0", "--nesting", "--max-depth=4", "--wait-methods"},
		daemon.Env{Getenv: func(string) string { return "" }, UID: os.Getuid()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	out = &socketLine{ready: make(chan struct{})}
	ran := make(chan error, 1)
	go func() { ran <- daemon.Run(ctx, cfg, out, daemon.NewLogger(&bytes.Buffer{}, cfg)) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-ran)
	})
	select {
	case <-out.ready:
	case err := <-ran:
		ran <- err
		t.Fatalf("crewd stopped: %v", err)
	}
	return sock, data, out
}

// TestSim runs the simulation for a few seconds against an in-process crewd.
func TestSim(t *testing.T) {
	sock, data, out := simCrewd(t)

	var buf bytes.Buffer
	err := Simulate(context.Background(), SimOptions{Socket: sock,
		TokenFile: filepath.Join(data, daemon.AdminTokenFile), Runs: 2, Workers: 3, Duration: 2 * time.Second,
		Seed: 7, Every: 500 * time.Millisecond, Out: &buf})
	require.NoError(t, err, buf.String())
	s := buf.String()
	// NB: which of the rarer methods (steer.push, wait.request) a 2 s run
	// reaches depends on the machine's speed, so only the common ones are
	// required.
	for _, want := range []string{"summary after", "delegate.request", "delegate.settle",
		"events in the simulated runs"} {
		require.Contains(t, s, want)
	}
	require.NotContains(t, s, "transport errors", s)

	// --dashboard asks crewd, through its socket, for a login link to the address it serves the dashboard on.
	out.mu.Lock()
	printed := out.buf.String()
	out.mu.Unlock()
	_, rest, ok := strings.Cut(printed, "crewd: dashboard http://")
	require.True(t, ok, printed)
	addr := rest[:strings.Index(rest, "/")]
	link, err := dashboardLink(context.Background(), sock, filepath.Join(data, daemon.AdminTokenFile))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(link, "http://"+addr+"/login?code="), link)
	// It opens a session: crewd answers the link with its cookie.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	resp, err := noRedirect.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.NotEmpty(t, resp.Cookies())
	_, err = dashboardLink(context.Background(), sock, filepath.Join(data, "no-such-token"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestCompareClusterTiny runs crewlog as a JetStream cluster's writer
// beside the in-process engine: every cell decides, commits and counts. R1
// by default; R3 too (three servers start per cell) with CREWBENCH_LONG.
func TestCompareClusterTiny(t *testing.T) {
	o := CompareOptions{Duration: 100 * time.Millisecond, Clients: []int{3}, Rounds: 1, Dir: t.TempDir(),
		Only: []string{"crewlog", "crewlog-jetstream-r1"}, SyncCount: inProcess{}}
	if os.Getenv(longEnv) != "" {
		o.Only = append(o.Only, "crewlog-jetstream-r3")
	}
	var progress bytes.Buffer
	o.Progress = &progress
	cmp, err := Compare(context.Background(), o)
	require.NoError(t, err, progress.String())
	require.Empty(t, cmp.Excluded, progress.String())
	// NB: operations finished, not those counted in the window: a 100 ms
	// window on a loaded machine can be shorter than one fsynced admission
	// and settlement, and then counts none, rightly.
	finished := map[string]int64{}
	for _, rs := range cmp.Rounds {
		for _, r := range rs {
			require.NoError(t, r.Err, "%s %s", r.Impl, r.Cell)
			finished[r.Impl] += r.Finished
		}
	}
	for _, name := range o.Only {
		require.Positive(t, finished[name], "%s finished no operation", name)
		require.Positive(t, cmp.Checks[name].Concurrent.Durable, name)
	}
}

// TestSocketServerRunsApart checks the socket cell's server process: it
// serves the clients, its engine's commits and groups are read over its
// stdin, it profiles itself when asked, its CPU is counted apart from the
// clients', and Final reads back what it wrote.
func TestSocketServerRunsApart(t *testing.T) {
	ctx := context.Background()
	runs, spec := []string{"run-0"}, Spec{Budget: 1 << 40, Slots: 4, Clients: 2}
	s, err := openSocketStore(t.TempDir(), spec.Slots)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Setup(ctx, runs, spec))
	before := s.Commits()
	require.Positive(t, before) // -1 when the child does not answer
	var g grouper = s           // a socket cell reports its server's groups
	g0 := g.groupStats()
	prefix := filepath.Join(t.TempDir(), "p")
	require.NoError(t, s.profileServer(prefix))
	for i := 0; i < 3; i++ {
		a, err := s.Admit(ctx, "run-0", 10)
		require.NoError(t, err)
		require.True(t, a.Admitted(), a.Reason)
		require.NoError(t, s.Settle(ctx, "run-0", a.SubID, "ok"))
	}
	report, err := s.stopServerProfile(3)
	require.NoError(t, err)
	require.Contains(t, report, "3 ops in") // the server's own count of its allocations and collections
	for _, f := range []string{".cpu.pprof", ".allocs.pprof", ".allocs-base.pprof"} {
		require.FileExists(t, prefix+f)
	}
	require.Greater(t, s.Commits(), before)
	groups := groupSizesBetween(g0, g.groupStats())
	require.EqualValues(t, 6, groups.Commands, "three admissions and their settlements")
	require.EqualValues(t, s.Commits()-before, groups.Groups)
	_, err = s.serverCPU() // the child's, by its pid; 10 ms ticks, so a short test may read 0
	require.NoError(t, err)
	f, err := s.Final(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, f["run-0"].Admitted)
	require.Equal(t, 3, f["run-0"].Events["delegate.completed"])
}

// lostServer is a store whose server's CPU can be read once, at the start of
// the timed run, and not at its end.
type lostServer struct {
	Store
	reads, stops int
}

var errServerGone = errors.New("server gone")

func (l *lostServer) serverCPU() (time.Duration, error) {
	if l.reads++; l.reads > 1 {
		return 0, errServerGone
	}
	return 0, nil
}

func (l *lostServer) profileServer(string) error { return nil }

func (l *lostServer) stopServerProfile(int64) (string, error) {
	l.stops++
	return "", nil
}

// TestCellProfileStopsWhenServerCPUFails: a cell whose server's CPU cannot be
// read after its timed run stops the server's profile and its own, so the
// next profiled cell can profile.
func TestCellProfileStopsWhenServerCPUFails(t *testing.T) {
	pebble, _ := implByName("pebble")
	lost := &lostServer{}
	im := Impl{Name: "lost", open: func(d string, s Spec) (Store, error) {
		st, err := pebble.open(d, s)
		lost.Store = st
		return lost, err
	}}
	cell := func(im Impl) Result {
		return runCell(context.Background(), im, t.TempDir(), Cell{Clients: 2}, 10*time.Millisecond,
			50*time.Millisecond, Load{}, cellProfiling{prefix: filepath.Join(t.TempDir(), "p")}, io.Discard)
	}
	require.ErrorIs(t, cell(im).Err, errServerGone)
	require.Equal(t, 1, lost.stops, "the server's profile is stopped")
	require.NoError(t, cell(pebble).Err, "this process's profile was stopped: the next cell profiles")
}

// TestProbesLine: each probe's figures in order; a sync probe that could not run is a dash, not a zero.
func TestProbesLine(t *testing.T) {
	require.Empty(t, probesLine(nil))
	got := probesLine([]HostProbe{{HashMBps: 412.4, SyncP50: 180 * time.Microsecond},
		{HashMBps: 205, SyncError: "read-only file system"}})
	require.Equal(t,
		"Host probe, before the rounds and after each: SHA-256 on one core 412, 205 MB/s; a 4 KiB write and "+
			"fdatasync in the data directory, median of 32, 180 µs, –.\n", got)
}

// oneRetry is a store that counts one retry per admission, and moves the
// cell's clock a step at each, as if each took that long.
type oneRetry struct {
	Store
	n     *atomic.Int64
	clock *atomic.Int64 // unix nanoseconds
}

const oneRetryStep = 10 * time.Millisecond

func (o oneRetry) Admit(ctx context.Context, run string, tokens int64) (Admission, error) {
	o.n.Add(1)
	o.clock.Add(int64(oneRetryStep))
	return o.Store.Admit(ctx, run, tokens)
}

func (o oneRetry) Retries() int64 { return o.n.Load() }

// TestRetriesPerOpOverTheSameSpan: retries are counted from before the
// warm-up to the last operation finished, so they are divided by every
// operation finished over that span, not by the window's alone — a store
// that retries once per operation reports 1 retry/op, however long the
// warm-up. The cell's clock moves only as the store admits.
func TestRetriesPerOpOverTheSameSpan(t *testing.T) {
	var clock atomic.Int64
	file, _ := implByName("file")
	im := Impl{Name: "retrier", open: func(d string, s Spec) (Store, error) {
		st, err := file.open(d, s)
		return oneRetry{Store: st, n: new(atomic.Int64), clock: &clock}, err
	}}
	load := Load{now: func() time.Time { return time.Unix(0, clock.Load()) }}
	r := runCell(context.Background(), im, t.TempDir(), Cell{Clients: 2}, 5*oneRetryStep, 5*oneRetryStep, load,
		cellProfiling{}, nil)
	require.NoError(t, r.Err)
	require.Positive(t, r.Ops, "operations started in the window")
	require.Greater(t, r.Finished, int64(r.Ops), "the warm-up's operations finished too")
	require.InDelta(t, 1.0, r.Retries, 1e-9)
}

// TestEveryClientFinishesAnOperation: each client of a closed-loop cell
// starts one operation, however slow the machine (Result.Finished). A
// client that first ran once the window had ended started none, and the
// tests of a tiny window that require operations finished, to check the
// state after them, failed on a stalled machine.
func TestEveryClientFinishesAnOperation(t *testing.T) {
	const clients = 3
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var reads atomic.Int64
	// The cell's start reads t0; every later reading is past its window, as
	// when its clients first ran after a stall.
	load := Load{now: func() time.Time {
		if reads.Add(1) == 1 {
			return t0
		}
		return t0.Add(time.Hour)
	}}
	file, _ := implByName("file")
	r := runCell(context.Background(), file, t.TempDir(), Cell{Clients: clients}, 10*time.Millisecond,
		50*time.Millisecond, load, cellProfiling{}, nil)
	require.NoError(t, r.Err)
	require.Equal(t, int64(clients), r.Finished, "one operation each")
	require.Zero(t, r.Ops, "none of them started in the window")
}

// TestSequentialSyncsOnePerCommit: one operation at a time leaves a
// pipelined writer nothing to hand the log while a sync runs, so in the
// sequential phase its sync share does not apply: a crewlog that synced
// every other group (its rejections, say) is refused there, as any other
// store would be.
func TestSequentialSyncsOnePerCommit(t *testing.T) {
	half := PhaseResult{Durable: 70, Commits: 235, SyncShare: 2, Syncs: 118}
	require.Contains(t, strings.Join(checkSyncs(phaseSequential, half), "; "), "118 sync calls for 235 commits")
	require.Empty(t, checkSyncs(phaseConcurrent, half), "under 8 clients one sync may cover two pipelined groups")
	whole := half
	whole.Syncs = 235
	require.Empty(t, checkSyncs(phaseSequential, whole))
}

// TestRatioOverSkipsARoundMissingOneOfTheBest: a ratio over the best of
// several stores is taken only in the rounds where every one of them was
// measured; a round where the faster one failed would otherwise compare
// crewlog with the slower one alone and flatter it.
func TestRatioOverSkipsARoundMissingOneOfTheBest(t *testing.T) {
	cell := Cell{Clients: 64}
	round := func(crewlog, sqlite, js float64, jsErr error) []Result {
		return []Result{
			{Impl: reference, Cell: cell, PerSec: crewlog},
			{Impl: "sqlite-group", Cell: cell, PerSec: sqlite},
			{Impl: "jetstream-group", Cell: cell, PerSec: js, Err: jsErr},
		}
	}
	c := &Comparison{Rounds: [][]Result{
		round(1000, 500, 2000, nil),
		round(1000, 500, 0, errors.New("bench: lost")),
		round(1000, 500, 2000, nil),
	}}
	s := c.RatioOver(reference, []string{"sqlite-group", "jetstream-group"}, cell)
	require.Equal(t, Spread{Median: 0.5, Min: 0.5, Max: 0.5, N: 2}, s)
}

// TestBenchConfigQuotasOutlastAnyWindow: the run every client of a cell writes into must not reach its quotas
// within a window (at the default million events it did, after some 12 seconds at 64 clients); crewd takes
// none larger than 2^40 (the socket cell's crewd runs with the same quotas).
func TestBenchConfigQuotasOutlastAnyWindow(t *testing.T) {
	cfg := benchConfig(64)
	window := int64(15 * time.Minute / time.Second)
	require.Greater(t, cfg.QuotaEvents, window*1_000_000*10, "events of 15 minutes of a million admissions a second")
	require.Greater(t, cfg.QuotaBytes, window*1_000_000*1_000, "bytes of 15 minutes of a million admissions a second")
}
