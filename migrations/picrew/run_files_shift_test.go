package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestAFileCutByTheCapIsNotRemoved: of a run's steering files (as of its archives and mailbox files) the first
// maxRunFiles in the order they are read are followed. A file made that sorts before the followed ones shifts the
// last of them past the cap: it was reported removed, which it is not, and its checkpoint recorded gone, which the
// follower reads as none, so that once back within the cap it was read from its start, its lines decided again. It is
// reported as cut by the cap now, its checkpoint kept; a follower restarted after the shift reads each file it keeps
// on from its checkpoint, and the cut file, back within the cap, from where it was read: no line twice, none skipped.
func TestAFileCutByTheCapIsNotRemoved(t *testing.T) {
	root := t.TempDir()
	steering := filepath.Join(root, "artifacts", runA, "steering")
	steerFile := func(i int) string { return filepath.Join(steering, fmt.Sprintf("t%05d.jsonl", i)) }
	steerLine := `{"type":"steer","message":"look","ts":1790928000000}` + "\n"
	var tasks []string
	for i := range maxRunFiles + 1 {
		tasks = append(tasks, fmt.Sprintf(`{"id":"t%05d","stepId":"s%d","status":"running"}`, i, i))
	}
	files := map[string]string{
		"state/runs/" + runA + "/manifest.json": manifestOf(runA, "running"),
		"state/runs/" + runA + "/tasks.json":    "[" + strings.Join(tasks, ",") + "]",
	}
	for i := 1; i <= maxRunFiles; i++ {
		files[fmt.Sprintf("artifacts/%s/steering/t%05d.jsonl", runA, i)] = steerLine
	}
	writeFiles(t, root, files)
	appendLine := func(p string) { require.NoError(t, picrewtest.AppendRaw(p, []byte(steerLine))) }

	sink := newMemSink()
	fl, pass, reported := stepFollower(t, root, sink)
	pass()
	pass()
	appendLine(steerFile(0)) // sorts first: the last file followed is past the cap now
	pass()
	pass()
	last := fl.src.rel(steerFile(maxRunFiles))
	require.Equal(t, []string{"past the first 2048 steering files of its run, in the order they are read: not " +
		"read further (what was imported of it stays)"}, reasonsFor(*reported, last))
	c, ok := fl.cks[last]
	require.True(t, ok, "the cut file keeps its checkpoint")
	require.False(t, c.Gone)

	appendLine(steerFile(1))
	appendLine(steerFile(maxRunFiles))
	again, pass, _ := restartedFollower(t, root, sink)
	pass()
	pass()
	require.Equal(t, uint64(maxRunFiles), again.Stats().Reread, "each file kept read up to its checkpoint")
	require.Equal(t, uint64(1), again.Stats().Lines, "the line appended to a file kept, once")

	replayed := again.Stats().Replayed
	require.NoError(t, os.Remove(steerFile(0))) // the cut file is within the cap again
	pass()
	pass()
	require.Equal(t, uint64(2), again.Stats().Lines, "the cut file read on from where it was read")
	require.Equal(t, replayed, again.Stats().Replayed, "no write of a line read before sent again")
	requireCopy(t, root, sink, copyOf{live: true,
		extra: []string{"import:" + runA + ":steer:t00000:steer_import_t00000_1"}})
}

// TestAMailboxFileBackWithinTheCapTakesTheDeliveryStatesOfItsMessages: a follower restarted while a mailbox file it
// had read was past the first maxRunFiles of its kind read delivery.json before it knew that file's messages, and so
// planned none of their states. Once the file was within the cap again, its lines were read up to its checkpoint with
// their writes dropped, the states delivery.json gave them since among them: an acknowledgement made while the file
// was past the cap was never recorded, where the one-shot import of the same files records it. The lines are read
// again as at a start now (their states from the lines), and delivery.json's states are planned after them.
func TestAMailboxFileBackWithinTheCapTakesTheDeliveryStatesOfItsMessages(t *testing.T) {
	root := t.TempDir()
	runDir := filepath.Join(root, "state", "runs", runA)
	var tasks []string
	files := map[string]string{"state/runs/" + runA + "/manifest.json": manifestOf(runA, "running")}
	for i := range maxRunFiles {
		tasks = append(tasks, fmt.Sprintf(`{"id":"t%05d","stepId":"s%d","status":"running"}`, i, i))
		files[fmt.Sprintf("state/runs/%s/mailbox/tasks/t%05d/inbox.jsonl", runA, i)] = ""
	}
	files["state/runs/"+runA+"/tasks.json"] = "[" + strings.Join(tasks, ",") + "]"
	last := fmt.Sprintf("state/runs/%s/mailbox/tasks/t%05d/inbox.jsonl", runA, maxRunFiles-1)
	files[last] = `{"id":"msg_late","runId":"` + runA + `","direction":"inbox","from":"orchestrator","to":"t02047",` +
		`"taskId":"t02047","body":"hello","createdAt":1790928000000,"status":"queued"}` + "\n"
	writeFiles(t, root, files)

	sink := newMemSink()
	_, pass, _ := stepFollower(t, root, sink)
	pass()
	pass()
	ids, _ := sink.imported()
	require.Contains(t, ids, "import:"+runA+":msg:msg_late")

	// The run's inbox sorts before every task's: the last task's file is past the cap. Its message is acknowledged
	// while no follower runs, and a follower started then reads delivery.json without the message.
	runInbox := filepath.Join(runDir, "mailbox", "inbox.jsonl")
	writeFiles(t, root, map[string]string{
		"state/runs/" + runA + "/mailbox/inbox.jsonl":   "",
		"state/runs/" + runA + "/mailbox/delivery.json": `{"messages":{"msg_late":"acknowledged"}}`,
	})
	again, pass, reported := restartedFollower(t, root, sink)
	pass()
	pass()
	require.Contains(t, reasonsFor(*reported, "state/runs/"+runA+"/mailbox"), fmt.Sprintf("more than %d mailbox "+
		"files: those past the first %[1]d, in the order they are read, are not read", maxRunFiles))

	require.NoError(t, os.Remove(runInbox)) // the file is within the cap again
	pass()
	pass()
	require.Equal(t, uint64(1), again.Stats().Reread, "its line read up to its checkpoint")
	ids, _ = sink.imported()
	require.Equal(t, []string{"import:" + runA + ":delivery:msg_late:delivered",
		"import:" + runA + ":delivery:msg_late:acknowledged"}, withPrefix(ids, "import:"+runA+":delivery:"))
	requireCopy(t, root, sink, copyOf{live: true})
}
