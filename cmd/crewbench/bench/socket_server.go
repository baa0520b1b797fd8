package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/httpapi"
	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// The socket cell's server runs in a process of its own, as crewd does: this
// executable, told by socketServerEnv what to serve. Its CPU time is then the
// server's alone (engine, broker, Pebble, and their garbage collection), read
// from /proc, and the benchmark's clients — their encoding, their reads and
// writes, their goroutines and garbage — are counted apart, in this process.
// With both in one process every cost of the client was charged to the
// server's CPU per operation, and the client's garbage to the server's
// collector.
//
// The child speaks a line protocol on its stdin and stdout: it prints "ready"
// once the socket accepts connections; "stats" asks for the engine's commit
// counters (one line of JSON, socketServerStats); "profile PREFIX" starts a
// CPU and an allocation profile of the server (startCellProfile's files,
// named by PREFIX) and "profile-stop N" ends it, N operations done, each
// answered by one line ("ok", the profile's report, or "error: …"); the end
// of stdin closes the server, the engine and the log, and the child exits 0.
const socketServerEnv = "CREWBENCH_SOCKET_SERVER"

// socketServerJob is what the child serves.
type socketServerJob struct {
	Dir        string // the store's directory
	Slots      int
	Socket     string
	AdminToken string
}

// socketServerStats are the child engine's counters the pre-check and the
// cells read.
type socketServerStats struct {
	SyncShare int64
	Engine    commands.Stats // its commits (Groups) and their sizes
	Storage   StorageWork    // what its log's Pebble wrote and read
}

// SocketServerChild serves the socket cell named in the environment, if any,
// and returns the exit status; ok is false when this process is not a socket
// server child. crewbench's Main calls it first (and so must a test binary's
// TestMain).
func SocketServerChild(stdin io.Reader, stdout, stderr io.Writer) (status int, ok bool) {
	v := os.Getenv(socketServerEnv)
	if v == "" {
		return 0, false
	}
	if err := serveSocketChild(v, stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "crewbench: socket server:", err)
		return 1, true
	}
	return 0, true
}

func serveSocketChild(v string, stdin io.Reader, stdout io.Writer) error {
	var job socketServerJob
	if err := json.Unmarshal([]byte(v), &job); err != nil {
		return err
	}
	// NB: crewd's metrics, which it keeps of every group (httpapi.Metrics, the engine's observer in crewd).
	e, err := openObservedEngineStore(job.Dir, job.Slots, true, httpapi.NewMetrics())
	if err != nil {
		return err
	}
	// NB: no per-credential pace. The clients of a run share its orchestrator credential for their settlements,
	// so the default pace (5,000 requests/s per credential, a fairness policy the hostile-mix soak measures)
	// would cap a one-run cell at 5,000 admissions/s whatever the socket costs.
	srv, err := broker.New(e.eng, e.log, broker.Options{SocketPath: job.Socket,
		AdminDigest: daemon.Digest(job.AdminToken), ServerKey: []byte(randomHex(32)), SessionID: "crewbench",
		RatePerCredential: -1})
	if err == nil {
		err = srv.Listen()
	}
	if err != nil {
		return errors.Join(err, e.Close())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	if _, err := fmt.Fprintln(stdout, "ready"); err != nil {
		return errors.Join(err, srv.Close(), <-served, e.Close())
	}
	sc := bufio.NewScanner(stdin)
	var prof *cellProfile
	for sc.Scan() {
		var reply []byte
		switch line := sc.Text(); {
		case line == "stats":
			w, _ := e.storageWork()
			reply, _ = json.Marshal(socketServerStats{SyncShare: e.SyncShare(), Engine: e.groupStats(), Storage: w})
		case strings.HasPrefix(line, "profile "):
			reply = []byte("ok")
			var err error
			if prof, err = startCellProfile(cellProfiling{prefix: strings.TrimPrefix(line, "profile ")},
				io.Discard); err != nil {
				reply = []byte("error: " + err.Error())
			}
		case strings.HasPrefix(line, "profile-stop "):
			ops, _ := strconv.ParseInt(strings.TrimPrefix(line, "profile-stop "), 10, 64)
			var report bytes.Buffer
			if prof != nil {
				prof.progress = &report
			}
			reply = []byte("ok")
			if err := prof.stop(ops); err != nil {
				reply = []byte("error: " + err.Error())
			} else if r := bytes.TrimSpace(report.Bytes()); len(r) > 0 {
				reply = r
			}
			prof = nil
		default:
			continue
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", bytes.ReplaceAll(reply, []byte("\n"), []byte(" "))); err != nil {
			break
		}
	}
	return errors.Join(srv.Close(), <-served, e.Close())
}

// socketServer is the parent's handle on a child serving a socket cell.
type socketServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
	socket string
	dir    string
	exited error // once stopped
	done   bool
}

