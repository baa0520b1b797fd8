package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// piCrewStore is pi-crew's file approach as D§8 describes it, per run
// directory:
//
//   - run lock: run.lock created with O_CREAT|O_EXCL (0600) holding {kind,
//     pid, createdAt, token}; a live holder means busy, retried after 50,
//     100, 200, 400 and 800 ms (withRunLockBusyRetry); release is
//     token-guarded (read, compare, unlink);
//   - inside the lock, a fresh read of manifest.json and tasks.json, the
//     policy, and — when admitted — the whole task array rewritten through a
//     temp file + fsync + rename + fsync of the directory (atomicWriteFile,
//     durability "full"), the shadow task appended to it;
//   - after the lock (events are appended outside it), events.jsonl under the
//     event-log family lock (a mkdir lock with a pid file) with the sequence
//     reserved under the seq lock (a mkdir lock and the .seq sidecar), one
//     write of the decision's JSON lines and an fsync.
//
// NB: two simplifications favour pi-crew: the decision's events go in one
// append + fsync (pi-crew appends delegate.requested before the lock and
// the rest after), and a busy retry budget that runs out retries the request
// instead of recording delegate.rejected {run-lock-busy}.
type piCrewStore struct {
	dir   string
	pid   int
	busy  atomic.Int64
	token atomic.Int64
}

// busyDelays is pi-crew's withRunLockBusyRetry schedule for broker handlers.
var busyDelays = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	400 * time.Millisecond, 800 * time.Millisecond}

// mkdirLockRetry is the retry step of the event-log and seq mkdir locks.
const mkdirLockRetry = 5 * time.Millisecond

type piManifest struct {
	RunID       string `json:"runId"`
	BudgetTotal int64  `json:"budgetTotal"`
	MaxSlots    int    `json:"maxSlots"`
}

type piAllocation struct {
	TokensGranted int64 `json:"tokensGranted"`
	TokensSpent   int64 `json:"tokensSpent"`
}

type piTask struct {
	ID             string        `json:"id"`
	Role           string        `json:"role"`
	Agent          string        `json:"agent"`
	Title          string        `json:"title"`
	Status         string        `json:"status"`
	Cwd            string        `json:"cwd"`
	Depth          int           `json:"depth,omitempty"`
	ParentTaskID   string        `json:"parentTaskId,omitempty"`
	Shadow         bool          `json:"shadow,omitempty"`
	ReservedTokens int64         `json:"reservedTokens,omitempty"`
	Allocation     *piAllocation `json:"allocation,omitempty"`
	CreatedAt      string        `json:"createdAt"`
	UpdatedAt      string        `json:"updatedAt"`
}

type piEvent struct {
	Type     string          `json:"type"`
	RunID    string          `json:"runId"`
	Time     string          `json:"time"`
	Metadata map[string]any  `json:"metadata"`
	Data     json.RawMessage `json:"data"`
}

func openPiCrewStore(dir string) (*piCrewStore, error) {
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o700); err != nil {
		return nil, fmt.Errorf("bench: pi-crew: %w", err)
	}
	return &piCrewStore{dir: dir, pid: os.Getpid()}, nil
}

func (s *piCrewStore) runDir(run string) string { return filepath.Join(s.dir, "runs", run) }

func (s *piCrewStore) Setup(ctx context.Context, runs []string, spec Spec) error {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for _, r := range runs {
		d := s.runDir(r)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("bench: pi-crew: %w", err)
		}
		m, _ := json.MarshalIndent(piManifest{RunID: r, BudgetTotal: spec.Budget, MaxSlots: spec.Slots}, "", "  ")
		if err := atomicWrite(d, "manifest.json", m); err != nil {
			return err
		}
		tasks := []piTask{{ID: parentTask, Role: "executor", Agent: "a", Title: "work", Status: "running", Cwd: "/w",
			Allocation: &piAllocation{TokensGranted: spec.Budget}, CreatedAt: now, UpdatedAt: now}}
		b, _ := json.MarshalIndent(tasks, "", "  ")
		if err := atomicWrite(d, "tasks.json", b); err != nil {
			return err
		}
		if err := s.appendEvents(ctx, r, []event{runCreated(spec.Budget)}); err != nil {
			return err
		}
	}
	return nil
}

// atomicWrite is pi-crew's atomicWriteFile with durability "full".
func atomicWrite(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.%d.tmp", name, os.Getpid(), time.Now().UnixNano()))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("bench: pi-crew write: %w", err)
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("bench: pi-crew write: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("bench: pi-crew rename: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("bench: pi-crew: %w", err)
	}
	return errors.Join(d.Sync(), d.Close())
}

