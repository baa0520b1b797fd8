package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/events"
)

// piCrewStore is what pi-crew's broker does for a delegation (D§4.2, D§6.3,
// D§8; its delegate.request handler and finalizeDelegateResult), per run
// directory, in one process as pi-crew's broker is.
//
// The broker is one Node.js process, and the run-locked sections are
// synchronous code (withRunLockSync, atomicWriteFile's fsyncs): each runs to
// its end on the event loop before any other request's code runs, so two
// broker requests never find run.lock held by each other, and no two of
// those sections — nor their fsyncs — overlap, on one run or many. The
// store holds one mutex, the loop, over each of them (the lock file is still
// created and removed on disk: its cost is real); a busy lock, which only
// another process could hold, would be waited out on withRunLockBusyRetry's
// schedule off the loop. The event appends are asynchronous (fs.promises)
// and run off the loop.
//
//   - admission: delegate.requested appended (fire-and-forget), then under
//     run.lock (O_CREAT|O_EXCL, {kind, pid, createdAt, token}) a
//     fresh read of manifest.json and tasks.json, the policy, and two
//     whole-array rewrites of tasks.json — the parent's allocation with the
//     reservation, then the same array with the shadow task appended — each
//     a temp file + fsync + rename + fsync of the directory (atomicWriteFile,
//     durability "full"); token-guarded unlock; then delegate.admitted
//     (and the reservation) appended, fire-and-forget. The worker's answer
//     does not wait for the appends.
//   - settlement (finalizeDelegateResult: delivery, charge and terminal flip
//     inside one run lock, D§6.3): under run.lock, a fresh read, the result
//     message appended to the parent task's inbox.jsonl under its .flock (no
//     fsync), then delivery.json read, updated and rewritten under its
//     .flock with durability "full", then tasks.json rewritten with the
//     shadow's terminal status; unlock; the terminal delegate event
//     appended, fire-and-forget.
//   - events.jsonl appends: one event at a time, in the process's queue per
//     file (one goroutine per run here), each under the async family lock
//     (the .alock directory with a pid file) with its seq reserved under the
//     .seqlock directory and the .seq sidecar (no fsync), then one write,
//     no fsync: delegate events are not terminal types (D§3.1, D§3.7).
//   - reads go through pi-crew's in-process caches, valid while the file's
//     modification time and size are unchanged (loadRunManifestById's cache,
//     which saveRunTasks refreshes, and the delivery cache of FIND-01), so a
//     file this process wrote itself is not parsed again.
//
// NB: pi-crew never removes a shadow task from tasks.json nor, below 10,000
// entries, a message from delivery.json, so their rewrites grow with the
// run. The harness holds both at piCrewHistory settled delegations — a run
// that has settled that many before — so the cost per operation does not
// depend on how long a cell runs; a longer run costs pi-crew more. Left
// out, also in pi-crew's favour: delegate.rolled_up (0.10.1 only), the
// run-lock-busy rejection when the retry budget runs out (the request is
// asked again instead), event-log compaction and rotation, the JSON
// redaction pass over every event and message, and the single thread: JSON
// and the appends' bookkeeping, which pi-crew runs on its one event loop,
// run here in parallel outside the locked sections.
type piCrewStore struct {
	dir       string
	pid       int
	busy      atomic.Int64
	token     atomic.Int64
	durable   atomic.Int64 // atomicWrite calls with durability "full"
	loop      sync.Mutex   // the broker process's event loop (see above)
	mu        sync.Mutex
	appenders map[string]*piAppender
	cache     sync.Map // path → piCached: the stat-gated read caches
}

// piCrewHistory is how many settled delegations tasks.json and
// delivery.json hold (see piCrewStore).
const piCrewHistory = 50

// busyDelays is pi-crew's withRunLockBusyRetry schedule for broker handlers.
var busyDelays = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	400 * time.Millisecond, 800 * time.Millisecond}

// mkdirLockRetry is the retry step of the event-log, seq and file locks.
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

// piTask is a TeamTaskState with the fields the workload touches; a shadow
// task has no stepId.
type piTask struct {
	ID          string        `json:"id"`
	RunID       string        `json:"runId"`
	StepID      string        `json:"stepId,omitempty"`
	Role        string        `json:"role"`
	Agent       string        `json:"agent"`
	Title       string        `json:"title"`
	Status      string        `json:"status"`
	DependsOn   []string      `json:"dependsOn"`
	Cwd         string        `json:"cwd"`
	Depth       int           `json:"depth,omitempty"`
	Model       string        `json:"model,omitempty"`
	Allocation  *piAllocation `json:"allocation,omitempty"`
	StartedAt   string        `json:"startedAt,omitempty"`
	CompletedAt string        `json:"completedAt,omitempty"`
}

