package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/broker/client"
)

// binDir holds the crewd binary built for this test binary; TestMain removes it.
var binDir string

// binaryBuild is one command of the module built once per test binary.
type binaryBuild struct {
	tags string // build tags, comma-separated ("": none)
	once sync.Once
	path string
	err  error
}

var build binaryBuild

func TestMain(m *testing.M) {
	if socket := os.Getenv(probeSocketEnv); socket != "" {
		os.Exit(peerProbe(socket))
	}
	dir, err := os.MkdirTemp("", "crewlog-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// crewdBinary builds cmd/crewd once per test binary, on first use, so a run of only the import rules builds
// nothing. The build uses the normal build cache: a cold build compiles Pebble and takes minutes.
func crewdBinary(t *testing.T) string { return build.binary(t, "crewd") }

// binary builds cmd/<name> into binDir on first use and returns its path.
func (b *binaryBuild) binary(t *testing.T, name string) string {
	t.Helper()
	b.once.Do(func() {
		b.path = filepath.Join(binDir, name)
		args := []string{"build", "-o", b.path}
		if b.tags != "" {
			b.path += "-" + strings.ReplaceAll(b.tags, ",", "-")
			args = []string{"build", "-tags", b.tags, "-o", b.path}
		}
		out, err := exec.Command("go", append(args, module+"/cmd/"+name)...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("integration: go build %s: %w\n%s", name, err, out)
		}
	})
	require.NoError(t, b.err)
	return b.path
}

// daemon is one crewd process on a data directory and socket that outlive it, so it can be restarted.
type daemon struct {
	t      *testing.T
	bin    string
	data   string
	socket string
	args   []string
	env    []string // added to the test's environment
	// cred, when set, runs crewd as another user (root only).
	cred *syscall.Credential

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	state  *os.ProcessState
	logs   *os.File
	// printed is what the last start wrote to stdout before it was ready.
	printed []string
}

// startTimeout bounds how long a start may take to print its socket line; it guards against a hung test, and
// measures nothing.
const startTimeout = 60 * time.Second

func newDaemon(t *testing.T, args ...string) *daemon {
	return &daemon{
		t: t, bin: crewdBinary(t), data: filepath.Join(t.TempDir(), "data"),
		socket: filepath.Join(brokertest.SocketDir(t), "run", "crewd.sock"), args: args,
	}
}

// start runs crewd and returns once it has printed its socket line, which it does only after the socket
// accepts connections: a signal, so nothing polls.
func (d *daemon) start() {
	d.t.Helper()
	if err := d.tryStart(); err != nil {
		d.t.Fatal(err)
	}
}

// tryStart is start that returns crewd exiting during the start (or not starting in time) as an error: crewd
// refusing to start is an expected answer for some tests.
func (d *daemon) tryStart() error {
	d.t.Helper()
	logs, err := os.OpenFile(filepath.Join(filepath.Dir(d.data), "crewd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(d.t, err)
	d.logs = logs
	// NB: port 0: tests run many daemons at once, and the default port would go to the first of them only.
	// NB: crewd ships fail-closed as pi-crew does (nesting off, depth 2, wait methods off); these tests drive
	// delegation and asks, so they ask for them, and a test's own flags come later and win.
	args := append([]string{"--data", d.data, "--socket", d.socket, "--log-level", "warn", "--http", "127.0.0.1:0",
		"--nesting", "--max-depth=4", "--wait-methods"}, d.args...)
	cmd := exec.Command(d.bin, args...)
	if d.env != nil {
		cmd.Env = append(os.Environ(), d.env...)
	}
	if d.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: d.cred}
	}
	cmd.Stderr = logs
	// NB: an os.Pipe rather than StdoutPipe, whose reader Wait closes: here Wait runs concurrently with the read.
	stdout, w, err := os.Pipe()
	require.NoError(d.t, err)
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	require.NoError(d.t, err)
	d.cmd, d.exited, d.state = cmd, make(chan struct{}), nil

	lines := make(chan string, 16)
	go func() {
		defer stdout.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // lines after the start are not read; keep the pipe drained
			}
		}
		close(lines)
	}()
	go func() {
		cmd.Wait()
		d.state = cmd.ProcessState
		close(d.exited)
	}()
	timeout := time.After(startTimeout)
	var got []string
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				<-d.exited
				d.logs.Close()
				return fmt.Errorf("crewd exited during start (%v), stdout %q; log:\n%s", d.state, got, d.log())
			}
			got = append(got, line)
			if line == "crewd: socket "+d.socket {
				d.printed = got
				return nil
			}
		case <-timeout:
			return fmt.Errorf("crewd did not start within %v; stdout %q; log:\n%s", startTimeout, got, d.log())
		}
	}
}

func (d *daemon) log() string {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(d.data), "crewd.log"))
	return string(b)
}

// stop sends SIGTERM and requires a clean exit (status 0).
func (d *daemon) stop() {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Signal(syscall.SIGTERM))
	d.wait()
	require.True(d.t, d.state.Success(), "crewd exit on SIGTERM: %v; log:\n%s", d.state, d.log())
}

// kill sends SIGKILL: no shutdown code runs.
func (d *daemon) kill() {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Kill())
	d.wait()
}

func (d *daemon) wait() {
	d.t.Helper()
	select {
	case <-d.exited:
	case <-time.After(startTimeout):
		d.t.Fatalf("crewd did not exit within %v", startTimeout)
	}
	d.logs.Close()
}

// cleanup kills a daemon the test left running.
func (d *daemon) cleanup() {
	if d.cmd != nil && d.exited != nil {
		select {
		case <-d.exited:
		default:
			d.cmd.Process.Kill()
			<-d.exited
		}
	}
}

func (d *daemon) adminToken() string {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.data, "admin.token"))
	require.NoError(d.t, err)
	return strings.TrimSpace(string(b))
}

func (d *daemon) dial(ctx context.Context, h client.Hello) (*client.Client, error) {
	return client.Dial(ctx, d.socket, h, nil)
}

func (d *daemon) mustDial(ctx context.Context, h client.Hello) *client.Client {
	d.t.Helper()
	c, err := d.dial(ctx, h)
	require.NoError(d.t, err, "dial as %s", h)
	d.t.Cleanup(func() { c.Close() })
	return c
}

// testContext bounds a whole test so a bug hangs nothing; it is not a timing assertion.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
