package picrew

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestAWorkerRewritingItsMailboxFilesHoldsNoSteeringLine: a steering line whose mailbox message never comes waits
// until each mailbox file of its run has been read to its end once after the line was, in a pass of its own or not,
// or found replaced or rewritten since (what it held then is not there to read). A worker's mailbox files, which it
// rewrites as it likes, held the line instead, and every steering line of the run with it, for as long as the worker
// went on, and the run never settled: replacing its inbox and its outbox in turn, one before each pass, had every
// pass leave one of them to the next (a live file replaced: waitsForArchive), so no pass read them all to their end;
// rewriting, before each pass, the last line read of a file longer than one read (maxTailRead) had every pass read
// it again from its start, never to its end.
func TestAWorkerRewritingItsMailboxFilesHoldsNoSteeringLine(t *testing.T) {
	for name, c := range map[string]struct {
		lines int // of each mailbox file, of bodyLen bytes
		// rewrite is what the worker does to the mailbox file name before the follower's pass i.
		rewrite func(t *testing.T, fl *Follower, box string, i int)
	}{
		"inbox and outbox replaced in turn": {lines: 1, rewrite: func(t *testing.T, _ *Follower, box string, i int) {
			name := []string{"inbox.jsonl", "outbox.jsonl"}[i%2]
			b, err := os.ReadFile(filepath.Join(box, name))
			require.NoError(t, err)
			tmp := filepath.Join(box, "swap") // the same lines, in a new file renamed over the live one
			require.NoError(t, os.WriteFile(tmp, b, 0o644))
			require.NoError(t, os.Rename(tmp, filepath.Join(box, name)))
		}},
		"the last line read of a long inbox rewritten": {lines: 20,
			rewrite: func(t *testing.T, fl *Follower, box string, i int) {
				inbox := filepath.Join(box, "inbox.jsonl")
				f, err := os.OpenFile(inbox, os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.WriteAt([]byte{byte('a' + i%2)}, fl.runs[runA].tails[inbox].offset-3) // a byte of its body
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}},
	} {
		t.Run(name, func(t *testing.T) {
			root := newRoot(t)
			a := newRun(t, root, runA)
			require.NoError(t, a.AddTask("01_exec", "executor"))
			require.NoError(t, a.SetStatus("running"))
			box := filepath.Join(a.Dir, "mailbox", "tasks", "01_exec")
			for _, direction := range []string{"inbox", "outbox"} {
				from, to := "orchestrator", "01_exec"
				if direction == "outbox" {
					from, to = to, from
				}
				for i := range c.lines {
					b, err := json.Marshal(map[string]any{"id": fmt.Sprintf("msg_%s_%06d", direction, i),
						"runId": runA, "direction": direction, "from": from, "to": to, "taskId": "01_exec",
						"body": strings.Repeat("b", maxTailRead/16), "createdAt": valuesAt, "status": "queued"})
					require.NoError(t, err)
					require.NoError(t, picrewtest.AppendRaw(filepath.Join(box, direction+".jsonl"), append(b, '\n')))
				}
			}
			require.NoError(t, picrewtest.AppendRaw(filepath.Join(root.Dir, "artifacts", runA, "steering",
				"01_exec.jsonl"),
				fmt.Appendf(nil, `{"type":"steer","message":"go on","id":"steer_000001_gone","ts":%d}`+
					"\n", valuesAt)))

			sink := newMemSink()
			fl, pass, _ := stepFollower(t, root.Dir, sink)
			pass()
			require.True(t, fl.runs[runA].holding(), "the line waits for its message")
			for i := range 8 {
				c.rewrite(t, fl, box, i)
				pass()
			}
			require.False(t, fl.runs[runA].holding(), "each mailbox file was read to its end, or rewritten, since")
			require.Len(t, withPrefix(mustImported(sink), "import:"+runA+":steer:"), 1,
				"the line, given a message of its own")
		})
	}
}

// TestASteeringLineWaitsForItsMailboxAsItWasWhenHeld: a steering line whose mailbox message is not read yet waits
// until each mailbox file of its run has been read up to the size it had when the line was first held (pi-crew's
// broker appends the message first, so it lies within that size), not to the file's moving end. It waited for a pass
// reading each mailbox file to its end, which never came while a writer appended more to a file before every pass
// than a pass reads of it (maxTailRead): the line, every later line of its file and the run's settling were held for
// as long as the writer kept ahead. A message within that size is still found, the pair recorded as the one-shot
// import of the same files records it.
func TestASteeringLineWaitsForItsMailboxAsItWasWhenHeld(t *testing.T) {
	const steerID = "steer_000001_abcdef"
	for name, c := range map[string]struct {
		before  int  // bytes of mailbox lines before the steer's message
		message bool // the steer's message is in the inbox, after those lines (else it is given one of its own)
	}{
		"its message never comes":               {before: 1},
		"its message behind three reads' worth": {before: 3 * maxTailRead, message: true},
	} {
		t.Run(name, func(t *testing.T) {
			root, _, inbox := execRun(t)
			n := 0
			appendMessages := func(bytes int, id string) {
				for written := 0; written < bytes; {
					if id == "" {
						n++
					}
					b := execInboxLine(t, cmp.Or(id, fmt.Sprintf("msg_%06d", n)), strings.Repeat("b", 250_000))
					require.NoError(t, picrewtest.AppendRaw(inbox, b))
					written += len(b)
				}
			}
			appendMessages(c.before, "")
			if c.message {
				appendMessages(1, steerID)
			}
			require.NoError(t, picrewtest.AppendRaw(filepath.Join(root.Dir, "artifacts", runA, "steering",
				"01_exec.jsonl"),
				fmt.Appendf(nil, `{"type":"steer","message":"go on","id":%q,"ts":%d}`+"\n", steerID, valuesAt)))

			sink := newMemSink()
			fl, pass, _ := stepFollower(t, root.Dir, sink)
			pass()
			require.True(t, fl.runs[runA].holding(), "the line waits for its message")
			for range 6 {
				appendMessages(maxTailRead+maxTailRead/4, "") // more than a pass reads
				pass()
			}
			require.False(t, fl.runs[runA].holding(), "the inbox was read up to its size when the line was held")
			require.Len(t, withPrefix(mustImported(sink), "import:"+runA+":steer:"), 1, "the line is recorded")
			require.Empty(t, differingWrites(t, root.Dir, sink), "the writes are the import's")
		})
	}
}