func (t piTask) shadow() bool { return t.StepID == "" }

type piEvent struct {
	Time     string          `json:"time"`
	Type     string          `json:"type"`
	RunID    string          `json:"runId"`
	TaskID   string          `json:"taskId"`
	Message  string          `json:"message"`
	Data     json.RawMessage `json:"data"`
	Metadata piEventMeta     `json:"metadata"`
}

type piEventMeta struct {
	Seq        int64  `json:"seq"`
	Provenance string `json:"provenance"`
}

// piMessage is a MailboxMessage as appendMailboxMessage writes it.
type piMessage struct {
	ID           string              `json:"id"`
	RunID        string              `json:"runId"`
	Direction    string              `json:"direction"`
	From         string              `json:"from"`
	To           string              `json:"to"`
	Body         string              `json:"body"`
	CreatedAt    string              `json:"createdAt"`
	Status       string              `json:"status"`
	Kind         string              `json:"kind"`
	Priority     string              `json:"priority,omitempty"`
	DeliveryMode string              `json:"deliveryMode,omitempty"`
	TaskID       string              `json:"taskId"`
	Data         *events.MessageData `json:"data"`
}

type piDelivery struct {
	Messages  map[string]string `json:"messages"`
	UpdatedAt string            `json:"updatedAt"`
	order     []string          // oldest first, for the history bound
}

func openPiCrewStore(dir string) (*piCrewStore, error) {
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o700); err != nil {
		return nil, fmt.Errorf("bench: pi-crew: %w", err)
	}
	return &piCrewStore{dir: dir, pid: os.Getpid(), appenders: map[string]*piAppender{}}, nil
}

func (s *piCrewStore) runDir(run string) string { return filepath.Join(s.dir, "runs", run) }

func nowISO() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

func (s *piCrewStore) Setup(_ context.Context, runs []string, spec Spec) error {
	now := nowISO()
	for _, r := range runs {
		d := s.runDir(r)
		if err := os.MkdirAll(filepath.Join(d, "mailbox", "tasks", parentTask), 0o700); err != nil {
			return fmt.Errorf("bench: pi-crew: %w", err)
		}
		m, _ := json.MarshalIndent(piManifest{RunID: r, BudgetTotal: spec.Budget, MaxSlots: spec.Slots}, "", "  ")
		if err := s.atomicWrite(d, "manifest.json", m); err != nil {
			return err
		}
		tasks := []piTask{{ID: parentTask, RunID: r, StepID: "work", Role: "executor", Agent: "a", Title: "work",
			Status: "running", DependsOn: []string{}, Cwd: "/w", Depth: 1, Model: "anthropic/m1",
			Allocation: &piAllocation{TokensGranted: spec.Budget}, StartedAt: now}}
		del := &piDelivery{Messages: map[string]string{}, UpdatedAt: now}
		for i := 0; i < piCrewHistory; i++ {
			sub := newSubID()
			tasks = append(tasks, piTask{ID: sub, RunID: r, Role: "explorer", Agent: "delegate",
				Title: "delegate: " + delegateDesc, Status: "completed", DependsOn: []string{}, Cwd: "/w", Depth: 2,
				StartedAt: now, CompletedAt: now})
			id := "msg_" + sub[3:16]
			del.Messages[id], del.order = "queued", append(del.order, id)
		}
		if err := s.saveTasks(r, tasks); err != nil {
			return err
		}
		if err := s.saveDelivery(r, del); err != nil {
			return err
		}
		s.record(r, runCreated(spec.Budget))
	}
	return s.flush()
}

// piCached is a parsed file and the modification time and size it had.
type piCached struct {
	mod  time.Time
	size int64
	val  any
}

// readCached returns path's parsed content, parsing (with parse) only when
// the file changed since it was cached.
func (s *piCrewStore) readCached(path string, parse func([]byte) (any, error)) (any, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("bench: pi-crew: %w", err)
	}
	if c, ok := s.cache.Load(path); ok {
		if c := c.(piCached); c.mod.Equal(fi.ModTime()) && c.size == fi.Size() {
			return c.val, nil
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: pi-crew: %w", err)
	}
	v, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("bench: pi-crew %s: %w", filepath.Base(path), err)
	}
	s.cache.Store(path, piCached{mod: fi.ModTime(), size: fi.Size(), val: v})
	return v, nil
}

