package picrew

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestFollowedSteersAgreeWithTheImport: pi-crew's broker appends a steer's mailbox message, then its steering line
// (D§2.7). A follower reading a steering line whose message it has not read yet lets it wait until every mailbox
// file of the run has been read to its end once after the line was: in pi-crew's order the message is there by then,
// and the pair is recorded as the one-shot import of the same files records it. It waited a time (SettleAfter)
// instead: a mailbox read over more passes than that (a follower catching up on a large one) had the line given a
// message of its own, and the mailbox line, read later, was dropped without a line saying so, its delivery states
// with it, where the import records both. A mailbox line that comes after its steering line is found by the wait when
// it comes before the mailbox is read again; one that comes later still is recorded too, and reported: the writes are
// those of the import, the steer's own message standing for the line's (docs/picrew.md). A line whose message is
// gone is given one of its own after the wait, as the import gives it.
func TestFollowedSteersAgreeWithTheImport(t *testing.T) {
	const steerID = "steer_000001_abcdef"
	for name, c := range map[string]struct {
		before     int  // bytes of mailbox lines before the steer's message, at the start
		afterPass  int  // the pass after which the steer's message is appended (0: before the first, -1: never)
		ownMessage bool // the steering line is given a message of its own, which stands for the line's
	}{
		"the message first, in a mailbox read over three passes":    {before: 2*maxTailRead + 1},
		"the message after its steering line, before the wait ends": {afterPass: 1},
		"the message after its steering line, after the wait":       {afterPass: 2, ownMessage: true},
		"the message gone (its archive removed)":                    {afterPass: -1},
	} {
		t.Run(name, func(t *testing.T) {
			root, a, inbox := execRun(t)
			body := strings.Repeat("b", 250_000)
			for i := 0; i*len(body) < c.before; i++ {
				require.NoError(t, picrewtest.AppendRaw(inbox, execInboxLine(t, fmt.Sprintf("msg_%06d", i), body)))
			}
			appendMessage := func() {
				require.NoError(t, picrewtest.AppendRaw(inbox, execInboxLine(t, steerID, "go on")))
				require.NoError(t, a.Deliver(steerID, "acknowledged"))
			}
			if c.afterPass == 0 {
				appendMessage()
			}
			require.NoError(t, picrewtest.AppendRaw(filepath.Join(root.Dir, "artifacts", runA, "steering",
				"01_exec.jsonl"),
				fmt.Appendf(nil, `{"type":"steer","message":"go on","id":%q,"ts":%d}`+"\n", steerID, valuesAt)))

			sink := newMemSink()
			_, pass, reported := stepFollower(t, root.Dir, sink)
			for i := 1; i <= 5; i++ {
				pass()
				if i == c.afterPass {
					appendMessage()
				}
			}
			requireCopy(t, root.Dir, sink, copyOf{live: true})
			steer := "import:" + runA + ":steer:01_exec:" + steerID
			var late []string
			for _, s := range *reported {
				if strings.Contains(s.Reason, "given a message of its own") {
					late = append(late, s.String())
				}
			}
			if !c.ownMessage {
				require.Empty(t, differingWrites(t, root.Dir, sink), "the writes are the import's")
				require.Empty(t, late)
				return
			}
			require.Equal(t, []string{steer}, differingWrites(t, root.Dir, sink),
				"the steer's write carries its message")
			require.Equal(t, []string{"state/runs/" + runA +
				"/mailbox/tasks/01_exec/inbox.jsonl:1: message " + steerID +
				": read after its steering line, which was given a message of its own that stands: recorded too, " +
				"with its delivery states"}, late)
		})
	}
}

