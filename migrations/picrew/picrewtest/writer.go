// Package picrewtest writes a pi-crew crew root the way pi-crew does (D§1,
// D§3.7, D§8.3), for the tests of the pi-crew import and its follower:
// manifest.json and tasks.json rewritten whole with a temp file and a
// rename, events.jsonl and mailbox files appended line by line with
// increasing seqs, delivery.json rewritten after a mailbox append, steering
// lines appended, and the things that go wrong: a compaction (the file
// rewritten with its last events), a rotation (renamed to an archive and
// started again), a truncation, a partial last line, a corrupt line and a
// run directory deleted by retention.
//
// It is not safe for concurrent use; each Run belongs to one goroutine.
package picrewtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Root is a crew root being written.
type Root struct {
	Dir string
	// Clock stamps what is written (default time.Now).
	Clock func() time.Time
}

// New makes the crew root's state/runs directory under dir.
func New(dir string) (*Root, error) {
	if err := os.MkdirAll(filepath.Join(dir, "state", "runs"), 0o755); err != nil {
		return nil, err
	}
	return &Root{Dir: dir, Clock: time.Now}, nil
}

// Task is the part of a tasks.json record the writer keeps.
type Task struct {
	ID         string         `json:"id"`
	RunID      string         `json:"runId"`
	StepID     *string        `json:"stepId,omitempty"`
	Role       string         `json:"role"`
	Agent      string         `json:"agent"`
	Title      string         `json:"title"`
	Status     string         `json:"status"`
	DependsOn  []string       `json:"dependsOn"`
	Cwd        string         `json:"cwd"`
	Depth      int            `json:"depth,omitempty"`
	StartedAt  string         `json:"startedAt,omitempty"`
	FinishedAt string         `json:"finishedAt,omitempty"`
	Usage      map[string]any `json:"usage,omitempty"`
}

// Run is one run directory being written.
type Run struct {
	root     *Root
	ID       string
	Dir      string
	status   string
	created  string
	tasks    []Task
	seq      uint64
	delivery map[string]string
	msgs     int
}

func (r *Root) now() string { return r.Clock().UTC().Format("2006-01-02T15:04:05.000Z") }

// NewRun creates state/runs/<id> with its manifest (status queued).
func (r *Root) NewRun(id string) (*Run, error) {
	run := &Run{root: r, ID: id, Dir: filepath.Join(r.Dir, "state", "runs", id), delivery: map[string]string{}}
	if err := os.MkdirAll(run.Dir, 0o755); err != nil {
		return nil, err
	}
	run.created = r.now()
	return run, run.SetStatus("queued")
}