// remember refreshes path's cache entry after this process wrote val to it.
func (s *piCrewStore) remember(path string, val any) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("bench: pi-crew: %w", err)
	}
	s.cache.Store(path, piCached{mod: fi.ModTime(), size: fi.Size(), val: val})
	return nil
}

// loadRun is loadRunManifestById: the manifest and the task array.
func (s *piCrewStore) loadRun(run string) (piManifest, []piTask, error) {
	d := s.runDir(run)
	m, err := s.readCached(filepath.Join(d, "manifest.json"), func(b []byte) (any, error) {
		var m piManifest
		return m, json.Unmarshal(b, &m)
	})
	if err != nil {
		return piManifest{}, nil, err
	}
	t, err := s.readCached(filepath.Join(d, "tasks.json"), func(b []byte) (any, error) {
		var t []piTask
		return t, json.Unmarshal(b, &t)
	})
	if err != nil {
		return piManifest{}, nil, err
	}
	// NB: the cache's array is shared: callers copy before changing it.
	return m.(piManifest), t.([]piTask), nil
}

// saveTasks is saveRunTasks: the whole array, compact JSON, atomically.
func (s *piCrewStore) saveTasks(run string, tasks []piTask) error {
	b, err := json.Marshal(tasks)
	if err != nil {
		return err
	}
	d := s.runDir(run)
	if err := s.atomicWrite(d, "tasks.json", b); err != nil {
		return err
	}
	return s.remember(filepath.Join(d, "tasks.json"), tasks)
}

// atomicWrite is pi-crew's atomicWriteFile with durability "full".
func (s *piCrewStore) atomicWrite(dir, name string, data []byte) error {
	s.durable.Add(1)
	return atomicWrite(dir, name, data)
}

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
		return fmt.Errorf("bench: sync directory: %w", err)
	}
	return errors.Join(d.Sync(), d.Close())
}

// waitBusy waits out a busy run lock on pi-crew's schedule (50, 100, 200,
// 400, 800 ms, then again from the start: the worker asks again).
func (s *piCrewStore) waitBusy(ctx context.Context, attempt int) error {
	s.busy.Add(1)
	return sleep(ctx, busyDelays[attempt%len(busyDelays)])
}

// fileLock is withFileLockSync's .flock sidecar, retried until free.
func (s *piCrewStore) fileLock(ctx context.Context, file string) (func() error, error) {
	for {
		release, err := s.tryLockFile(file+".flock", "file")
		if !errors.Is(err, os.ErrExist) {
			return release, err
		}
		if err := sleep(ctx, mkdirLockRetry); err != nil {
			return nil, err
		}
	}
}

// tryLockFile creates an O_EXCL lock file holding {kind, pid, createdAt,
// token}; os.ErrExist means it is held.
func (s *piCrewStore) tryLockFile(path, kind string) (func() error, error) {
	tok := strconv.FormatInt(s.token.Add(1), 10)
	payload, _ := json.Marshal(map[string]any{"kind": kind, "pid": s.pid, "createdAt": time.Now().UnixMilli(),
		"token": tok})
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, err
		}
		return nil, fmt.Errorf("bench: pi-crew lock: %w", err)
	}
	_, werr := f.Write(payload)
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, fmt.Errorf("bench: pi-crew lock: %w", err)
	}
	return func() error { return releaseLock(path, tok) }, nil
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

// stateOf derives the policy's view from the run's files: the parent's
// allocation and the shadow tasks still queued or running.
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
		case t.shadow() && (t.Status == "queued" || t.Status == "running"):
			st.InFlight = append(st.InFlight, t.ID)
		}
	}
	return st, parent
}

