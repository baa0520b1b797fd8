package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestOneDeliveryStateDoesNotTakeTheOthers: delivery.json holds each message's state under its id, and one that is
// not a string (a value a worker wrote) made the whole file undecodable: every message's state was taken from its
// mailbox line, which keeps "queued" after an acknowledgement, so every acknowledged message of the run was imported
// unread. Each state is now decoded on its own, one that is not a string left out and reported, by the one-shot
// import and a follower alike.
func TestOneDeliveryStateDoesNotTakeTheOthers(t *testing.T) {
	run, root := deliveryRun(t, `"m1":"acknowledged","m2":{"status":"acknowledged"},"m3":"delivered"`)
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Equal(t, []string{"state/runs/" + run + "/mailbox/delivery.json: message m2: its delivery state " +
		"is not a string: left out, its state taken from its mailbox line"}, reports)
	requireMessageStates(t, run, one, followed, map[string]projections.MessageStatus{
		"m1": projections.MessageAcknowledged, "m2": projections.MessageQueued, "m3": projections.MessageDelivered})
}

// TestDeliveryStatesOfNoMessageDoNotTakeTheRunsOwn: of a delivery.json naming more than maxDeliveryStates messages,
// the most advanced states were kept, whatever the ids they name: a run's worker writing the states of 10,000 ids no
// message of the run has, acknowledged, before its real ones, had every real message's state left out, read as its
// mailbox line says (queued). The states of the run's messages are kept first now, then those of other ids, by the
// one-shot import and a follower alike.
func TestDeliveryStatesOfNoMessageDoNotTakeTheRunsOwn(t *testing.T) {
	var junk strings.Builder
	for i := range maxDeliveryStates {
		fmt.Fprintf(&junk, `"junk%05d":"acknowledged",`, i)
	}
	run, root := deliveryRun(t, junk.String()+`"m1":"acknowledged","m2":"delivered","m3":"queued"`)
	one, followed, _ := importedTwice(t, root, valuesClock)
	requireMessageStates(t, run, one, followed, map[string]projections.MessageStatus{
		"m1": projections.MessageAcknowledged, "m2": projections.MessageDelivered, "m3": projections.MessageQueued})
}

// deliveryRun is the root of a finished run whose task 01_plan's inbox holds the messages m1, m2 and m3, queued,
// and whose delivery.json's messages member holds states.
func deliveryRun(t *testing.T, states string) (run, root string) {
	root, run = t.TempDir(), timesRunCreated
	msg := func(id string) string {
		return `{"id":"` + id + `","from":"orchestrator","body":"hi","status":"queued","createdAt":1790928000000}` +
			"\n"
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan",` +
			`"role":"planner","status":"completed"}]`,
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl": msg("m1") + msg("m2") + msg("m3"),
		"state/runs/" + run + "/mailbox/delivery.json": `{"messages":{` + states +
			`},"updatedAt":"2026-10-02T08:00:00.000Z"}`,
	})
	return run, root
}

// requireMessageStates holds the messages of run in the logs of the one-shot import (one) and of a follower to want.
func requireMessageStates(t *testing.T, run string, one, followed *eventlog.Log,
	want map[string]projections.MessageStatus) {
	t.Helper()
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		for id, status := range want {
			m, ok := s.Message(run, id)
			require.True(t, ok, "%s: %s", name, id)
			require.Equal(t, status, m.Status, "%s: %s", name, id)
		}
	}
}

// A file of many bad items is reported up to maxReportsPerFile of them, and once that the others go unreported,
// by the one-shot import and by a follower alike: a run's worker writing a delivery.json of millions of states that
// are not strings would otherwise have as many reports kept, logged and printed.
func TestReportsOfOneFileAreBounded(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	var states strings.Builder
	for i := range 3 * maxReportsPerFile {
		if i > 0 {
			states.WriteString(",")
		}
		fmt.Fprintf(&states, `"m%d":{"status":"acknowledged"}`, i)
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"completed"}]`, "state/runs/" + run + "/mailbox/delivery.json": `{"messages":{` +
			states.String() + `},"updatedAt":"2026-10-02T08:00:00.000Z"}`,
	})
	_, _, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, maxReportsPerFile+1)
	require.Contains(t, reports, fmt.Sprintf("state/runs/%s/mailbox/delivery.json: more than %d of this "+
		"file's items were skipped: the others are not reported", run, maxReportsPerFile))
}

// TestFollowerKeepsTheStateOfAMessageReadAfterItsDeliveryFile: a follower ranks the states of delivery.json by the
// messages it has read (the run's own first); one whose line it reads after the file, a file of more states than
// maxDeliveryStates (a worker's junk ids, acknowledged, named first) left out as another id's, and the file unchanged
// since, was recorded as its mailbox line says (queued) for good. The file is read again once the follower knows
// more messages of the run, while it holds more states than it keeps.
func TestFollowerKeepsTheStateOfAMessageReadAfterItsDeliveryFile(t *testing.T) {
	var junk strings.Builder
	for i := range maxDeliveryStates {
		fmt.Fprintf(&junk, `"junk%05d":"acknowledged",`, i)
	}
	run, root := deliveryRun(t, junk.String()+`"m1":"acknowledged","m4":"acknowledged","m5":"delivered"`)
	inbox := filepath.Join(root, "state/runs", run, "mailbox/tasks/01_plan/inbox.jsonl")
	writeFiles(t, root, map[string]string{"state/runs/" + run + "/manifest.json": manifestOf(run, "running")})
	sink := newMemSink()
	_, pass, _ := stepFollower(t, root, sink)
	pass()
	f, err := os.OpenFile(inbox, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	for _, id := range []string{"m4", "m5"} {
		_, err = f.WriteString(`{"id":"` + id + `","from":"orchestrator","body":"hi","status":"queued",` +
			`"createdAt":1790928000000}` + "\n")
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
	pass()
	pass()
	_, count := sink.imported()
	for _, id := range []string{"delivery:m1:acknowledged", "delivery:m4:delivered", "delivery:m4:acknowledged",
		"delivery:m5:delivered"} {
		require.Equal(t, 1, count["import:"+run+":"+id], id)
	}
	require.Zero(t, count["import:"+run+":delivery:m5:acknowledged"])
}
