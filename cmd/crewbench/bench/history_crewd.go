package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// crewdProcess is a crewd started on a data directory, with an admin
// connection once it is ready.
type crewdProcess struct {
	cmd    *exec.Cmd
	admin  *client.Client
	token  string // the admin's
	socket string
	ready  time.Duration // from exec to the first answered ping
	exited chan struct{} // closed when the process has been waited for
	err    error         // the wait's error, once exited is closed
}

// startCrewd executes bin on dataDir with the history's engine flags and
// waits until it is ready: it has printed its socket line (crewd prints it
// once the socket accepts connections), an admin hello succeeded and a ping
// was answered. Its stderr (the logs) is appended to logFile.
func startCrewd(ctx context.Context, bin, dataDir, sockDir, logFile string) (*crewdProcess, error) {
	logs, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	socket := filepath.Join(sockDir, "crewd.sock")
	// NB: the dashboard's HTTP server runs as by default, on a port of its
	// own choosing, so that no other crewd on the machine is in its way.
	args := append([]string{"--data", dataDir, "--socket", socket, "--http", "127.0.0.1:0", "--log-level", "info"},
		historyDaemonFlags...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logs
	// NB: an io.Pipe, not StdoutPipe: Wait may then run while the reader
	// still reads.
	out, w := io.Pipe()
	cmd.Stdout = w
	p := &crewdProcess{cmd: cmd, socket: socket, exited: make(chan struct{})}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("bench: start crewd: %w", err), logs.Close())
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		var once sync.Once
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "crewd: socket ") {
				once.Do(func() { close(listening) })
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		p.err = cmd.Wait()
		_ = w.Close()
		_ = logs.Close()
		close(p.exited)
	}()
	select {
	case <-listening:
	case <-p.exited:
		return nil, fmt.Errorf("bench: crewd exited before it was ready (%v); see %s", p.err, logFile)
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), p.stop())
	}
	p.token, err = daemon.AdminToken(dataDir)
	if err == nil {
		p.admin, err = client.Dial(ctx, socket, client.Hello{Role: "admin", Token: p.token}, nil)
	}
	if err == nil {
		err = p.admin.Call(ctx, "ping", map[string]any{}, nil)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: crewd not ready: %w", err), p.stop())
	}
	p.ready = time.Since(start)
	return p, nil
}

// stop ends crewd with SIGTERM (it finishes its group and any snapshot in
// progress) and waits for it.
func (p *crewdProcess) stop() error {
	if p.admin != nil {
		_ = p.admin.Close()
	}
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
	}
	if p.err != nil {
		return fmt.Errorf("bench: crewd: %w", p.err)
	}
	return nil
}

// memory is a process's resident set now and at its peak, from
// /proc/PID/status.
type memory struct{ rss, hwm int64 } // bytes

func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("bench: memory of crewd: %w", err)
	}
	var m memory
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("bench: %s in /proc/%d/status: %w", k, pid, err)
		}
		if k == "VmRSS" {
			m.rss = kb << 10
		} else {
			m.hwm = kb << 10
		}
	}
	return m, nil
}

// watchMemory samples p's memory every few milliseconds until stop is
// called or the process ends, and returns the last reading: VmHWM is a
// high-water mark, so the last one covers everything before it.
func (p *crewdProcess) watchMemory() (stop func() memory) {
	done := make(chan struct{})
	last := make(chan memory, 1)
	go func() {
		var m memory
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			// NB: an exited process not yet waited for has no Vm lines:
			// a reading without a peak is not a reading.
			if r, err := readMemory(p.cmd.Process.Pid); err == nil && r.hwm > 0 {
				m = r
			}
			select {
			case <-done:
				last <- m
				return
			case <-p.exited:
				last <- m
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	var m memory
	return func() memory {
		once.Do(func() { close(done); m = <-last })
		return m
	}
}

// clockTicks is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTicks = time.Second / 100

// crewdCPU is the CPU time (user and system) process pid (crewd) has used, from /proc/PID/stat; 0 when it cannot be
// read.
func crewdCPU(pid int) time.Duration {
	d, _ := procCPU(pid)
	return d
}

// procCPU is the CPU time (user and system, every thread) process pid has used, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may hold spaces: state is field 3, utime 14
	// and stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bench: unexpected /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("bench: unexpected /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * clockTicks, nil
}