func (s *piCrewStore) Admit(ctx context.Context, run string, tokens int64) (Admission, error) {
	// The handler checks the run exists before the lock (a cached read).
	if err := s.onLoop(func() error { _, _, err := s.loadRun(run); return err }); err != nil {
		return Admission{}, err
	}
	sub := newSubID()
	s.record(run, event{events.TypeDelegateRequested,
		&events.DelegateRequested{TaskID: parentTask, SubID: sub, Role: "explorer"}})
	var a Admission
	var evs []event
	err := s.withRunLock(ctx, run, func() error {
		m, fresh, err := s.loadRun(run)
		if err != nil {
			return err
		}
		st, parent := stateOf(m, fresh)
		if parent < 0 {
			return fmt.Errorf("bench: pi-crew: no parent task in %s", run)
		}
		a = Admission{Reason: st.decide(tokens)}
		evs = decisionEvents(st, sub, a.Reason, tokens, time.Now().UnixMilli())
		if a.Reason != "" {
			return nil
		}
		a.SubID = sub
		reserved := make([]piTask, len(fresh), len(fresh)+1)
		copy(reserved, fresh)
		alloc := *reserved[parent].Allocation
		alloc.TokensSpent += tokens
		reserved[parent].Allocation = &alloc
		if err := s.saveTasks(run, reserved); err != nil {
			return err
		}
		return s.saveTasks(run, append(reserved, piTask{ID: sub, RunID: run, Role: "explorer", Agent: "delegate",
			Title: "delegate: " + delegateDesc, Status: "queued", DependsOn: []string{}, Cwd: "/w", Depth: 2,
			StartedAt: nowISO()}))
	})
	if err != nil {
		return Admission{}, err
	}
	for _, e := range evs[1:] {
		s.record(run, e)
	}
	return a, nil
}

func (s *piCrewStore) Settle(ctx context.Context, run, subID, outcome string) error {
	evs, err := settleEvents(subID, outcome)
	if err != nil {
		return err
	}
	err = s.withRunLock(ctx, run, func() error {
		return s.finalize(ctx, run, subID, outcome, evs[0].Payload.(*events.MailboxAppended))
	})
	if err != nil {
		return err
	}
	s.record(run, evs[1])
	return nil
}

// onLoop runs fn as pi-crew's synchronous code runs: alone on the broker
// process's event loop.
func (s *piCrewStore) onLoop(fn func() error) error {
	s.loop.Lock()
	defer s.loop.Unlock()
	return fn()
}

// withRunLock is withRunLockBusyRetry around withRunLockSync: the lock
// taken, fn, the lock released, all on the event loop. (A busy lock would
// be waited for off the loop; only another process can hold it then.)
func (s *piCrewStore) withRunLock(ctx context.Context, run string, fn func() error) error {
	for attempt := 0; ; attempt++ {
		s.loop.Lock()
		release, err := s.tryLockFile(filepath.Join(s.runDir(run), "run.lock"), "run")
		if err == nil {
			err = errors.Join(fn(), release())
			s.loop.Unlock()
			return err
		}
		s.loop.Unlock()
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := s.waitBusy(ctx, attempt); err != nil {
			return err
		}
	}
}

// finalize is finalizeDelegateResult under the run lock: durable delivery,
// then the shadow's terminal flip.
func (s *piCrewStore) finalize(ctx context.Context, run, subID, outcome string, msg *events.MailboxAppended) error {
	m, fresh, err := s.loadRun(run)
	if err != nil {
		return err
	}
	st, _ := stateOf(m, fresh)
	if err := st.settle(subID); err != nil {
		return err
	}
	if err := s.deliver(ctx, run, msg); err != nil {
		return err
	}
	status := "failed"
	if outcome == "ok" {
		status = "completed"
	}
	now := nowISO()
	tasks := make([]piTask, 0, len(fresh))
	settled := 0
	for _, t := range fresh {
		if t.shadow() && (t.Status == "completed" || t.Status == "failed") {
			settled++
		}
	}
	for _, t := range fresh {
		if t.ID == subID {
			t.Status, t.CompletedAt = status, now
		}
		// The history bound (see piCrewStore): the oldest settled shadow
		// makes room for this one.
		if settled >= piCrewHistory && t.shadow() && (t.Status == "completed" || t.Status == "failed") &&
			t.ID != subID {
			settled--
			continue
		}
		tasks = append(tasks, t)
	}
	return s.saveTasks(run, tasks)
}