// writeAtomic writes a file as pi-crew's atomicWriteFile does: a temp file
// renamed over the old one (a new inode each time).
func writeAtomic(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", p, time.Now().UnixNano())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// SetStatus rewrites the manifest with status st.
func (run *Run) SetStatus(st string) error {
	run.status = st
	return writeAtomic(filepath.Join(run.Dir, "manifest.json"), map[string]any{
		"schemaVersion": 1, "runId": run.ID, "team": "core", "workflow": "implement", "goal": "follow me",
		"status": st, "createdAt": run.created, "updatedAt": run.root.now(), "cwd": "/srv/app",
		"artifactsRoot": filepath.Join(run.root.Dir, "artifacts", run.ID),
	})
}

// AddTask adds a workflow task (stepId set) to tasks.json.
func (run *Run) AddTask(id, role string) error {
	step := strings.TrimLeft(id, "0123456789_")
	run.tasks = append(run.tasks, Task{ID: id, RunID: run.ID, StepID: &step, Role: role, Agent: role,
		Title: "do " + step, Status: "queued", DependsOn: []string{}, Cwd: "/srv/app"})
	return run.saveTasks()
}

// AddShadow adds a grandchild's shadow record (no stepId) to tasks.json.
func (run *Run) AddShadow(subID, role string) error {
	run.tasks = append(run.tasks, Task{ID: subID, RunID: run.ID, Role: role, Agent: "delegate",
		Title: "delegate: " + subID, Status: "running", DependsOn: []string{}, Cwd: "/srv/app", Depth: 2,
		StartedAt: run.root.now()})
	return run.saveTasks()
}

// SetTask rewrites a task's status in tasks.json.
func (run *Run) SetTask(id, st string) error {
	for i := range run.tasks {
		if run.tasks[i].ID == id {
			run.tasks[i].Status = st
			switch st {
			case "running":
				run.tasks[i].StartedAt = run.root.now()
			case "completed", "failed", "cancelled":
				run.tasks[i].FinishedAt = run.root.now()
			}
		}
	}
	return run.saveTasks()
}

func (run *Run) saveTasks() error {
	return writeAtomic(filepath.Join(run.Dir, "tasks.json"), run.tasks)
}

// Seq is the last seq written to events.jsonl.
func (run *Run) Seq() uint64 { return run.seq }

// Event appends one event line with the next seq and returns the seq.
func (run *Run) Event(typ, taskID string, data map[string]any) (uint64, error) {
	run.seq++
	ev := map[string]any{"time": run.root.now(), "type": typ, "runId": run.ID,
		"metadata": map[string]any{"seq": run.seq, "provenance": "team_runner"}}
	if taskID != "" {
		ev["taskId"] = taskID
	}
	if data != nil {
		ev["data"] = data
		b, _ := json.Marshal(data)
		ev["message"] = typ + ": " + string(b)
	}
	return run.seq, run.appendLine(filepath.Join(run.Dir, "events.jsonl"), ev)
}

func (run *Run) appendLine(p string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return AppendRaw(p, append(b, '\n'))
}

// AppendRaw appends bytes to a file as they are (a partial or corrupt
// line, say).
func AppendRaw(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// EventsPath is the run's events.jsonl.
func (run *Run) EventsPath() string { return filepath.Join(run.Dir, "events.jsonl") }

// Message appends a message to a task's inbox (D§2.6), then records it
// queued in delivery.json, as pi-crew's mailbox append does; it returns
// the message id.
func (run *Run) Message(to, body string) (string, error) {
	run.msgs++
	id := fmt.Sprintf("msg_%08d_%06d", run.msgs, run.msgs)
	m := map[string]any{"id": id, "runId": run.ID, "direction": "inbox", "from": "orchestrator", "to": to,
		"taskId": to, "body": body, "createdAt": run.root.now(), "status": "queued", "kind": "message",
		"priority": "normal"}
	if err := run.appendLine(filepath.Join(run.Dir, "mailbox", "tasks", to, "inbox.jsonl"), m); err != nil {
		return "", err
	}
	return id, run.Deliver(id, "queued")
}

// Deliver rewrites delivery.json with the message's status.
func (run *Run) Deliver(id, st string) error {
	run.delivery[id] = st
	return writeAtomic(filepath.Join(run.Dir, "mailbox", "delivery.json"),
		map[string]any{"messages": run.delivery, "updatedAt": run.root.now()})
}

// Steer appends a steering line for a task (the steer's mailbox message
// first, as the broker's dual write does).
func (run *Run) Steer(taskID, body string) error {
	run.msgs++
	id := fmt.Sprintf("steer_%08d_%06d", run.msgs, run.msgs)
	m := map[string]any{"id": id, "runId": run.ID, "direction": "inbox", "from": "orchestrator", "to": taskID,
		"taskId": taskID, "body": body, "createdAt": run.root.now(), "status": "queued", "kind": "steer",
		"priority": "urgent", "deliveryMode": "interrupt"}
	if err := run.appendLine(filepath.Join(run.Dir, "mailbox", "tasks", taskID, "inbox.jsonl"), m); err != nil {
		return err
	}
	return run.appendLine(filepath.Join(run.root.Dir, "artifacts", run.ID, "steering", taskID+".jsonl"),
		map[string]any{"type": "steer", "message": body, "id": id, "ts": run.root.now()})
}

// Compact rewrites events.jsonl atomically with only its last keep lines
// (pi-crew's lossy compaction, D§3.7).
func (run *Run) Compact(keep int) error {
	b, err := os.ReadFile(run.EventsPath())
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	tmp := run.EventsPath() + ".tmp-compact"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "")), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, run.EventsPath())
}

// Rotate renames events.jsonl to an archive; the next Event starts a new
// file (pi-crew's rotation, D§3.7).
func (run *Run) Rotate() error {
	return os.Rename(run.EventsPath(), fmt.Sprintf("%s.%d.archive.jsonl", run.EventsPath(), run.seq))
}

// Truncate cuts events.jsonl to n bytes in place (same inode).
func (run *Run) Truncate(n int64) error { return os.Truncate(run.EventsPath(), n) }

// Delete removes the run directory and its artifacts, as pi-crew's
// retention does.
func (run *Run) Delete() error {
	if err := os.RemoveAll(run.Dir); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(run.root.Dir, "artifacts", run.ID))
}
