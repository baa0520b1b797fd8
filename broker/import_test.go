package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

func importWriteOf(id, run string, evs ...map[string]any) map[string]any {
	return map[string]any{"commandId": id, "runId": run, "events": evs}
}

func importEventOf(typ string, ms int64, payload map[string]any) map[string]any {
	return map[string]any{"type": typ, "time": ms, "payload": payload}
}

// importedEvent is an event of importEach: its type and payload.
type importedEvent struct {
	typ     string
	payload map[string]any
}

// importEach imports evs into run at time at, each as a write of its own sent unescaped, and requires none refused.
func importEach(t *testing.T, a *client, run string, at int64, evs []importedEvent) {
	t.Helper()
	for i, ev := range evs {
		res := a.okUnescaped(methodImportAppend, map[string]any{"source": "picrew", "writes": []any{
			importWriteOf(fmt.Sprint("import:", i), run, importEventOf(ev.typ, at, ev.payload))}})
		require.NotContains(t, res["results"].([]any)[0], "error", ev.typ)
	}
}

// importedParent is the imported events of a running run whose one task, parent, a workflow's, is running: the
// parent of the delegations a test imports (importedAdmission).
func importedParent(parent string) []importedEvent {
	return []importedEvent{
		{events.TypeRunCreated, map[string]any{"team": "t", "goal": "g", "cwd": "/w"}},
		{events.TypeRunRunning, map[string]any{}},
		{events.TypeTaskCreated, map[string]any{"taskId": parent, "role": "r", "agent": "a", "title": "t", "cwd": "/w",
			"kind": events.TaskKindWorkflow}},
		{events.TypeTaskStarted, map[string]any{"taskId": parent}},
	}
}

// importedAdmission is the imported delegate.admitted of sub by parent at time at.
func importedAdmission(parent, sub string, at int64) importedEvent {
	return importedEvent{events.TypeDelegateAdmitted, map[string]any{"taskId": parent, "subId": sub, "childDepth": 1,
		"role": "explorer", "timeoutSec": 900, "deadline": at + 900_000, "cwd": "/w", "title": "t", "prompt": "p"}}
}

// importRunWriteOf is the write that imports run's run.created.
func importRunWriteOf(run string) map[string]any {
	return importWriteOf("import:"+run+":run", run, importEventOf(events.TypeRunCreated, 1790928000000,
		map[string]any{"team": "core", "goal": "g", "cwd": "/srv"}))
}

// importProgressWriteOf is the write that imports the source's task.progress line seq of run (as foreign.imported),
// a second after 08:00 for each seq past 6.
func importProgressWriteOf(run string, seq int) map[string]any {
	return importWriteOf(fmt.Sprintf("import:%s:seq:%d", run, seq), run, importEventOf(events.TypeForeignImported,
		1790928000000+int64(seq-6)*1000, map[string]any{"source": "picrew", "type": "task.progress", "seq": seq,
			"time": fmt.Sprintf("2026-10-02T08:00:%02d.000Z", seq-6)}))
}

type importResults struct {
	Results []struct {
		CommandID string      `json:"commandId"`
		Appended  int         `json:"appended"`
		Replayed  bool        `json:"replayed"`
		Error     *wire.Error `json:"error"`
	} `json:"results"`
}

// TestImportAppend: the admin imports a run through the socket; a write sent again answers replayed and appends
// nothing; the events keep the source's time and the engine's namespace; one write refused leaves the others.
func TestImportAppend(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	a := f.dial()
	a.helloAdmin()
	const run = "team_20261201120000_0000000000000001"
	writes := []map[string]any{
		importRunWriteOf(run),
		importWriteOf("import:"+run+":task:01_plan", run, importEventOf(events.TypeTaskCreated, 1790928000000,
			map[string]any{"taskId": "01_plan", "role": "planner", "agent": "planner", "title": "plan", "cwd": "/srv",
				"dependsOn": []string{}, "stepId": "plan", "kind": "workflow"})),
		importProgressWriteOf(run, 7),
		importWriteOf("import:"+run+":seq:8", run, importEventOf(events.TypeCredentialIssued, 0,
			map[string]any{"taskId": "01_plan", "role": "worker", "digest": "00"})),
	}
	params := map[string]any{"source": "picrew", "writes": writes}
	var first importResults
	r := a.call(methodImportAppend, params)
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &first))
	require.Len(t, first.Results, 4)
	for _, w := range first.Results[:3] {
		require.Nil(t, w.Error, w.CommandID)
		require.Equal(t, 1, w.Appended)
		require.False(t, w.Replayed)
	}
	require.Equal(t, wire.CodeBadParams, first.Results[3].Error.Code, "credentials are never imported")

	var again importResults
	r = a.call(methodImportAppend, params)
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &again))
	for _, w := range again.Results[:3] {
		require.True(t, w.Replayed, w.CommandID)
		require.Zero(t, w.Appended)
	}

	f.eng.Read(func(s *projections.State) {
		_, ok := s.Task(run, "01_plan")
		require.True(t, ok)
	})
	head, _ := f.log.Head()
	it := f.log.ReadStream(run, 1)
	defer it.Close()
	n := 0
	for it.Next() {
		ev := it.Event()
		n++
		require.Equal(t, events.ImportCorrelation+"picrew", ev.CorrelationID)
		require.Equal(t, events.EnginePrincipal(), events.EventPrincipal(ev.ActorRole, ev.Stream, ev.ActorTask, ev.CorrelationID))
		require.GreaterOrEqual(t, ev.Time, int64(1790928000000)*1e6)
		require.Less(t, ev.Time, int64(1790928002000)*1e6, "the source's time, not the engine clock")
	}
	require.NoError(t, it.Err())
	require.Equal(t, 3, n, "head %d", head)
}