// runLock acquires run.lock, retrying a busy lock on pi-crew's schedule and
// starting over when it runs out. It returns the release function.
func (s *piCrewStore) runLock(ctx context.Context, run string) (func() error, error) {
	path := filepath.Join(s.runDir(run), "run.lock")
	for {
		for i := 0; ; i++ {
			tok := strconv.FormatInt(s.token.Add(1), 10)
			payload, _ := json.Marshal(map[string]any{"kind": "run", "pid": s.pid, "createdAt": time.Now().UnixMilli(), "token": tok})
			f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err == nil {
				_, werr := f.Write(payload)
				if err := errors.Join(werr, f.Close()); err != nil {
					return nil, fmt.Errorf("bench: pi-crew lock: %w", err)
				}
				return func() error { return releaseLock(path, tok) }, nil
			}
			if !errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("bench: pi-crew lock: %w", err)
			}
			if i == len(busyDelays) {
				break // "run.lock busy (bounded retry budget exhausted)"; the worker asks again
			}
			s.busy.Add(1)
			if err := sleep(ctx, busyDelays[i]); err != nil {
				return nil, err
			}
		}
	}
}

// releaseLock removes the lock only if it is still ours (token-guarded).
func releaseLock(path, tok string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("bench: pi-crew unlock: %w", err)
	}
	var l struct{ Token string }
	if json.Unmarshal(b, &l) != nil || l.Token != tok {
		return fmt.Errorf("bench: pi-crew unlock: the lock is not ours")
	}
	return os.Remove(path)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mkdirLock is the event-log family's directory lock (and the seq lock's).
func mkdirLock(ctx context.Context, path string, pid bool) (func() error, error) {
	for {
		err := os.Mkdir(path, 0o700)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("bench: pi-crew mkdir lock: %w", err)
		}
		if err := sleep(ctx, mkdirLockRetry); err != nil {
			return nil, err
		}
	}
	if pid {
		if err := os.WriteFile(filepath.Join(path, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return nil, fmt.Errorf("bench: pi-crew lock pid: %w", err)
		}
	}
	return func() error {
		if pid {
			_ = os.Remove(filepath.Join(path, "pid"))
		}
		return os.Remove(path)
	}, nil
}

// appendEvents appends evs to the run's events.jsonl with one write and an
// fsync, under the event-log lock, their seqs reserved under the seq lock.
func (s *piCrewStore) appendEvents(ctx context.Context, run string, evs []event) (err error) {
	d := s.runDir(run)
	path := filepath.Join(d, "events.jsonl")
	unlock, err := mkdirLock(ctx, path+".mkdirlock", true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, unlock()) }()
	unseq, err := mkdirLock(ctx, path+".seqlock", false)
	if err != nil {
		return err
	}
	seq := int64(0)
	if b, err := os.ReadFile(path + ".seq"); err == nil {
		seq, _ = strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	}
	first := seq + 1
	seq += int64(len(evs))
	// The sidecar is written best-effort (no fsync), as pi-crew does.
	werr := os.WriteFile(path+".seq", []byte(strconv.FormatInt(seq, 10)), 0o600)
	if err := errors.Join(werr, unseq()); err != nil {
		return fmt.Errorf("bench: pi-crew seq: %w", err)
	}
	var buf bytes.Buffer
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for i, e := range evs {
		data, err := json.Marshal(e.Payload)
		if err != nil {
			return err
		}
		line, err := json.Marshal(piEvent{Type: e.Type, RunID: run, Time: now, Metadata: map[string]any{"seq": first + int64(i)}, Data: data})
		if err != nil {
			return err
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("bench: pi-crew events: %w", err)
	}
	_, werr = f.Write(buf.Bytes())
	serr := unix.Fdatasync(int(f.Fd()))
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		return fmt.Errorf("bench: pi-crew events: %w", err)
	}
	return nil
}

func (s *piCrewStore) readRun(run string) (piManifest, []piTask, error) {
	var m piManifest
	var tasks []piTask
	b, err := os.ReadFile(filepath.Join(s.runDir(run), "manifest.json"))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err == nil {
		b, err = os.ReadFile(filepath.Join(s.runDir(run), "tasks.json"))
	}
	if err == nil {
		err = json.Unmarshal(b, &tasks)
	}
	if err != nil {
		return m, nil, fmt.Errorf("bench: pi-crew read %s: %w", run, err)
	}
	return m, tasks, nil
}

