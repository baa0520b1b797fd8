package picrew

import (
	"fmt"
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
	root := t.TempDir()
	run := timesRunCreated
	msg := func(id string) string {
		return `{"id":"` + id + `","from":"orchestrator","body":"hi","status":"queued","createdAt":1790928000000}` +
			"\n"
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan",` +
			`"role":"planner","status":"completed"}]`,
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl": msg("m1") + msg("m2") + msg("m3"),
		"state/runs/" + run + "/mailbox/delivery.json": `{"messages":{"m1":"acknowledged",` +
			`"m2":{"status":"acknowledged"},"m3":"delivered"},"updatedAt":"2026-10-02T08:00:00.000Z"}`,
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Equal(t, []string{"state/runs/" + run + "/mailbox/delivery.json: message m2: its delivery state " +
		"is not a string: left out, its state taken from its mailbox line"}, reports)
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		for id, want := range map[string]projections.MessageStatus{"m1": projections.MessageAcknowledged,
			"m2": projections.MessageQueued, "m3": projections.MessageDelivered} {
			m, ok := s.Message(run, id)
			require.True(t, ok, "%s: %s", name, id)
			require.Equal(t, want, m.Status, "%s: %s", name, id)
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