// TestALateMailboxLineDeliversTheMessageThatStands: a follower that gave a steering line a message of its own (its
// mailbox line not read by the end of the wait) and then reads a mailbox line under the same id records that line
// too, and the delivery states delivery.json holds under the id (docs/picrew.md). The steer's message stands: the
// line's mailbox.appended is the id's second, which the engine leaves out. A line of another mailbox than the steer's
// task (a worker's: pi-crew's broker writes a steer's message to its task's inbox) had its delivery and its
// acknowledgement name that other mailbox, which holds no message of the id: they moved the steer's message, in the
// task's mailbox, while saying they moved another's, as no delivery crewlog records does (msg.delivered and msg.ack
// refuse a message of another mailbox than they name), and a steering line of that other mailbox's task under the id
// was taken for one under its own task's message. They name the mailbox of the message that stands now, and the
// steering line is skipped, as one under another mailbox's message is. A follower restarted, which reads the mailbox
// files up to their checkpoints first, maps the line as the one-shot import does: the delivery states it sends again
// are answered reused, and the first stand, as for any line mapped differently on a second reading.
func TestALateMailboxLineDeliversTheMessageThatStands(t *testing.T) {
	const steerID = "steer_000001_abcdef"
	for name, c := range map[string]struct {
		file, taskID string // the late line's file, under the run's mailbox, and its taskId
	}{
		"the run's inbox":        {file: "inbox.jsonl"},
		"the task's outbox":      {file: "tasks/01_exec/outbox.jsonl", taskID: "01_exec"},
		"another task's inbox":   {file: "tasks/02_other/inbox.jsonl", taskID: "02_other"},
		"the steer's task inbox": {file: "tasks/01_exec/inbox.jsonl", taskID: "01_exec"},
	} {
		t.Run(name, func(t *testing.T) {
			root, a, _ := execRun(t)
			require.NoError(t, a.AddTask("02_other", "executor"))
			require.NoError(t, picrewtest.AppendRaw(filepath.Join(root.Dir, "artifacts", runA, "steering",
				"01_exec.jsonl"),
				fmt.Appendf(nil, `{"type":"steer","message":"go on","id":%q,"ts":%d}`+"\n", steerID, valuesAt)))
			sink := newMemSink()
			_, pass, reported := stepFollower(t, root.Dir, sink)
			for range 3 {
				pass()
			}
			require.Contains(t, sink.requests, runA+"\x00import:"+runA+":steer:01_exec:"+steerID,
				"the steer was given a message of its own")

			direction := "inbox"
			if filepath.Base(c.file) == "outbox.jsonl" {
				direction = "outbox"
			}
			line, err := json.Marshal(map[string]any{"id": steerID, "runId": runA, "direction": direction,
				"from": "orchestrator", "to": c.taskID, "taskId": c.taskID, "body": "go on", "createdAt": valuesAt,
				"status": "queued", "kind": "steer"})
			require.NoError(t, err)
			require.NoError(t, picrewtest.AppendRaw(filepath.Join(a.Dir, "mailbox", c.file), append(line, '\n')))
			require.NoError(t, a.Deliver(steerID, "acknowledged"))
			for range 3 {
				pass()
			}

			for _, st := range []string{"delivered", "acknowledged"} {
				got, ok := sink.requests[runA+"\x00import:"+runA+":delivery:"+steerID+":"+st]
				require.True(t, ok, "the %s state is recorded", st)
				var items []struct {
					Payload struct{ MessageID, Recipient string }
				}
				require.NoError(t, json.Unmarshal([]byte(got), &items))
				require.Len(t, items, 1)
				require.Equal(t, steerID, items[0].Payload.MessageID)
				require.Equal(t, "01_exec", items[0].Payload.Recipient,
					"the %s state names the mailbox of the message that stands, the steer's task's", st)
			}
			// A steering line of another task under the id is one of a message of another mailbox than its task's:
			// the steer's, in 01_exec's, not the late line's.
			require.NoError(t, picrewtest.AppendRaw(filepath.Join(root.Dir, "artifacts", runA, "steering",
				"02_other.jsonl"),
				fmt.Appendf(nil, `{"type":"steer","message":"go on","id":%q,"ts":%d}`+"\n", steerID, valuesAt)))
			for range 3 {
				pass()
			}
			require.NotContains(t, sink.requests, runA+"\x00import:"+runA+":steer:02_other:"+steerID)
			require.Contains(t, reasonsFor(*reported, "artifacts/"+runA+"/steering/02_other.jsonl"),
				"steer "+steerID+" of task 02_other: its id is a message of 01_exec's mailbox: skipped (a message id "+
					"is its run's one message)")

			// A follower restarted reads the mailbox files up to their checkpoints before the steering files.
			appended := len(sink.appended)
			_, pass, reported = restartedFollower(t, root.Dir, sink)
			for range 3 {
				pass()
			}
			require.Len(t, sink.appended, appended, "nothing appended again")
			var reused []string
			if c.file != "tasks/01_exec/inbox.jsonl" {
				for _, st := range []string{"delivered", "acknowledged"} {
					reused = append(reused, "import:"+runA+":delivery:"+steerID+":"+st+": imported earlier from "+
						"another reading of the files; the first import stands")
				}
			}
			require.Equal(t, reused, reasonsFor(*reported, "state/runs/"+runA))
		})
	}
}

// execRun is a crew root with run A running its one task, 01_exec, and the path of that task's inbox.
func execRun(t *testing.T) (root *picrewtest.Root, a *picrewtest.Run, inbox string) {
	t.Helper()
	root = newRoot(t)
	a = newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_exec", "executor"))
	require.NoError(t, a.SetStatus("running"))
	return root, a, filepath.Join(a.Dir, "mailbox", "tasks", "01_exec", "inbox.jsonl")
}

// execInboxLine is a line of execRun's inbox, a steer's message as pi-crew's broker writes it, of id and body.
func execInboxLine(t *testing.T, id, body string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": id, "runId": runA, "direction": "inbox", "from": "orchestrator",
		"to": "01_exec", "taskId": "01_exec", "body": body, "createdAt": valuesAt, "status": "queued",
		"kind": "steer", "priority": "urgent", "deliveryMode": "interrupt"})
	require.NoError(t, err)
	return append(b, '\n')
}

// differingWrites are the command ids of the writes the sink holds that a one-shot import of the files as they are
// now makes with other events, sorted.
func differingWrites(t *testing.T, root string, sink *memSink) []string {
	t.Helper()
	src := &source{root: root}
	runs, err := src.readRuns()
	require.NoError(t, err)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var out []string
	for _, r := range runs {
		for _, w := range newPlanner(src, r, time.Now).plan() {
			got, ok := sink.requests[r.id+"\x00"+w.id]
			if !ok {
				continue
			}
			want, err := json.Marshal(w.items)
			require.NoError(t, err)
			if got != string(want) {
				out = append(out, w.id)
			}
		}
	}
	sortStrings(out)
	return out
}