// TestImportAppendRefusals: only the admin; every size bounded; the run must exist before its events.
func TestImportAppendRefusals(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	ev := importEventOf(events.TypeForeignImported, 1, map[string]any{"source": "picrew", "type": "x", "seq": 1, "time": ""})
	o.fails(methodImportAppend, map[string]any{"source": "picrew", "writes": []any{importWriteOf("import:i", runR, ev)}}, wire.CodeForbidden)
	o.fails(methodImportCheckpoints, map[string]any{"source": "picrew"}, wire.CodeForbidden)

	a := f.dial()
	a.helloAdmin()
	many := make([]any, MaxImportWrites+1)
	for i := range many {
		many[i] = importWriteOf("import:i", runR, ev)
	}
	tooManyEvents := make([]map[string]any, 17)
	for i := range tooManyEvents {
		tooManyEvents[i] = ev
	}
	for name, p := range map[string]map[string]any{
		"no source":       {"writes": []any{importWriteOf("import:i", runR, ev)}},
		"no writes":       {"source": "picrew", "writes": []any{}},
		"too many writes": {"source": "picrew", "writes": many},
		"too many events": {"source": "picrew", "writes": []any{importWriteOf("import:i", runR, tooManyEvents...)}},
		"no command id":   {"source": "picrew", "writes": []any{importWriteOf("", runR, ev)}},
		"long command id": {"source": "picrew", "writes": []any{importWriteOf("import:"+strings.Repeat("i", 250), runR, ev)}},
		"unknown type":    {"source": "picrew", "writes": []any{importWriteOf("import:i", runR, importEventOf("x.y", 0, map[string]any{}))}},
		"unknown field": {"source": "picrew", "writes": []any{importWriteOf("import:i", runR,
			importEventOf(events.TypeForeignImported, 0, map[string]any{"source": "picrew", "nope": 1}))}},
		"payload not an object": {"source": "picrew", "writes": []any{importWriteOf("import:i", runR,
			map[string]any{"type": events.TypeForeignImported, "payload": "x"})}},
		"extra key": {"source": "picrew", "writes": []any{importWriteOf("import:i", runR, ev)}, "x": 1},
	} {
		r := a.call(methodImportAppend, p)
		require.NotNil(t, r.Error, name)
		require.Equal(t, wire.CodeBadParams, r.Error.Code, name)
	}

	// Decided per write: unknown run, a run that exists, a checkpoint outside $import, a time out of range.
	var res importResults
	r := a.call(methodImportAppend, map[string]any{"source": "picrew", "writes": []any{
		importWriteOf("import:i1", "R404", ev),
		importWriteOf("import:i2", runR, importEventOf(events.TypeRunCreated, 0, map[string]any{"team": "t"})),
		importWriteOf("import:i3", runR, importEventOf(events.TypeImportCheckpoint, 0, map[string]any{"source": "picrew", "path": "p"})),
		importWriteOf("import:i4", runR, importEventOf(events.TypeForeignImported, 9e12+1, map[string]any{"source": "picrew"})),
		importWriteOf("import:i5", events.ImportStream, ev),
	}})
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &res))
	want := []wire.Code{wire.CodeNoManifest, wire.CodeBadParams, wire.CodeBadParams, wire.CodeBadParams, wire.CodeBadParams}
	for i, w := range res.Results {
		require.NotNil(t, w.Error, w.CommandID)
		require.Equal(t, want[i], w.Error.Code, "%s: %s", w.CommandID, w.Error.Message)
	}
}