// startSocketServer starts this executable as the server of the store in dir,
// on socket, with adminToken as the admin's secret, and waits until it serves.
func startSocketServer(dir string, slots int, socket, adminToken string) (*socketServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	job, _ := json.Marshal(socketServerJob{Dir: dir, Slots: slots, Socket: socket, AdminToken: adminToken})
	cmd := exec.Command(self)
	// NB: not the pre-check's job: a pre-check child starts its server too, and the server must not run the phase.
	env := []string{socketServerEnv + "=" + string(job)}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, precheckEnv+"=") && !strings.HasPrefix(kv, socketServerEnv+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the benchmark
	s := &socketServer{cmd: cmd, stderr: &bytes.Buffer{}, socket: socket, dir: dir}
	cmd.Stderr = s.stderr
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if line, err := s.out.ReadString('\n'); err != nil || line != "ready\n" {
		return nil, errors.Join(fmt.Errorf("bench: socket server did not start: %q %v", line, err), s.stop())
	}
	return s, nil
}

// stats asks the child for its engine's counters.
func (s *socketServer) stats() (socketServerStats, error) {
	var st socketServerStats
	line, err := s.ask("stats")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal([]byte(line), &st)
}

// profile starts the child's profile of a timed run into files named by
// prefix (startCellProfile's).
func (s *socketServer) profile(prefix string) error {
	line, err := s.ask("profile " + prefix)
	if err == nil && line != "ok" {
		err = fmt.Errorf("bench: socket server profile: %s", line)
	}
	return err
}

// profileStop ends the child's profile, ops operations done, and returns its
// report (collections, allocations per operation, the collector's share).
func (s *socketServer) profileStop(ops int64) (string, error) {
	line, err := s.ask("profile-stop " + strconv.FormatInt(ops, 10))
	if err == nil && strings.HasPrefix(line, "error: ") {
		err = fmt.Errorf("bench: socket server profile: %s", line)
	}
	return line, err
}

// ask sends the child one line and returns its one-line answer.
func (s *socketServer) ask(line string) (string, error) {
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		return "", err
	}
	answer, err := s.out.ReadString('\n')
	return strings.TrimSuffix(answer, "\n"), err
}

// stop closes the child's server and engine and waits for it to exit.
func (s *socketServer) stop() error {
	if s.done {
		return s.exited
	}
	s.done = true
	_ = s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		s.exited = fmt.Errorf("bench: socket server: %w: %s", err, lastLines(s.stderr.String(), 5))
	}
	return s.exited
}

// final stops the child and reads every run back from the log it wrote.
func (s *socketServer) final() (map[string]Final, error) {
	if err := s.stop(); err != nil {
		return nil, err
	}
	l, err := eventlog.Open(filepath.Join(s.dir, "crewlog"), nil)
	if err != nil {
		return nil, err
	}
	f, err := logFinal(l)
	return f, errors.Join(err, l.Close())
}

// cpu is the child's CPU time so far (user + system, every thread).
func (s *socketServer) cpu() (time.Duration, error) { return procCPU(s.cmd.Process.Pid) }
