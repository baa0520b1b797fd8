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
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
)

// SyncCounter runs one pre-check phase of an implementation and counts the
// sync calls the phase made.
type SyncCounter interface {
	Run(ctx context.Context, im Impl, phase, dir string) (PhaseResult, error)
}

// straceCounter counts from outside the store: the phase runs in a child
// process (this executable, told what to run by precheckEnv) under strace,
// which records every fsync and fdatasync of every thread — the store's,
// Pebble's, SQLite's, the NATS server's alike, no wrapper each store would
// have to route its files through. The child marks the phase's start and end
// with a faccessat of a path no store uses, and only the calls between the
// marks count, and of them only those that succeeded on a file or directory
// of the store (strace -y names each descriptor's path): a sync of another
// file, or of a descriptor that is no file, makes none of the store's writes
// durable. Without strace on the PATH it runs the phase in this process and
// reports the syncs as not counted.
type straceCounter struct{}

// precheckEnv carries a pre-check phase to the child process.
const precheckEnv = "CREWBENCH_PRECHECK"

// Markers of the phase's window in the trace.
const (
	markBegin = "/crewbench-phase-begin"
	markEnd   = "/crewbench-phase-end"
)

type precheckJob struct {
	Impl, Phase, Dir string
}

func (straceCounter) Run(ctx context.Context, im Impl, phase, dir string) (PhaseResult, error) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		return runPhase(ctx, im, phase, dir, func(bool) {})
	}
	self, err := os.Executable()
	if err != nil {
		return PhaseResult{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return PhaseResult{}, err
	}
	store := filepath.Join(dir, "store")
	job, _ := json.Marshal(precheckJob{Impl: im.Name, Phase: phase, Dir: store})
	trace := filepath.Join(dir, "syscalls.trace")
	cmd := exec.CommandContext(ctx, strace, "-f", "-qq", "-y", "--seccomp-bpf", "-e", "signal=none",
		"-e", "trace=fsync,fdatasync,faccessat,faccessat2", "-o", trace, self)
	cmd.Env = append(os.Environ(), precheckEnv+"="+string(job))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return PhaseResult{}, fmt.Errorf("bench: pre-check child: %w: %s", err, lastLines(stderr.String(), 5))
	}
	var res PhaseResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return PhaseResult{}, fmt.Errorf("bench: pre-check child: %w: %s", err,
			lastLines(out.String()+stderr.String(), 5))
	}
	// NB: strace names a descriptor by its resolved path.
	if store, err = filepath.EvalSymlinks(store); err != nil {
		return PhaseResult{}, err
	}
	f, err := os.Open(trace)
	if err != nil {
		return PhaseResult{}, err
	}
	defer f.Close()
	res.Syncs, err = countSyncs(f, store)
	return res, err
}

// syncDone matches an fsync or fdatasync that returned, under strace -y
// ("123 fdatasync(7</d/events.log>) = 0", "123 fsync(-1) = -1 EBADF (…)"):
// its thread, its descriptor's path and its result; syncStarted one that has
// not yet ("123 fsync(7</d/events.log> <unfinished ...>"), and syncResumed
// its return ("123 <... fsync resumed>) = 0").
var (
	syncDone    = regexp.MustCompile(`^(\d+\s+)?(?:fsync|fdatasync)\(-?\d+(?:<(.*)>)?\)\s+=\s+(-?\d+)`)
	syncStarted = regexp.MustCompile(`^(\d+\s+)?(?:fsync|fdatasync)\(-?\d+(?:<(.*)>)? <unfinished \.\.\.>$`)
	syncResumed = regexp.MustCompile(`^(\d+\s+)?<\.\.\. (?:fsync|fdatasync) resumed>\)\s+=\s+(-?\d+)`)
)

// countSyncs counts the sync calls made between the phase's markers that
// returned 0 on a path in dir (dir itself included).
func countSyncs(r io.Reader, dir string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	in, seen := false, false
	ofStore := func(path string) bool {
		return path == dir ||
			strings.HasPrefix(path, dir+string(filepath.Separator))
	}
	// started holds, per thread, whether its unfinished sync counts if it succeeds.
	started := map[string]bool{}
	var n int64
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, markBegin):
			in, seen = true, true
		case strings.Contains(line, markEnd):
			in = false
		}
		if m := syncDone.FindStringSubmatch(line); m != nil {
			if in && ofStore(m[2]) && m[3] == "0" {
				n++
			}
		} else if m := syncStarted.FindStringSubmatch(line); m != nil {
			started[strings.TrimSpace(m[1])] = in && ofStore(m[2])
		} else if m := syncResumed.FindStringSubmatch(line); m != nil {
			thread := strings.TrimSpace(m[1])
			if started[thread] && m[2] == "0" {
				n++
			}
			delete(started, thread)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !seen {
		return 0, errors.New("bench: the pre-check child marked no phase in its trace")
	}
	return n, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// PrecheckChild runs the pre-check phase named in the environment, if any,
// prints its PhaseResult as JSON on stdout and returns the exit status; ok
// is false when this process is not a pre-check child. crewbench's Main
// calls it first (and so must a test binary's TestMain).
func PrecheckChild(stdout, stderr io.Writer) (status int, ok bool) {
	v := os.Getenv(precheckEnv)
	if v == "" {
		return 0, false
	}
	var job precheckJob
	if err := json.Unmarshal([]byte(v), &job); err != nil {
		fmt.Fprintln(stderr, "crewbench: pre-check:", err)
		return 1, true
	}
	im, found := implByName(job.Impl)
	if !found {
		fmt.Fprintln(stderr, "crewbench: pre-check: no implementation", job.Impl)
		return 1, true
	}
	mark := func(begin bool) {
		p := markEnd
		if begin {
			p = markBegin
		}
		_ = unix.Faccessat(unix.AT_FDCWD, p, unix.F_OK, 0)
	}
	res, err := runPhase(context.Background(), im, job.Phase, job.Dir, mark)
	if err != nil {
		fmt.Fprintln(stderr, "crewbench: pre-check:", err)
		return 1, true
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintln(stderr, "crewbench: pre-check:", err)
		return 1, true
	}
	return 0, true
}