// TestImportCheckpointsPageOnEveryPathRecorded: a page ending on any path the engine records hands out a nextCursor
// the next call takes (the path, or a long one's digest), the longest (4096 chars, counted as a path cursor is, in
// code points: 2-byte ones too) included;
// a path no page could end on (longer, or empty, never after a cursor) is refused when written, naming the bound.
func TestImportCheckpointsPageOnEveryPathRecorded(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	a := f.dial()
	a.helloAdmin()
	longest := events.MaxImportPathChars
	cases := []struct {
		path string
		ok   bool
	}{
		{"a", true},
		{"b" + strings.Repeat("é", longest-1), true},
		{strings.Repeat("c", longest), true},
		{"d" + strings.Repeat("é", longest), false},
		{strings.Repeat("e", longest+1), false},
		{"", false},
		{"f", true},
	}
	writes := make([]any, len(cases))
	for i, c := range cases {
		writes[i] = importWriteOf("import:ck"+itoa(int64(i)), events.ImportStream, importEventOf(events.TypeImportCheckpoint, 0,
			map[string]any{"source": "picrew", "path": c.path}))
	}
	var res importResults
	r := a.call(methodImportAppend, map[string]any{"source": "picrew", "writes": writes})
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &res))
	require.Len(t, res.Results, len(cases))

	var recorded, listed []string
	for _, c := range cases {
		if c.ok {
			recorded = append(recorded, c.path)
		}
	}
	params := map[string]any{"source": "picrew", "limit": 1}
	for range len(cases) {
		var pg struct {
			Checkpoints []events.ImportCheckpoint `json:"checkpoints"`
			NextCursor  string                    `json:"nextCursor"`
		}
		r := a.call(methodImportCheckpoints, params)
		require.Nil(t, r.Error, "the page after %.8q", params["cursor"])
		require.NoError(t, json.Unmarshal(r.Result, &pg))
		require.Len(t, pg.Checkpoints, 1)
		listed = append(listed, pg.Checkpoints[0].Path)
		if pg.NextCursor == "" {
			break
		}
		require.Equal(t, checkpointCursor(pg.Checkpoints[0].Path), pg.NextCursor, "a long path is named by its digest")
		params["cursor"] = pg.NextCursor
	}
	require.Equal(t, recorded, listed)
	// The longest path is taken as a cursor itself too, as crewd answered it before it named long paths by digest.
	var pg struct {
		Checkpoints []events.ImportCheckpoint `json:"checkpoints"`
	}
	r = a.call(methodImportCheckpoints, map[string]any{"source": "picrew", "limit": 1, "cursor": recorded[1]})
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &pg))
	require.Equal(t, recorded[2], pg.Checkpoints[0].Path)

	for i, c := range cases {
		e := res.Results[i].Error
		if c.ok {
			require.Nil(t, e, "%.8q", c.path)
			continue
		}
		require.NotNil(t, e, "%.8q", c.path)
		require.Equal(t, wire.CodeBadParams, e.Code)
		require.Contains(t, e.Message, "path must be 1..4096 chars")
	}
}

// TestImportCheckpoints: the newest checkpoint of each file, by path, page by page.
func TestImportCheckpoints(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	a := f.dial()
	a.helloAdmin()
	ck := func(id, path string, offset int) map[string]any {
		return importWriteOf("import:"+id, events.ImportStream, importEventOf(events.TypeImportCheckpoint, 0,
			map[string]any{"source": "picrew", "path": path, "inode": 7, "size": offset, "offset": offset}))
	}
	a.ok(methodImportAppend, map[string]any{"source": "picrew", "writes": []any{
		ck("c1", "state/runs/A/events.jsonl", 10), ck("c2", "state/runs/B/events.jsonl", 5),
		ck("c3", "state/runs/A/events.jsonl", 20), ck("c4", "state/runs/C/events.jsonl", 1),
	}})
	type page struct {
		Checkpoints []events.ImportCheckpoint `json:"checkpoints"`
		NextCursor  string                    `json:"nextCursor"`
	}
	var p1, p2 page
	r := a.call(methodImportCheckpoints, map[string]any{"source": "picrew", "limit": 2})
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &p1))
	require.Len(t, p1.Checkpoints, 2)
	require.Equal(t, int64(20), p1.Checkpoints[0].Offset, "the newest of A")
	require.Equal(t, "state/runs/B/events.jsonl", p1.NextCursor)
	r = a.call(methodImportCheckpoints, map[string]any{"source": "picrew", "cursor": p1.NextCursor})
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &p2))
	require.Len(t, p2.Checkpoints, 1)
	require.Empty(t, p2.NextCursor)
	require.Equal(t, "state/runs/C/events.jsonl", p2.Checkpoints[0].Path)
	a.fails(methodImportCheckpoints, map[string]any{"source": "picrew", "limit": 1001}, wire.CodeBadParams)
	// Checkpoints change no read model.
	f.eng.Read(func(s *projections.State) {
		_, ok := s.Run(events.ImportStream)
		require.False(t, ok)
	})
}

