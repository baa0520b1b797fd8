package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// TestCompareTiny runs compare on every implementation at 1 and 8 clients
// with a tiny window, so neither the check nor any implementation can rot.
func TestCompareTiny(t *testing.T) {
	var progress bytes.Buffer
	cmp, err := Compare(context.Background(), CompareOptions{Duration: 200 * time.Millisecond, Clients: []int{1, 8},
		Dir: t.TempDir(), Progress: &progress})
	require.NoError(t, err, progress.String())
	require.Empty(t, cmp.Excluded, progress.String())
	require.Len(t, cmp.Results, len(Impls)*4)
	// NB: a 200 ms cell on a stalled VM may count nothing, so admissions
	// are required per implementation over its four cells, not per cell.
	ops := map[string]int64{}
	for _, r := range cmp.Results {
		require.NoError(t, r.Err, "%s %s", r.Impl, r.Cell)
		ops[r.Impl] += int64(r.Ops)
	}
	for _, im := range Impls {
		require.Positive(t, ops[im.Name], "%s counted no admission in any cell", im.Name)
	}
	var md bytes.Buffer
	require.NoError(t, cmp.WriteMarkdown(&md))
	require.Contains(t, md.String(), "| 8 | own | picrew")
	require.Contains(t, md.String(), "Machine: ")
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

// TestCheckRefusesLessWork: an implementation whose persisted state differs
// from crewlog's is reported, not timed.
func TestCheckRefusesLessWork(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ref, err := runCheck(ctx, Impls[2], filepath.Join(dir, "ref"))
	require.NoError(t, err)
	require.Equal(t, reference, Impls[2].Name)
	require.Positive(t, ref.Answers[ReasonSlots])
	require.Positive(t, ref.Answers[ReasonBudget])
	file := Impls[0]
	got, err := runCheck(ctx, file, filepath.Join(dir, "file"))
	require.NoError(t, err)
	require.Empty(t, diffCheck(ref, got))
	cheat := Impl{Name: "cheat", open: func(d string, s Spec) (Store, error) {
		st, err := file.open(d, s)
		return lessWork{st}, err
	}}
	bad, err := runCheck(ctx, cheat, filepath.Join(dir, "cheat"))
	require.NoError(t, err)
	require.Contains(t, diffCheck(ref, bad), "budget.reserved")
}

func TestMainUsage(t *testing.T) {
	var out, errw bytes.Buffer
	require.Equal(t, 2, Main(context.Background(), []string{"compare", "--duration", "0s"}, &out, &errw))
	require.Equal(t, 1, Main(context.Background(), []string{"compare", "--only", "nosuch"}, &out, &errw))
	require.Contains(t, errw.String(), "unknown implementation")
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

// TestSim runs the simulation for a few seconds against an in-process crewd.
func TestSim(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data") // crewd makes it 0700; t.TempDir's own is 0777 minus the umask
	// NB: a short socket directory: unix socket paths are limited to 108 bytes.
	sockDir, err := os.MkdirTemp("", "crewbench-sim-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "s", "crewd.sock")
	cfg, err := daemon.Load([]string{"--data", data, "--socket", sock, "--max-slots", "8", "--log-level", "error",
		"--http", "127.0.0.1:0"},
		daemon.Env{Getenv: func(string) string { return "" }, UID: os.Getuid()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &socketLine{ready: make(chan struct{})}
	ran := make(chan error, 1)
	go func() { ran <- daemon.Run(ctx, cfg, out, daemon.NewLogger(&bytes.Buffer{}, cfg)) }()
	select {
	case <-out.ready:
	case err := <-ran:
		t.Fatalf("crewd stopped: %v", err)
	}

	var buf bytes.Buffer
	err = Simulate(context.Background(), SimOptions{Socket: sock, TokenFile: filepath.Join(data, daemon.AdminTokenFile),
		Runs: 2, Workers: 3, Duration: 2 * time.Second, Seed: 7, Every: 500 * time.Millisecond, Out: &buf})
	require.NoError(t, err, buf.String())
	s := buf.String()
	// NB: which of the rarer methods (steer.push, wait.request) a 2 s run
	// reaches depends on the machine's speed, so only the common ones are
	// required.
	for _, want := range []string{"summary after", "delegate.request", "delegate.settle", "events in the simulated runs"} {
		require.Contains(t, s, want)
	}
	require.NotContains(t, s, "transport errors", s)

	// --dashboard asks crewd for a login link to print.
	out.mu.Lock()
	printed := out.buf.String()
	out.mu.Unlock()
	_, rest, ok := strings.Cut(printed, "crewd: dashboard http://")
	require.True(t, ok, printed)
	addr := rest[:strings.Index(rest, "/")]
	link, err := dashboardLink(context.Background(), addr, filepath.Join(data, daemon.AdminTokenFile))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(link, "http://"+addr+"/login?code="), link)
	_, err = dashboardLink(context.Background(), addr, filepath.Join(data, "no-such-token"))
	require.ErrorIs(t, err, os.ErrNotExist)
	cancel()
	require.NoError(t, <-ran)
}
