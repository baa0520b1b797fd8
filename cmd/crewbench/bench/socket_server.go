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

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// The socket cell's server is crewd: this executable, told by socketServerEnv
// what to serve, runs crewd's daemon (daemon.MainServing) with crewd's flags,
// so what the cell times is crewd as it ships — its engine and broker config,
// its per-principal limits, its soft memory limit, its free-space guard, its
// collection after each snapshot, its dashboard on a port of its own — but for
// the flags the workload needs (socketCrewdArgs). Its CPU time is then the
// server's alone, read from /proc, and the benchmark's clients — their
// encoding, their reads and writes, their goroutines and garbage — are counted
// apart, in this process.
//
// The child speaks a line protocol on its stdin and stdout: it prints "ready"
// once the socket accepts connections; "stats" asks for the engine's commit
// counters (one line of JSON, socketServerStats); "profile PREFIX" starts a
// CPU and an allocation profile of the server (startCellProfile's files,
// named by PREFIX) and "profile-stop N" ends it, N operations done, each
// answered by one line ("ok", the profile's report, or "error: …"); the end
// of stdin stops crewd as SIGTERM does, and the child exits 0 once crewd did;
// a crewd that stops on its own ends the child at once, with status 1.
// crewd's start-up lines are dropped; its log goes to the child's stderr.
const socketServerEnv = "CREWBENCH_SOCKET_SERVER"

// socketServerJob is what the child serves.
type socketServerJob struct {
	Dir    string // crewd's --data; the store is its store/
	Slots  int
	Socket string
}

// socketServerStats are the child engine's counters the pre-check and the
// cells read.
type socketServerStats struct {
	SyncShare int64
	Engine    commands.Stats // its commits (Groups) and their sizes
	Storage   StorageWork    // what its log's Pebble wrote and read
}

// socketCrewdArgs are crewd's flags for the socket cell: crewd's defaults but
// for what every crewlog cell needs (benchConfig says why; a test holds the
// engine config they give to benchConfig's) and no pacing of a credential or
// a run: the clients of a run share its orchestrator credential for their
// settlements, so crewd's pace (5,000 requests/s per credential, a fairness
// policy the hostile-mix soak measures) would cap a one-run cell at 5,000
// admissions/s whatever the socket costs. The dashboard listens on a port the
// system picks, so a crewd running on the machine keeps its own.
func socketCrewdArgs(job socketServerJob) []string {
	quota := strconv.FormatInt(benchQuota, 10)
	return []string{"--data", job.Dir, "--socket", job.Socket, "--nesting", "--max-slots", strconv.Itoa(job.Slots),
		"--slot-share", "0", "--quota-events", quota, "--quota-bytes", quota,
		"--rate-per-credential", "0", "--rate-per-run", "0", "--http", "127.0.0.1:0"}
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
	if err := serveSocketChild(v, stdin, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "crewbench: socket server:", err)
		return 1, true
	}
	return 0, true
}

func serveSocketChild(v string, stdin io.Reader, stdout, stderr io.Writer) error {
	var job socketServerJob
	if err := json.Unmarshal([]byte(v), &job); err != nil {
		return err
	}
	serving := make(chan *engineStore, 1)
	exited := make(chan int, 1)
	ctx, stopCrewd := context.WithCancel(context.Background())
	defer stopCrewd()
	go func() {
		exited <- daemon.MainServing(ctx, socketCrewdArgs(job), io.Discard, stderr,
			func(eng *commands.Engine, log *eventlog.Log) {
				serving <- &engineStore{dir: job.Dir, log: log, eng: eng, withIDs: true}
			})
	}()
	var e *engineStore
	select {
	case e = <-serving:
	case status := <-exited:
		return fmt.Errorf("crewd exited with status %d before it served", status)
	}
	stop := func() error {
		stopCrewd()
		if status := <-exited; status != daemon.ExitOK {
			return fmt.Errorf("crewd exited with status %d", status)
		}
		return nil
	}
	if _, err := fmt.Fprintln(stdout, "ready"); err != nil {
		return errors.Join(err, stop())
	}
	// NB: the lines are read apart, so that a crewd that stops on its own (a failed engine, a signal) ends the
	// child at once, with its status, rather than when the parent next asks.
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var prof *cellProfile
	for {
		var line string
		select {
		case status := <-exited:
			return fmt.Errorf("crewd exited with status %d while it served", status)
		case l, ok := <-lines:
			if !ok {
				return stop()
			}
			line = l
		}
		var reply []byte
		switch {
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
			return errors.Join(err, stop())
		}
	}
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

// startSocketServer starts this executable as crewd on the data directory
// dir/crewd, on socket, with adminToken as the admin's secret (written to its
// admin.token before it starts), and waits until it serves.
func startSocketServer(dir string, slots int, socket, adminToken string) (*socketServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "crewd")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dataDir, daemon.AdminTokenFile), []byte(adminToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	job, _ := json.Marshal(socketServerJob{Dir: dataDir, Slots: slots, Socket: socket})
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
	s := &socketServer{cmd: cmd, stderr: &bytes.Buffer{}, socket: socket, dir: dataDir}
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
	l, err := eventlog.Open(filepath.Join(s.dir, daemon.StoreDir), nil)
	if err != nil {
		return nil, err
	}
	f, err := logFinal(l)
	return f, errors.Join(err, l.Close())
}

// cpu is the child's CPU time so far (user + system, every thread).
func (s *socketServer) cpu() (time.Duration, error) { return procCPU(s.cmd.Process.Pid) }