// recordCheckpoints records n import checkpoints of 300 files through a, an admin's connection, MaxImportWrites
// (n a multiple of it) to a call.
func recordCheckpoints(t *testing.T, a *client, n int) {
	t.Helper()
	for from := 0; from < n; from += MaxImportWrites {
		writes := make([]any, 0, MaxImportWrites)
		for i := from; i < from+MaxImportWrites; i++ {
			writes = append(writes, importWriteOf("import:ck"+itoa(int64(i)), events.ImportStream, importEventOf(events.TypeImportCheckpoint, 0,
				map[string]any{"source": "picrew", "path": "state/runs/R" + itoa(int64(i%300)) + "/events.jsonl", "offset": i, "size": i})))
		}
		var res importResults
		r := a.call(methodImportAppend, map[string]any{"source": "picrew", "writes": writes})
		require.Nil(t, r.Error)
		require.NoError(t, json.Unmarshal(r.Result, &res))
		for _, w := range res.Results {
			require.Nil(t, w.Error)
		}
	}
}

// TestImportCheckpointsViewWaitsForSpace: a read of the checkpoints that folded enough of them to save their view
// saves none while the disk is below its minimum, and is answered all the same: the space left is the log's, and a
// write that the full disk refuses fails the log stop, so a read (a follower starting) could stop crewd, where every
// command is answered disk-full and no snapshot is saved. Once there is space again, the next such read saves it.
func TestImportCheckpointsViewWaitsForSpace(t *testing.T) {
	release := make(chan struct{})
	disk := &diskGauge{}
	// NB: the feed is held: it would save the view itself once it had followed enough checkpoints.
	f := newFixture(t, fixtureOpts{space: disk, feedStarting: func() { <-release }})
	defer close(release)
	a := f.dial()
	a.helloAdmin()
	recordCheckpoints(t, a, projections.ImportViewEvery)
	read := func() {
		t.Helper()
		var pg importCheckpointsResult
		r := a.call(methodImportCheckpoints, map[string]any{"source": "picrew"})
		require.Nil(t, r.Error, "the checkpoints are read")
		require.NoError(t, json.Unmarshal(r.Result, &pg))
		require.Len(t, pg.Checkpoints, 300)
	}

	disk.full.Store(true)
	read()
	_, _, err := f.log.View(events.ImportStream)
	require.ErrorIs(t, err, eventlog.ErrNotFound, "no view saved below the free-space minimum")

	disk.full.Store(false)
	read()
	_, _, err = f.log.View(events.ImportStream)
	require.NoError(t, err, "the view saved once there is space")
}