// deliver is appendMailboxMessageAsync to the parent task's inbox: the line
// under the mailbox file's lock, then delivery.json's read-modify-write
// under its own, durability "full".
func (s *piCrewStore) deliver(ctx context.Context, run string, msg *events.MailboxAppended) error {
	d := s.runDir(run)
	inbox := filepath.Join(d, "mailbox", "tasks", parentTask, "inbox.jsonl")
	line, err := json.Marshal(piMessage{ID: msg.ID, RunID: run, Direction: "inbox", From: msg.From, To: msg.To,
		Body: msg.Body, CreatedAt: nowISO(), Status: "queued", Kind: msg.Kind, Priority: msg.Priority,
		DeliveryMode: msg.DeliveryMode, TaskID: parentTask, Data: msg.Data})
	if err != nil {
		return err
	}
	unlock, err := s.fileLock(ctx, inbox)
	if err != nil {
		return err
	}
	if err := errors.Join(appendLine(inbox, append(line, '\n')), unlock()); err != nil {
		return err
	}
	path := filepath.Join(d, "mailbox", "delivery.json")
	unlock, err = s.fileLock(ctx, path)
	if err != nil {
		return err
	}
	v, err := s.readCached(path, func(b []byte) (any, error) {
		var del piDelivery
		return &del, json.Unmarshal(b, &del)
	})
	if err != nil {
		return errors.Join(err, unlock())
	}
	old := v.(*piDelivery)
	if len(old.order) != len(old.Messages) { // parsed, not written by this process: order unknown
		old.order = old.order[:0]
		for k := range old.Messages {
			old.order = append(old.order, k)
		}
	}
	del := &piDelivery{Messages: make(map[string]string, len(old.Messages)+1), UpdatedAt: nowISO(),
		order: append([]string(nil), old.order...)}
	for k, x := range old.Messages {
		del.Messages[k] = x
	}
	del.Messages[msg.ID], del.order = "queued", append(del.order, msg.ID)
	for len(del.order) > piCrewHistory && len(del.order) > 0 {
		delete(del.Messages, del.order[0])
		del.order = del.order[1:]
	}
	return errors.Join(s.saveDelivery(run, del), unlock())
}

func (s *piCrewStore) saveDelivery(run string, del *piDelivery) error {
	b, err := json.MarshalIndent(del, "", "  ")
	if err != nil {
		return err
	}
	d := filepath.Join(s.runDir(run), "mailbox")
	if err := s.atomicWrite(d, "delivery.json", append(b, '\n')); err != nil {
		return err
	}
	return s.remember(filepath.Join(d, "delivery.json"), del)
}

func appendLine(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("bench: pi-crew append: %w", err)
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("bench: pi-crew append: %w", err)
	}
	return nil
}

// Retries counts waits for a busy run lock.
func (s *piCrewStore) Retries() int64 { return s.busy.Load() }

// Commits counts the durable writes (each one fsync of the file and one of
// its directory).
func (s *piCrewStore) Commits() int64 { return s.durable.Load() }

func (s *piCrewStore) Final(context.Context) (map[string]Final, error) {
	if err := s.flush(); err != nil {
		return nil, err
	}
	dirs, err := os.ReadDir(filepath.Join(s.dir, "runs"))
	if err != nil {
		return nil, fmt.Errorf("bench: pi-crew: %w", err)
	}
	f := newFinals()
	for _, d := range dirs {
		if err := s.readBack(f, d.Name()); err != nil {
			return nil, err
		}
	}
	return f.result(), nil
}

// readBack folds one run's events.jsonl into f, with each result message
// from the parent's inbox folded in just before its terminal event (where
// crewlog records mailbox.appended).
func (s *piCrewStore) readBack(f *finals, run string) error {
	d := s.runDir(run)
	inbox := map[string]*events.MailboxAppended{}
	err := eachLine(filepath.Join(d, "mailbox", "tasks", parentTask, "inbox.jsonl"), func(b []byte) error {
		var m events.MailboxAppended
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		if m.Data != nil {
			inbox[m.Data.SubID] = &m
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	err = eachLine(filepath.Join(d, "events.jsonl"), func(b []byte) error {
		var e piEvent
		if err := json.Unmarshal(b, &e); err != nil {
			return err
		}
		p := events.NewPayload(e.Type)
		if p == nil {
			return fmt.Errorf("unknown event type %q", e.Type)
		}
		if err := json.Unmarshal(e.Data, p); err != nil {
			return err
		}
		if t := settledOf(p); t.SubID != "" {
			if m, ok := inbox[t.SubID]; ok {
				f.add(run, events.TypeMailboxAppended, m)
				delete(inbox, t.SubID)
			}
		}
		f.add(e.RunID, e.Type, p)
		return nil
	})
	for _, m := range inbox {
		f.add(run, events.TypeMailboxAppended, m)
	}
	return err
}

func eachLine(path string, fn func([]byte) error) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("bench: pi-crew: %w", err)
	}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return errors.Join(fmt.Errorf("bench: pi-crew %s: %w", filepath.Base(path), err), file.Close())
		}
	}
	return errors.Join(sc.Err(), file.Close())
}

func (s *piCrewStore) Close() error {
	err := s.flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	for run, a := range s.appenders {
		close(a.q)
		delete(s.appenders, run)
	}
	return err
}
