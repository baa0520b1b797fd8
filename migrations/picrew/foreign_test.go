package picrew

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestForeignDataIsUTF8: a foreign event's data is kept as its JSON text, which a line may hold bytes of that are not
// UTF-8 (JSON decoders take them inside a string). The one-shot import recorded them as they were, and events.since
// served them in its frames, which JSON text must not hold; a follower's write carries the data as a JSON string,
// in which each of those bytes becomes U+FFFD, so the two recorded different events under one command id. Each such
// byte is now U+FFFD in what the one-shot import records too, as every other text of a line decoded from JSON has
// it; an escaped lone surrogate (\ud800) is JSON text and stays as written.
func TestForeignDataIsUTF8(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/events.jsonl": `{"time":1790928000000,"type":"task.progress","message":"m` +
			"\xff" + `",` +
			`"data":{"note":"x` + "\xff\xfe" + `y","lone":"\ud800"},"metadata":{"seq":1}}` + "\n",
	})
	l := openFuzzStore(t)
	defer l.Close()
	_, err := Import(l, root, &Options{Clock: valuesClock})
	require.NoError(t, err)
	var got *events.ForeignImported
	forEachEvent(t, l, func(ev *eventlog.Event) {
		if ev.Type == events.TypeForeignImported {
			e, err := projections.FromLog(ev)
			require.NoError(t, err)
			got = e.Payload.(*events.ForeignImported)
		}
	})
	require.NotNil(t, got)
	require.Equal(t, `{"note":"x`+"\uFFFD\uFFFD"+`y","lone":"\ud800"}`, got.Data)
	require.Equal(t, "m\uFFFD", got.Message)
	require.True(t, utf8.ValidString(got.Data))

	// What a follower's write carries to crewd (import.append's JSON) is what the one-shot import records.
	src := &source{root: root}
	runs, err := src.readRuns()
	require.NoError(t, err)
	var sent []events.ForeignImported
	for _, w := range newPlanner(src, runs[0], valuesClock).plan() {
		if w.id == "import:"+run+":seq:1" {
			b, err := json.Marshal(Write{ID: w.id, RunID: run, Items: w.items}.wire().Events[0].Payload)
			require.NoError(t, err)
			var f events.ForeignImported
			require.NoError(t, json.Unmarshal(b, &f))
			sent = append(sent, f)
		}
	}
	require.Equal(t, []events.ForeignImported{*got}, sent)
}