// TestImportCheckpointsKeepAView: once enough checkpoints are recorded, the feed saves their view in the background,
// so a follower starting later reads the view and the few recorded after it; the answer is the fold of the whole
// stream's, page by page.
func TestImportCheckpointsKeepAView(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	a := f.dial()
	a.helloAdmin()
	n := projections.ImportViewEvery + MaxImportWrites
	recordCheckpoints(t, a, n)
	require.Eventually(t, func() bool {
		_, _, err := f.log.View(events.ImportStream)
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "the feed saves the view")
	set, err := projections.LoadImportCheckpoints(context.Background(), f.log)
	require.NoError(t, err)
	require.Less(t, set.Folded, projections.ImportViewEvery, "a read folds the view and what came after it")

	var listed []events.ImportCheckpoint
	params := map[string]any{"source": "picrew", "limit": 7}
	seen := cursorsSeen{}
	for {
		var pg struct {
			Checkpoints []events.ImportCheckpoint `json:"checkpoints"`
			NextCursor  string                    `json:"nextCursor"`
		}
		r := a.call(methodImportCheckpoints, params)
		require.Nil(t, r.Error)
		require.NoError(t, json.Unmarshal(r.Result, &pg))
		listed = append(listed, pg.Checkpoints...)
		if pg.NextCursor == "" {
			break
		}
		seen.follow(t, pg.NextCursor, methodImportCheckpoints)
		params["cursor"] = pg.NextCursor
	}
	require.Len(t, listed, 300)
	newest := map[string]int64{}
	for i := range n {
		newest["state/runs/R"+itoa(int64(i%300))+"/events.jsonl"] = int64(i)
	}
	for _, c := range listed {
		require.Equal(t, newest[c.Path], c.Offset, c.Path)
	}

	// A store whose view is lost (or predates views): the first read folds the whole stream and saves one.
	pos, _, err := f.log.View(events.ImportStream)
	require.NoError(t, err)
	require.NoError(t, f.log.SaveView(events.ImportStream, pos, []byte("lost")))
	again := a.ok(methodImportCheckpoints, map[string]any{"source": "picrew", "limit": 1000})
	require.Len(t, again["checkpoints"], 300)
	set, err = projections.LoadImportCheckpoints(context.Background(), f.log)
	require.NoError(t, err)
	require.Zero(t, set.Folded, "the read saved a view of the whole stream")
}

// TestImportAppendCannotClaimTheEngineClocksIDs: an import write's commandId is recorded under the engine's
// principal, the namespace the engine clock's expiries use too. An import that recorded an outcome under an
// expiry's id ("expire:<run>:<subId>") would answer that expiry at every tick with commandid-reused, so the
// delegation would never time out and would hold its daemon-wide slot for good; an import's ids are the import's
// namespace (import:…) alone.
func TestImportAppendCannotClaimTheEngineClocksIDs(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	p := f.dial()
	p.hello(runR, taskP, s.p)
	sub := p.ok("delegate.request", map[string]any{"prompt": "p", "description": "d", "timeoutSec": 60})["grandchildTaskRef"].(string)

	a := f.dial()
	a.helloAdmin()
	const run = "team_20261201120000_0000000000000002"
	for _, id := range []string{"expire:" + runR + ":" + sub, "ask-expire:" + runR + ":q", "migrate:9:next", "x"} {
		a.fails(methodImportAppend, map[string]any{"source": "picrew", "writes": []any{importWriteOf(id, run,
			importEventOf(events.TypeRunCreated, 1790928000000, map[string]any{"team": "core", "goal": "g", "cwd": "/srv"}))}},
			wire.CodeBadParams)
	}

	f.clock.Add(int64(10 * time.Minute))
	require.Equal(t, 1, f.eng.Tick(context.Background()))
	f.eng.Read(func(st *projections.State) {
		d, ok := st.Delegation(runR, sub)
		require.True(t, ok)
		require.Equal(t, projections.DelegationTimedOut, d.Status)
	})
}

// spaceAfter is the engine's free-space check, full once it has been asked left more times.
type spaceAfter struct{ left atomic.Int64 }

func (g *spaceAfter) CheckSpace() error {
	if g.left.Add(-1) < 0 {
		return fmt.Errorf("the test's disk is full")
	}
	return nil
}

// TestImportAppendDiskFullDecidesNoneOfTheWrites: the disk fills while a batch is taken in, after its first write;
// the call is answered disk-full and none of its writes is recorded, as the protocol says, where the first was
// recorded under that answer. Sent again once there is room, every write is decided once.
func TestImportAppendDiskFullDecidesNoneOfTheWrites(t *testing.T) {
	g := &spaceAfter{}
	g.left.Store(1 << 30)
	f := newFixture(t, fixtureOpts{space: g})
	a := f.dial()
	a.helloAdmin()
	const run = "team_20261201120000_0000000000000003"
	writes := []map[string]any{
		importRunWriteOf(run),
		importProgressWriteOf(run, 7),
		importProgressWriteOf(run, 8),
	}
	params := map[string]any{"source": "picrew", "writes": writes}
	head, _ := f.log.Head()
	g.left.Store(1)
	a.fails(methodImportAppend, params, wire.CodeDiskFull)
	after, _ := f.log.Head()
	require.Equal(t, head, after, "a disk-full decides none of the writes")
	f.eng.Read(func(st *projections.State) {
		_, ok := st.Run(run)
		require.False(t, ok)
	})

	g.left.Store(1 << 30)
	var res importResults
	r := a.call(methodImportAppend, params)
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &res))
	require.Len(t, res.Results, 3)
	for _, w := range res.Results {
		require.Nil(t, w.Error, w.CommandID)
		require.False(t, w.Replayed, w.CommandID)
		require.Equal(t, 1, w.Appended, w.CommandID)
	}
}