// stateOf derives the policy's view from the run's files.
func stateOf(m piManifest, tasks []piTask) (*runState, int) {
	st := &runState{Slots: m.MaxSlots}
	parent := -1
	for i, t := range tasks {
		switch {
		case t.ID == parentTask:
			parent = i
			if t.Allocation != nil {
				st.Granted, st.Spent = t.Allocation.TokensGranted, t.Allocation.TokensSpent
			}
		case t.Shadow && (t.Status == "queued" || t.Status == "running"):
			st.InFlight = append(st.InFlight, t.ID)
		}
	}
	return st, parent
}

func (s *piCrewStore) Admit(ctx context.Context, run string, tokens int64) (Admission, error) {
	unlock, err := s.runLock(ctx, run)
	if err != nil {
		return Admission{}, err
	}
	m, tasks, err := s.readRun(run)
	if err != nil {
		return Admission{}, errors.Join(err, unlock())
	}
	st, parent := stateOf(m, tasks)
	if parent < 0 {
		return Admission{}, errors.Join(fmt.Errorf("bench: pi-crew: no parent task in %s", run), unlock())
	}
	sub := newSubID()
	a := Admission{Reason: st.decide(tokens)}
	evs := decisionEvents(st, sub, a.Reason, tokens, time.Now().UnixMilli())
	if a.Reason == "" {
		a.SubID = sub
		now := time.Now().UTC().Format(time.RFC3339Nano)
		tasks[parent].Allocation.TokensSpent += tokens
		tasks = append(tasks, piTask{ID: sub, Role: "explorer", Agent: "delegate", Title: "delegate: " + delegateDesc,
			Status: "queued", Cwd: "/w", Depth: 2, ParentTaskID: parentTask, Shadow: true, ReservedTokens: tokens,
			CreatedAt: now, UpdatedAt: now})
		b, _ := json.MarshalIndent(tasks, "", "  ")
		if err := atomicWrite(s.runDir(run), "tasks.json", b); err != nil {
			return Admission{}, errors.Join(err, unlock())
		}
	}
	if err := unlock(); err != nil {
		return Admission{}, err
	}
	return a, s.appendEvents(ctx, run, evs)
}

func (s *piCrewStore) Settle(ctx context.Context, run, subID, outcome string) error {
	evs, err := settleEvents(subID, outcome)
	if err != nil {
		return err
	}
	unlock, err := s.runLock(ctx, run)
	if err != nil {
		return err
	}
	m, tasks, err := s.readRun(run)
	if err != nil {
		return errors.Join(err, unlock())
	}
	st, _ := stateOf(m, tasks)
	if err := st.settle(subID); err != nil {
		return errors.Join(err, unlock())
	}
	status := map[string]string{"ok": "completed", "failed": "failed", "timed_out": "timed_out", "cancelled": "cancelled"}[outcome]
	for i := range tasks {
		if tasks[i].ID == subID {
			tasks[i].Status, tasks[i].UpdatedAt = status, time.Now().UTC().Format(time.RFC3339Nano)
		}
	}
	b, _ := json.MarshalIndent(tasks, "", "  ")
	if err := atomicWrite(s.runDir(run), "tasks.json", b); err != nil {
		return errors.Join(err, unlock())
	}
	if err := unlock(); err != nil {
		return err
	}
	return s.appendEvents(ctx, run, evs)
}

// Retries counts waits for a busy run lock.
func (s *piCrewStore) Retries() int64 { return s.busy.Load() }

func (s *piCrewStore) Final(context.Context) (map[string]Final, error) {
	dirs, err := os.ReadDir(filepath.Join(s.dir, "runs"))
	if err != nil {
		return nil, fmt.Errorf("bench: pi-crew: %w", err)
	}
	f := finals{}
	for _, d := range dirs {
		file, err := os.Open(filepath.Join(s.dir, "runs", d.Name(), "events.jsonl"))
		if err != nil {
			return nil, fmt.Errorf("bench: pi-crew: %w", err)
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var e piEvent
			var p struct {
				Tokens int64  `json:"tokens"`
				Reason string `json:"reason"`
			}
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				return nil, errors.Join(fmt.Errorf("bench: pi-crew events: %w", err), file.Close())
			}
			if err := json.Unmarshal(e.Data, &p); err != nil {
				return nil, errors.Join(fmt.Errorf("bench: pi-crew events: %w", err), file.Close())
			}
			f.add(e.RunID, e.Type, p.Tokens, p.Reason)
		}
		if err := errors.Join(sc.Err(), file.Close()); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (s *piCrewStore) Close() error { return nil }
