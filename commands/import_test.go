package commands

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

func importOf(run, id string, typ string, payload any) Request {
	return importWrite(run, id, ImportedEvent{Type: typ, TimeMs: 1000, Payload: payload})
}

// importWrite is the import of evs into run under command id id, as the follower sends it.
func importWrite(run, id string, evs ...ImportedEvent) Request {
	return Request{Principal: events.EnginePrincipal(), CommandID: id, Actor: admin,
		Command: &Import{Source: events.ForeignSourcePicrew, RunID: run, Events: evs}}
}

// TestSubmitAllDecidesInOrder: a batch whose writes depend on each other (a run, then its task) is decided in the
// order given; the same batch again is answered from the recorded outcomes, appending nothing.
func TestSubmitAllDecidesInOrder(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	batch := []Request{
		importOf("R", "import:R:run", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}),
		importOf("R", "import:R:task:T", events.TypeTaskCreated,
			&events.TaskCreated{TaskID: "T", Role: "executor", StepID: "s", Kind: events.TaskKindWorkflow}),
		importOf("R", "import:R:seq:3", events.TypeTaskStarted, &events.TaskStarted{TaskID: "T"}),
	}
	replies, err := f.eng.SubmitAll(context.Background(), batch)
	require.NoError(t, err)
	require.Len(t, replies, 3)
	for _, r := range replies {
		require.Nil(t, r.Rejected)
		require.False(t, r.Replayed)
	}
	head := f.eng.Head()
	f.eng.Read(func(s *projections.State) {
		task, ok := s.Task("R", "T")
		require.True(t, ok)
		require.Equal(t, "running", string(task.Status))
	})
	again, err := f.eng.SubmitAll(context.Background(), batch)
	require.NoError(t, err)
	for _, r := range again {
		require.True(t, r.Replayed)
	}
	require.Equal(t, head, f.eng.Head(), "nothing appended twice")

	// A request refused before it is queued refuses the batch: none of it is sent.
	bad := append(batch[:1:1], Request{CommandID: "x", Command: batch[1].Command})
	replies, err = f.eng.SubmitAll(context.Background(), bad)
	require.ErrorContains(t, err, "a command id needs a principal")
	require.Empty(t, replies)
}

// spaceFor is a free-space check that reports low space once it has been asked left times.
type spaceFor struct{ left atomic.Int64 }

func (g *spaceFor) CheckSpace() error {
	if g.left.Add(-1) < 0 {
		return errLowSpace
	}
	return nil
}

// TestSubmitAllLowSpaceRefusesTheWholeBatch: space runs low while a batch is taken in, after its first request; the
// batch is refused ErrNoSpace with none of it decided, where its first request was recorded under that refusal.
func TestSubmitAllLowSpaceRefusesTheWholeBatch(t *testing.T) {
	guard := &spaceFor{}
	guard.left.Store(1 << 30)
	f := openEngineWith(t, vfs.NewMem(), newTestClock(), Options{Space: guard})
	batch := []Request{
		importOf("R", "import:R:run", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}),
		importOf("R", "import:R:task:T", events.TypeTaskCreated, &events.TaskCreated{TaskID: "T", Role: "executor",
			StepID: "s", Kind: events.TaskKindWorkflow}),
	}
	head := f.eng.Head()
	guard.left.Store(1)
	replies, err := f.eng.SubmitAll(context.Background(), batch)
	require.ErrorIs(t, err, ErrNoSpace)
	require.Empty(t, replies)
	require.Equal(t, head, f.eng.Head(), "nothing decided")
	f.eng.Read(func(s *projections.State) {
		_, ok := s.Run("R")
		require.False(t, ok)
	})
}

// TestImportRefuses: only a runtime's history is importable, into a run that exists (or that the write creates) and
// no orchestrator serves, in writes of 1..MaxImportEvents events at times an event carries. Each write breaks one
// bound alone, is refused naming it, and records nothing; a write at each bound is taken.
func TestImportRefuses(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	run := &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}
	r, err := f.eng.Submit(context.Background(), importWrite("E", "import:E:run",
		ImportedEvent{Type: events.TypeRunCreated, TimeMs: 1000, Payload: run},
		ImportedEvent{Type: events.TypeTaskCreated, TimeMs: 1000, Payload: &events.TaskCreated{TaskID: "T",
			Role: "executor", StepID: "s", Kind: events.TaskKindWorkflow}}))
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	head := f.eng.Head()

	tasks := func(n int) []ImportedEvent {
		evs := make([]ImportedEvent, n)
		for i := range evs {
			evs[i] = ImportedEvent{Type: events.TypeTaskCreated, TimeMs: 1000, Payload: &events.TaskCreated{
				TaskID: fmt.Sprint("T", i), Role: "executor", StepID: "s", Kind: events.TaskKindWorkflow}}
		}
		return evs
	}
	at := func(id string, timeMs int64) Request {
		return importWrite("E", id, ImportedEvent{Type: events.TypeTaskStarted, TimeMs: timeMs,
			Payload: &events.TaskStarted{TaskID: "T"}})
	}
	checkpoint := &events.ImportCheckpoint{Source: events.ForeignSourcePicrew, Path: "p", Offset: 10, Size: 10,
		Lines: 1}
	notImportable := func(typ string) string { return fmt.Sprintf("event 0: type %q cannot be imported", typ) }
	badRunID := fmt.Sprintf("runId must be 1..%d chars of [A-Za-z0-9_-]", MaxRunIDChars)
	eventCount := fmt.Sprintf("a write carries 1..%d events", MaxImportEvents)
	eventTime := fmt.Sprintf("event 0: time must be 0..%d (unix ms)", int64(maxImportTimeMs))
	onlyCheckpoints := "import.checkpoint goes to " + events.ImportStream + ", and only it"
	for name, c := range map[string]struct {
		req  Request
		code string
		want string
	}{
		"no run": {importOf("R", "a", events.TypeTaskStarted, &events.TaskStarted{TaskID: "T"}), CodeNoManifest,
			`run "R" not found`},
		"credential": {importOf("E", "b", events.TypeCredentialIssued, &events.CredentialIssued{TaskID: "T"}),
			CodeBadParams, notImportable(events.TypeCredentialIssued)},
		"engine config": {importOf("E", "c", events.TypeEngineConfigured, &events.EngineConfigured{}),
			CodeBadParams, notImportable(events.TypeEngineConfigured)},
		"wrong payload": {importOf("R", "d", events.TypeRunCreated, &events.TaskStarted{}), CodeBadParams,
			"event 0: payload is not a run.created"},
		// NB: without a command id: a request with one is fingerprinted before it is decided, which a payload
		// that is none fails (an error, not a refusal).
		"no payload": {importOf("R", "", events.TypeRunCreated, nil), CodeBadParams,
			"event 0: payload is not a run.created"},
		"checkpoint in run": {importOf("E", "e", events.TypeImportCheckpoint, checkpoint), CodeBadParams,
			onlyCheckpoints},
		"run in $import": {importOf(events.ImportStream, "f", events.TypeRunCreated, run), CodeBadParams,
			onlyCheckpoints},
		"bad run id": {importOf("R/1", "g", events.TypeRunCreated, run), CodeBadParams, badRunID},
		"long run id": {importOf(strings.Repeat("r", MaxRunIDChars+1), "g0", events.TypeRunCreated, run),
			CodeBadParams, badRunID},
		"no events":           {importWrite("E", "h"), CodeBadParams, eventCount},
		"one too many events": {importWrite("E", "i", tasks(MaxImportEvents+1)...), CodeBadParams, eventCount},
		"before 1970":         {at("j", -1), CodeBadParams, eventTime},
		"past 2255":           {at("k", maxImportTimeMs+1), CodeBadParams, eventTime},
		"run again":           {importOf("E", "l", events.TypeRunCreated, run), CodeBadParams, `run "E" exists`},
	} {
		r, err := f.eng.Submit(context.Background(), c.req)
		require.NoError(t, err, name)
		require.NotNil(t, r.Rejected, name)
		require.Equal(t, c.code, r.Rejected.Code, name)
		require.Contains(t, r.Rejected.Error(), c.want, name)
	}
	require.Equal(t, head, f.eng.Head(), "nothing recorded")

	for name, req := range map[string]Request{
		"the longest run id":     importOf(strings.Repeat("r", MaxRunIDChars), "m", events.TypeRunCreated, run),
		"MaxImportEvents events": importWrite("E", "n", tasks(MaxImportEvents)...),
		"the latest time":        at("o", maxImportTimeMs),
		"time 0":                 at("p", 0), // the engine clock's
	} {
		r, err := f.eng.Submit(context.Background(), req)
		require.NoError(t, err, name)
		require.Nil(t, r.Rejected, name)
	}
}

// TestImportRefusesAnImpossibleCheckpoint: a checkpoint no import writes (a negative offset: a follower would resume
// reading there) is refused before it is recorded, by value or by pointer, as a reader of the log would refuse it;
// a possible one is recorded.
func TestImportRefusesAnImpossibleCheckpoint(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	bad := events.ImportCheckpoint{Source: events.ForeignSourcePicrew, Path: "state/runs/r/events.jsonl", Offset: -1}
	for name, payload := range map[string]any{"pointer": &bad, "struct": bad} {
		r, err := f.eng.Submit(context.Background(),
			importOf(events.ImportStream, "ck-"+name, events.TypeImportCheckpoint, payload))
		require.NoError(t, err, name)
		require.NotNil(t, r.Rejected, name)
		require.Equal(t, CodeBadParams, r.Rejected.Code, name)
		require.Contains(t, r.Rejected.Error(), "offset -1 is negative", name)
	}
	require.Zero(t, f.eng.Head(), "nothing recorded")
	good := bad
	good.Offset, good.Size, good.Lines = 10, 10, 1
	r, err := f.eng.Submit(context.Background(),
		importOf(events.ImportStream, "ck-good", events.TypeImportCheckpoint, &good))
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
}

// TestImportRefusesACheckpointPathNoPageEndsOn: import.checkpoints pages by path, handing a page's last path back as
// its cursor, so a checkpoint's path is one that cursor takes and JSON carries back unchanged: 1..4096 code points of
// UTF-8. Any other is refused before it is recorded, by value or by pointer, naming the bound.
func TestImportRefusesACheckpointPathNoPageEndsOn(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	longest := strings.Repeat("é", events.MaxImportPathChars)
	for name, c := range map[string]struct {
		path string
		ok   bool
	}{
		"one char":              {"p", true},
		"4096 chars of 2 bytes": {longest, true},
		"empty":                 {"", false},
		"4097 chars":            {longest + "x", false},
		"not UTF-8":             {"state/runs/\xff/events.jsonl", false},
		"4096 chars, not UTF-8": {longest[:len(longest)-2] + "\xff", false},
	} {
		ck := events.ImportCheckpoint{Source: events.ForeignSourcePicrew, Path: c.path}
		for form, payload := range map[string]any{"pointer": &ck, "struct": ck} {
			r, err := f.eng.Submit(context.Background(),
				importOf(events.ImportStream, "ck-"+name+"-"+form, events.TypeImportCheckpoint, payload))
			require.NoError(t, err, name)
			if c.ok {
				require.Nil(t, r.Rejected, "%s %s", name, form)
				continue
			}
			require.NotNil(t, r.Rejected, "%s %s", name, form)
			require.Equal(t, CodeBadParams, r.Rejected.Code, name)
			require.Contains(t, r.Rejected.Error(), "path must be 1..4096 chars of UTF-8", name)
		}
	}
}

// TestImportedAdmissionDeadline: an imported delegate.admitted with a timeout and no deadline (its importer left its
// time to the daemon) gets the deadline of an admission recorded when it is: its time plus the timeout, and not 0,
// which the engine's expiry would end at once. A deadline given within the bound is kept; one past what an event
// carries is refused, a timeout past the longest a delegation runs counts as that longest; the importer's payload is
// not changed.
func TestImportedAdmissionDeadline(t *testing.T) {
	const now = int64(1790000000000)
	decide := func(timeMs int64, a *events.DelegateAdmitted) (*events.DelegateAdmitted, error) {
		d, err := Decide(projections.New(), &Import{Source: events.ForeignSourcePicrew, RunID: "r1",
			Events: []ImportedEvent{
				{Type: events.TypeRunCreated, TimeMs: timeMs, Payload: &events.RunCreated{}},
				{Type: events.TypeDelegateAdmitted, TimeMs: timeMs, Payload: a}}},
			Env{Now: now * 1e6, CommandID: "c1", NewID: func() string { return "x" }})
		if err != nil {
			return nil, err
		}
		return d.Events[1].Payload.(*events.DelegateAdmitted), nil
	}
	for name, tc := range map[string]struct {
		timeMs   int64
		in       events.DelegateAdmitted
		deadline int64
	}{
		"at the daemon's clock": {0, events.DelegateAdmitted{TaskID: "T", SubID: "s", TimeoutSec: 60}, now + 60_000},
		"at its own time":       {1000, events.DelegateAdmitted{TaskID: "T", SubID: "s", TimeoutSec: 1.5}, 2500},
		"a deadline given": {0, events.DelegateAdmitted{TaskID: "T", SubID: "s", TimeoutSec: 60,
			Deadline: 7}, 7},
		"no timeout": {0, events.DelegateAdmitted{TaskID: "T", SubID: "s"}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			in := tc.in
			got, err := decide(tc.timeMs, &in)
			require.NoError(t, err)
			require.Equal(t, tc.deadline, got.Deadline)
			require.Equal(t, tc.in, in, "the importer's payload is its own")
		})
	}
	for _, timeout := range []float64{1e300, math.Inf(1)} {
		got, err := decide(0, &events.DelegateAdmitted{TaskID: "T", SubID: "s", TimeoutSec: timeout})
		require.NoError(t, err)
		require.Equal(t, now+MaxTimeoutSec*1000, got.Deadline, "the longest a delegation runs")
	}
	for _, deadline := range []int64{-1, math.MaxInt64, 9e12 + 1} {
		_, err := decide(0, &events.DelegateAdmitted{TaskID: "T", SubID: "s", Deadline: deadline})
		require.ErrorContains(t, err, fmt.Sprintf("deadline %d is not a time", deadline))
	}
}

// TestImportedAdmissionHoldsItsSlotNoLongerThanADelegationRuns: an imported delegate.admitted takes a slot of the
// daemon-wide pool until the engine clock times it out at its deadline plus the grace, and a deadline far in the
// future (a damaged or forged file, up to 2255, or a timeoutSec no delegation may have) held that slot until then,
// every other run's delegate.request refused slots-exhausted meanwhile. The import records at most MaxTimeoutSec
// after the time the event is recorded at, the longest a delegation runs (timeout-invalid beyond, as the one-shot
// import's plan caps it), or after the engine clock when the event's time is later (the source writes it too); a
// deadline within it is kept.
func TestImportedAdmissionHoldsItsSlotNoLongerThanADelegationRuns(t *testing.T) {
	const now = int64(1790000000000)
	const bound = MaxTimeoutSec * 1000
	for name, tc := range map[string]struct {
		timeMs int64
		in     events.DelegateAdmitted
		want   int64
	}{
		"within the bound": {1000, events.DelegateAdmitted{TaskID: "T", SubID: "s", Deadline: 1000 + 60_000},
			1000 + 60_000},
		"at the bound": {1000, events.DelegateAdmitted{TaskID: "T", SubID: "s", Deadline: 1000 + bound},
			1000 + bound},
		"past the bound": {1000, events.DelegateAdmitted{TaskID: "T", SubID: "s", Deadline: 1000 + bound + 1},
			1000 + bound},
		"the latest time": {1000, events.DelegateAdmitted{TaskID: "T", SubID: "s", Deadline: 9e12},
			1000 + bound},
		"at the daemon's clock": {0, events.DelegateAdmitted{TaskID: "T", SubID: "s", Deadline: 9e12}, now + bound},
		"a timeout past it": {1000, events.DelegateAdmitted{TaskID: "T", SubID: "s", TimeoutSec: 1e9},
			1000 + bound},
		"a timeout at the clock": {0, events.DelegateAdmitted{TaskID: "T", SubID: "s", TimeoutSec: MaxTimeoutSec + 1},
			now + bound},
		"before it was recorded": {5000, events.DelegateAdmitted{TaskID: "T", SubID: "s", Deadline: 1000}, 1000},
		"a timeout within it": {1000, events.DelegateAdmitted{TaskID: "T", SubID: "s", TimeoutSec: 60},
			1000 + 60_000},
		// A time the source wrote ahead of the engine clock (up to 2255) moved the bound with it.
		"ahead of the clock": {8e12, events.DelegateAdmitted{TaskID: "T", SubID: "s",
			Deadline: 8e12 + 60_000}, now + bound},
		"a timeout, ahead of the clock": {8e12, events.DelegateAdmitted{TaskID: "T", SubID: "s", TimeoutSec: 60},
			now + 60_000},
	} {
		t.Run(name, func(t *testing.T) {
			in := tc.in
			s := projections.New()
			d, err := Decide(s, &Import{Source: events.ForeignSourcePicrew, RunID: "r1", Events: []ImportedEvent{
				{Type: events.TypeRunCreated, TimeMs: tc.timeMs, Payload: &events.RunCreated{}},
				{Type: events.TypeDelegateAdmitted, TimeMs: tc.timeMs, Payload: &in}}},
				Env{Now: now * 1e6, CommandID: "c1", NewID: func() string { return "x" }})
			require.NoError(t, err)
			require.Equal(t, tc.in, in, "the importer's payload is its own")
			require.Equal(t, tc.want, d.Events[1].Payload.(*events.DelegateAdmitted).Deadline)
			for i, ev := range d.Events {
				ev.Position = uint64(i + 1)
				projections.Apply(s, ev)
			}
			at := ExpiresAt(projections.Delegation{Deadline: tc.want}, s.Config())
			require.Empty(t, DueExpiries(s, at-1), "not before its deadline and grace")
			require.Equal(t, []Command{&DelegateExpire{RunID: "r1", SubID: "s"}}, DueExpiries(s, at),
				"the engine clock frees the slot at its deadline and grace")
		})
	}
}

// TestImportedSlotRefusalWaitsNoLongerThanSlotWait: a run refused a slot counts as waiting for one, and holds every
// other run to its share meanwhile, for SlotWaitSec after the refusal's time. An imported refusal's time is the
// source's, and any up to 2255 was recorded as written, so one line dated ahead of the engine clock kept its run
// waiting, and every other run held to its share, until then. An imported event is recorded at the engine clock at
// the latest.
func TestImportedSlotRefusalWaitsNoLongerThanSlotWait(t *testing.T) {
	const now = int64(1790000000000)
	for name, timeMs := range map[string]int64{"now": now, "ahead of the clock": 8e12} {
		t.Run(name, func(t *testing.T) {
			s := projections.New()
			d, err := Decide(s, &Import{Source: events.ForeignSourcePicrew, RunID: "r1", Events: []ImportedEvent{
				{Type: events.TypeRunCreated, TimeMs: now, Payload: &events.RunCreated{}},
				{Type: events.TypeRunRunning, TimeMs: now, Payload: &events.RunRunning{}},
				{Type: events.TypeDelegateRejected, TimeMs: timeMs,
					Payload: &events.DelegateRejected{TaskID: "T", SubID: "s1",
						Reason: events.ReasonSlotsExhausted}}}},
				Env{Now: now * 1e6, CommandID: "c1", NewID: func() string { return "x" }})
			require.NoError(t, err)
			for i, ev := range d.Events {
				ev.Position = uint64(i + 1)
				projections.Apply(s, ev)
			}
			wait := int64(s.Config().SlotWaitSec) * 1000
			require.Equal(t, 1, s.SlotWaiters("r2", now, wait, 1), "refused a slot now, it waits for one")
			require.Zero(t, s.SlotWaiters("r2", now+wait+1, wait, 1), "it waits no longer than SlotWaitSec")
		})
	}
}

// TestImportSourceIsCountedInChars: a source is bounded in chars, as the broker's import.append counts its param, so
// one of 64 two-byte chars the broker accepts is not refused by the engine; 65, or one that is not UTF-8, is.
func TestImportSourceIsCountedInChars(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	for i, c := range []struct {
		source string
		ok     bool
	}{
		{strings.Repeat("é", MaxImportSourceChars), true},
		{strings.Repeat("é", MaxImportSourceChars+1), false},
		{"", false},
		{"pi\xffcrew", false},
	} {
		req := importOf("R", fmt.Sprintf("src-%d", i), events.TypeRunCreated,
			&events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"})
		req.Command.(*Import).Source = c.source
		r, err := f.eng.Submit(context.Background(), req)
		require.NoError(t, err, c.source)
		if !c.ok {
			require.NotNil(t, r.Rejected, "%q", c.source)
			require.Contains(t, r.Rejected.Error(), "source must be 1..64 chars")
			continue
		}
		require.Nil(t, r.Rejected, "%q", c.source)
	}
}

// TestImportRefusesASubIdAlreadyAdmitted: the slot pool is keyed by subId, so an imported delegate.admitted whose
// subId holds a slot (for another run, or its own), or names a delegation of its run already (settled or not), or
// comes twice in one write, is refused with nothing recorded: taken, it would move another run's slot to this run,
// and its settlement would free it, and the snapshot of the state would not read back. A subId whose delegation
// another run settled holds no slot, and may be imported.
func TestImportRefusesASubIdAlreadyAdmitted(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	admitted := func(sub string) *events.DelegateAdmitted {
		return &events.DelegateAdmitted{TaskID: "T", SubID: sub, ChildDepth: 2, Role: "explorer", Unmetered: true}
	}
	submit := func(run, id string, evs ...ImportedEvent) *RejectedError {
		r, err := f.eng.Submit(context.Background(), Request{Principal: events.EnginePrincipal(), CommandID: id,
			Actor: admin, Command: &Import{Source: events.ForeignSourcePicrew, RunID: run, Events: evs}})
		require.NoError(t, err)
		return r.Rejected
	}
	for _, run := range []string{"A", "B"} {
		require.Nil(t, submit(run, "run:"+run, ImportedEvent{Type: events.TypeRunCreated, TimeMs: 1000,
			Payload: &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}}))
	}
	require.Nil(t, submit("A", "A:held", ImportedEvent{Type: events.TypeDelegateAdmitted, TimeMs: 1000,
		Payload: admitted("gc-held")}))
	require.Nil(t, submit("A", "A:settled", ImportedEvent{Type: events.TypeDelegateAdmitted, TimeMs: 1000,
		Payload: admitted("gc-settled")}, ImportedEvent{Type: events.TypeDelegateCompleted, TimeMs: 1000,
		Payload: &events.DelegateCompleted{TaskID: "T", SubID: "gc-settled", OK: true}}))
	head := f.eng.Head()

	for name, c := range map[string]struct {
		run string
		evs []ImportedEvent
	}{
		"held by another run": {"B", []ImportedEvent{{Type: events.TypeDelegateAdmitted, TimeMs: 1000,
			Payload: admitted("gc-held")}}},
		"held by its own run": {"A", []ImportedEvent{{Type: events.TypeDelegateAdmitted, TimeMs: 1000,
			Payload: admitted("gc-held")}}},
		"settled in its own run": {"A", []ImportedEvent{{Type: events.TypeDelegateAdmitted, TimeMs: 1000,
			Payload: admitted("gc-settled")}}},
		"twice in one write": {"B", []ImportedEvent{
			{Type: events.TypeDelegateAdmitted, TimeMs: 1000, Payload: admitted("gc-twice")},
			{Type: events.TypeDelegateAdmitted, TimeMs: 1000, Payload: *admitted("gc-twice")}}},
	} {
		rej := submit(c.run, "refused:"+name, c.evs...)
		require.NotNil(t, rej, name)
		require.Equal(t, CodeBadParams, rej.Code, name)
		require.Contains(t, rej.Error(), "was admitted already", name)
	}
	require.Equal(t, head, f.eng.Head(), "a refusal records nothing")
	f.eng.Read(func(s *projections.State) {
		holder, ok := s.SlotHolder("gc-held")
		require.True(t, ok)
		require.Equal(t, "A", holder, "the slot stays its run's")
	})

	require.Nil(t, submit("B", "B:settled", ImportedEvent{Type: events.TypeDelegateAdmitted, TimeMs: 1000,
		Payload: admitted("gc-settled")}), "another run settled it: it holds no slot")
}

// TestImportDoesNotWriteToARunServedThroughTheSocket: a run that has an orchestrator credential was created
// through the socket (an import records no credential), and its principals decide what it records. A follower of
// files that name the same run id — a crew root whose runtime also talks to crewd, or a worker that wrote a run
// directory under that name — would otherwise write into it as the admin: tasks, messages, a run's end. The writes
// are refused alone, with nothing recorded; a run the import created takes them.
func TestImportDoesNotWriteToARunServedThroughTheSocket(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.do(&RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w", OrchestratorDigest: strings.Repeat("cd", 32)})
	r, err := f.eng.Submit(context.Background(), importOf("I", "import:I:run", events.TypeRunCreated,
		&events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}))
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	head := f.eng.Head()
	for name, ie := range map[string]ImportedEvent{
		"a task": {Type: events.TypeTaskCreated, TimeMs: 1000, Payload: &events.TaskCreated{TaskID: "T",
			Role: "executor", StepID: "s", Kind: events.TaskKindWorkflow}},
		"the run's end": {Type: events.TypeRunCompleted, TimeMs: 1000, Payload: &events.RunCompleted{}},
		"its creation":  {Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{Team: "t"}},
	} {
		r, err := f.eng.Submit(context.Background(), Request{Principal: events.EnginePrincipal(),
			CommandID: "import:R:" + name, Actor: admin,
			Command: &Import{Source: events.ForeignSourcePicrew, RunID: "R", Events: []ImportedEvent{ie}}})
		require.NoError(t, err, name)
		require.NotNil(t, r.Rejected, name)
		require.Equal(t, CodeBadParams, r.Rejected.Code, name)
		require.Contains(t, r.Rejected.Error(), `run "R" is served through the socket`, name)
	}
	require.Equal(t, head, f.eng.Head(), "nothing recorded")
	r, err = f.eng.Submit(context.Background(), importOf("I", "import:I:task:T", events.TypeTaskCreated,
		&events.TaskCreated{TaskID: "T", Role: "executor", StepID: "s", Kind: events.TaskKindWorkflow}))
	require.NoError(t, err)
	require.Nil(t, r.Rejected, "a run the import created")
}

// TestImportedAskDeadline: pi-crew's broker clamps a question's deadline to at most 3600 s after it is asked (R5); an
// import carries the deadline its source wrote, and one far in the future (a damaged or forged file, up to 2255)
// kept the question pending — its run hot and parked, its task waiting — until then, since only the engine clock
// ends a question nobody answers. The import records at most the clamp, counted from the time the event is recorded
// at, or from the engine clock when that time is later; a deadline within it is kept.
func TestImportedAskDeadline(t *testing.T) {
	const now = int64(1790000000000)
	const bound = MaxAskTimeoutSec * 1000
	decide := func(timeMs, deadline int64) (*projections.State, *events.TaskWaiting, *events.AskRequested) {
		waiting := &events.TaskWaiting{TaskID: "t1", QuestionID: "q1", AskedAt: timeMs, Deadline: deadline}
		asked := &events.AskRequested{TaskID: "t1", QuestionID: "q1", Question: "?", AskedAt: timeMs,
			Deadline: deadline}
		s := projections.New()
		d, err := Decide(s, &Import{Source: events.ForeignSourcePicrew, RunID: "r1", Events: []ImportedEvent{
			{Type: events.TypeRunCreated, TimeMs: timeMs, Payload: &events.RunCreated{}},
			{Type: events.TypeRunRunning, TimeMs: timeMs, Payload: &events.RunRunning{}},
			{Type: events.TypeTaskCreated, TimeMs: timeMs,
				Payload: &events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow}},
			{Type: events.TypeTaskStarted, TimeMs: timeMs, Payload: &events.TaskStarted{TaskID: "t1"}},
			{Type: events.TypeTaskWaiting, TimeMs: timeMs, Payload: waiting},
			{Type: events.TypeAskRequested, TimeMs: timeMs, Payload: asked}}},
			Env{Now: now * 1e6, CommandID: "c1", NewID: func() string { return "x" }})
		require.NoError(t, err)
		require.Equal(t, deadline, waiting.Deadline, "the importer's payload is its own")
		require.Equal(t, deadline, asked.Deadline, "the importer's payload is its own")
		for i, ev := range d.Events {
			ev.Position = uint64(i + 1)
			projections.Apply(s, ev)
		}
		return s, d.Events[4].Payload.(*events.TaskWaiting), d.Events[5].Payload.(*events.AskRequested)
	}
	for name, tc := range map[string]struct {
		timeMs, in, want int64
	}{
		"within the clamp":        {1000, 1000 + 600_000, 1000 + 600_000},
		"at the clamp":            {1000, 1000 + bound, 1000 + bound},
		"past the clamp":          {1000, 1000 + bound + 1, 1000 + bound},
		"the latest time":         {1000, 9e12, 1000 + bound},
		"at the daemon's clock":   {0, 9e12, now + bound},
		"already past":            {1000, 0, 0},
		"before it was recorded":  {5000, 1000, 1000},
		"the largest int64 ahead": {1000, math.MaxInt64, 1000 + bound},
		"ahead of the clock":      {8e12, 8e12 + 600_000, now + bound},
	} {
		t.Run(name, func(t *testing.T) {
			s, waiting, asked := decide(tc.timeMs, tc.in)
			require.Equal(t, tc.want, asked.Deadline)
			require.Equal(t, tc.want, waiting.Deadline, "the task's park marker shows the question's deadline")
			due := DueExpiries(s, tc.want)
			require.Len(t, due, 1, "the engine clock ends the question at its deadline")
			require.Equal(t, &AskExpire{RunID: "r1", QuestionID: "q1"}, due[0])
		})
	}
}

// importFolded decides an import.append of evs into run r1 of an empty state and folds what it records: the state
// after it, and its refusal.
func importFolded(evs ...ImportedEvent) (*projections.State, error) {
	s := projections.New()
	d, err := Decide(s, &Import{Source: events.ForeignSourcePicrew, RunID: "r1", Events: evs},
		Env{Now: 2000 * 1e6, CommandID: "c1", NewID: func() string { return "x" }})
	for i, ev := range d.Events {
		ev.Position = uint64(i + 1)
		projections.Apply(s, ev)
	}
	return s, err
}

// TestImportedUsageIsACount: an imported task.usage is held to the counters task.usage itself takes (0..
// MaxUsageTokens, a cost that is a finite number ≥ 0), by value or by pointer: a negative one, recorded, lowered
// the run's budget use (Σ of its tasks' usage) below what its other tasks spent, and the run's budget abort with it.
func TestImportedUsageIsACount(t *testing.T) {
	decide := func(u any) (*projections.State, error) {
		return importFolded(
			ImportedEvent{Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{}},
			ImportedEvent{Type: events.TypeTaskCreated, TimeMs: 1000,
				Payload: &events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow}},
			ImportedEvent{Type: events.TypeTaskCreated, TimeMs: 1000,
				Payload: &events.TaskCreated{TaskID: "t2", Kind: events.TaskKindWorkflow}},
			ImportedEvent{Type: events.TypeTaskUsage, TimeMs: 1000,
				Payload: &events.TaskUsage{TaskID: "t1", Input: 1000}},
			ImportedEvent{Type: events.TypeTaskUsage, TimeMs: 1000, Payload: u})
	}
	for name, u := range map[string]events.TaskUsage{
		"negative input":  {TaskID: "t2", Input: -900},
		"negative turns":  {TaskID: "t2", Output: 5, Turns: -1},
		"above the bound": {TaskID: "t2", CacheWrite: MaxUsageTokens + 1},
		"negative cost":   {TaskID: "t2", Input: 5, Cost: -2.5},
		"infinite cost":   {TaskID: "t2", Input: 5, Cost: math.Inf(1)},
	} {
		for how, p := range map[string]any{"pointer": &u, "struct": u} {
			s, err := decide(p)
			require.ErrorContains(t, err, "import.append: event 4: task.usage: ", "%s by %s", name, how)
			_, created := s.Run("r1")
			require.False(t, created, "%s by %s: nothing recorded", name, how)
		}
	}
	s, err := decide(&events.TaskUsage{TaskID: "t2", Input: 5, Output: MaxUsageTokens, Cost: 0.5, Turns: 2})
	require.NoError(t, err)
	r, _ := s.Run("r1")
	require.Equal(t, int64(1005+MaxUsageTokens), r.BudgetUsed)
}

// TestImportedSpendIsACount: an imported budget.reserved or budget.charged, and an allocation top-up
// (events.ImportTopUpSubID), is held to 0..MaxUsageTokens tokens, the bound of a usage counter, by value or by
// pointer: one record near the int64 limit pushed its task's tokensSpent to saturation, and its run's budget use with
// it.
func TestImportedSpendIsACount(t *testing.T) {
	typeOf := func(p any) string {
		typ, ok := events.TypeOf(p)
		require.True(t, ok, "%T", p)
		return typ
	}
	decide := func(p any) (*projections.State, error) {
		return importFolded(
			ImportedEvent{Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{}},
			ImportedEvent{Type: events.TypeTaskCreated, TimeMs: 1000,
				Payload: &events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow}},
			ImportedEvent{Type: events.TypeBudgetReserved, TimeMs: 1000,
				Payload: &events.BudgetReserved{TaskID: "t1", SubID: "gc-1", Tokens: 10}},
			ImportedEvent{Type: typeOf(p), TimeMs: 1000, Payload: p})
	}
	for name, tc := range map[string]struct {
		reserved *events.BudgetReserved
		charged  *events.BudgetCharged
	}{
		"reserved above the bound": {reserved: &events.BudgetReserved{TaskID: "t1", SubID: "gc-2",
			Tokens: MaxUsageTokens + 1}},
		"reserved at int64's limit": {reserved: &events.BudgetReserved{TaskID: "t1", SubID: "gc-2",
			Tokens: math.MaxInt64}},
		"reserved below zero": {reserved: &events.BudgetReserved{TaskID: "t1", SubID: "gc-2", Tokens: -1}},
		"top-up above the bound": {reserved: &events.BudgetReserved{TaskID: "t1", SubID: events.ImportTopUpSubID,
			Tokens: MaxUsageTokens + 11}},
		"charged above the bound": {charged: &events.BudgetCharged{TaskID: "t1", SubID: "gc-1",
			Tokens: MaxUsageTokens + 1}},
		"charged below zero": {charged: &events.BudgetCharged{TaskID: "t1", SubID: "gc-1", Tokens: -5}},
	} {
		var byHow map[string]any
		typ := events.TypeBudgetReserved
		if tc.reserved != nil {
			byHow = map[string]any{"pointer": tc.reserved, "struct": *tc.reserved}
		} else {
			byHow, typ = map[string]any{"pointer": tc.charged, "struct": *tc.charged}, events.TypeBudgetCharged
		}
		for how, p := range byHow {
			s, err := decide(p)
			require.ErrorContains(t, err, fmt.Sprintf("import.append: event 3: %s: tokens must be an "+
				"integer in 0..%d", typ, int64(MaxUsageTokens)), "%s by %s", name, how)
			_, created := s.Run("r1")
			require.False(t, created, "%s by %s: nothing recorded", name, how)
		}
	}
	for _, tc := range []struct {
		p    any
		want int64
	}{
		{&events.BudgetReserved{TaskID: "t1", SubID: "gc-2", Tokens: MaxUsageTokens}, 10 + MaxUsageTokens},
		{events.BudgetCharged{TaskID: "t1", SubID: "gc-1", Tokens: MaxUsageTokens}, 10 + MaxUsageTokens},
		{&events.BudgetReserved{TaskID: "t1", SubID: events.ImportTopUpSubID, Tokens: MaxUsageTokens},
			MaxUsageTokens},
	} {
		s, err := decide(tc.p)
		require.NoError(t, err, "%+v", tc.p)
		a, _ := s.Allocation("r1", "t1")
		require.Equal(t, tc.want, a.TokensSpent, "%+v", tc.p)
	}
}

// TestImportedDelegationIsNotAWorkflowTask: the engine mints a delegation's subId, which names its shadow task, so
// none of its delegations shares an id with a task of its run. An imported delegate.admitted whose subId names a
// workflow task of the run (created before, or earlier in the same write) took that task for its shadow: the
// delegation's settlement, or the engine clock's expiry at its deadline, ended the workflow task. It is refused, as
// is a subId that is not an id the engine takes (safeID: it becomes a task id); one naming a shadow task the import
// created without its delegation (its delegate events were lost) is that shadow's delegation.
func TestImportedDelegationIsNotAWorkflowTask(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	admitted := func(sub string) ImportedEvent {
		return ImportedEvent{Type: events.TypeDelegateAdmitted, TimeMs: 1000,
			Payload: &events.DelegateAdmitted{TaskID: "T",
				SubID: sub, ChildDepth: 2, Role: "explorer", Unmetered: true, TimeoutSec: 60}}
	}
	created := func(id, kind string) ImportedEvent {
		return ImportedEvent{Type: events.TypeTaskCreated, TimeMs: 1000,
			Payload: &events.TaskCreated{TaskID: id, Role: "r",
				Agent: "a", Kind: kind}}
	}
	submit := func(id string, evs ...ImportedEvent) *RejectedError {
		r, err := f.eng.Submit(context.Background(), Request{Principal: events.EnginePrincipal(), CommandID: id,
			Actor: admin, Command: &Import{Source: events.ForeignSourcePicrew, RunID: "A", Events: evs}})
		require.NoError(t, err)
		return r.Rejected
	}
	require.Nil(t, submit("import:A:run", ImportedEvent{Type: events.TypeRunCreated, TimeMs: 1000,
		Payload: &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}}))
	require.Nil(t, submit("import:A:tasks", created("T", events.TaskKindWorkflow),
		created("W", events.TaskKindWorkflow), created("gc-shadow", events.TaskKindShadow)))
	head := f.eng.Head()
	for name, c := range map[string]struct {
		evs  []ImportedEvent
		want string
	}{
		"a workflow task": {[]ImportedEvent{admitted("W")},
			`delegation "W" names a workflow task of run "A"`},
		"a workflow task of the write": {[]ImportedEvent{created("N", events.TaskKindWorkflow), admitted("N")},
			`delegation "N" names a workflow task`},
		"not an id": {[]ImportedEvent{admitted("gc 1/x")},
			"delegation id must be 1..256 chars of [A-Za-z0-9_-]"},
		"none": {[]ImportedEvent{admitted("")}, "delegation id must be 1..256 chars"},
		"a workflow task by value, later": {[]ImportedEvent{admitted("gc-ok"),
			{Type: events.TypeDelegateAdmitted, TimeMs: 1000,
				Payload: events.DelegateAdmitted{TaskID: "T", SubID: "T"}}}, `delegation "T" names a workflow task`},
	} {
		rej := submit("import:A:"+name, c.evs...)
		require.NotNil(t, rej, name)
		require.Equal(t, CodeBadParams, rej.Code, name)
		require.Contains(t, rej.Error(), c.want, name)
	}
	require.Equal(t, head, f.eng.Head(), "a refusal records nothing")
	f.eng.Read(func(s *projections.State) {
		tk, _ := s.Task("A", "W")
		require.Equal(t, projections.TaskQueued, tk.Status)
		_, ok := s.Delegation("A", "W")
		require.False(t, ok)
	})
	require.Nil(t, submit("import:A:shadow", admitted("gc-shadow")), "the shadow task's own delegation")
	f.eng.Read(func(s *projections.State) {
		d, ok := s.Delegation("A", "gc-shadow")
		require.True(t, ok)
		require.Equal(t, "T", d.ParentTaskID)
	})
}

// TestImportedRunBudgetIsWhatRunCreateTakes: an imported run.created is held to the budget run.create takes — a
// budgetTotal in 0..MaxBudgetTotal (every integer up to it reads back in JavaScript as itself, and a run's tasks'
// tokensGranted are seeded from it), budgetWarning and budgetAbort fractions in [0,1] (a threshold no report
// reaches, or one every report does) — by value or by pointer; within it the run is created.
func TestImportedRunBudgetIsWhatRunCreateTakes(t *testing.T) {
	decide := func(p any) error {
		_, err := Decide(projections.New(), &Import{Source: events.ForeignSourcePicrew, RunID: "r1",
			Events: []ImportedEvent{
				{Type: events.TypeRunCreated, TimeMs: 1000, Payload: p}}},
			Env{Now: 2000 * 1e6, CommandID: "c1", NewID: func() string { return "x" }})
		return err
	}
	i64 := func(n int64) *int64 { return &n }
	for name, c := range map[string]struct {
		run  events.RunCreated
		want string
	}{
		"budgetTotal above 2^53": {events.RunCreated{BudgetTotal: i64(MaxBudgetTotal + 2)},
			"budgetTotal must be an integer in 0..9007199254740992"},
		"budgetTotal below zero": {events.RunCreated{BudgetTotal: i64(-5)},
			"budgetTotal must be an integer in 0..9007199254740992"},
		"budgetWarning above 1": {events.RunCreated{BudgetWarning: fxF(1.5)},
			"budgetWarning and budgetAbort must be fractions in [0,1]"},
		"budgetAbort below 0": {events.RunCreated{BudgetAbort: fxF(-0.5)},
			"budgetWarning and budgetAbort must be fractions in [0,1]"},
		"budgetAbort NaN": {events.RunCreated{BudgetAbort: fxF(math.NaN())},
			"budgetWarning and budgetAbort must be fractions in [0,1]"},
	} {
		for how, p := range map[string]any{"pointer": &c.run, "struct": c.run} {
			require.ErrorContains(t, decide(p), "import.append: event 0: run.created: "+c.want, "%s by %s", name, how)
		}
	}
	require.NoError(t, decide(&events.RunCreated{BudgetTotal: i64(MaxBudgetTotal), BudgetWarning: fxF(0),
		BudgetAbort: fxF(1)}))
	require.NoError(t, decide(&events.RunCreated{}))
}

// TestImportedGrantIsOneABudgetSeeds: an imported budget.reserved (an allocation top-up too) opens its task's account
// with the grant it carries, which the engine seeds only from a budgetTotal (0..MaxBudgetTotal) or a reservation: a
// grant below zero left the task less than nothing to spend, one above 2^53 reads back in JavaScript as another
// number, and the run's ledger total of such grants (saturating, with signs mixed) depended on the order of its
// accounts. It is refused, by value or by pointer; within the bound the account opens with it.
func TestImportedGrantIsOneABudgetSeeds(t *testing.T) {
	decide := func(p any) (*projections.State, error) {
		return importFolded(
			ImportedEvent{Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{}},
			ImportedEvent{Type: events.TypeTaskCreated, TimeMs: 1000,
				Payload: &events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow}},
			ImportedEvent{Type: events.TypeBudgetReserved, TimeMs: 1000, Payload: p})
	}
	for name, r := range map[string]events.BudgetReserved{
		"grant below zero": {TaskID: "t1", SubID: "gc-1", Tokens: 10, GrantedTokens: -1},
		"grant above 2^53": {TaskID: "t1", SubID: "gc-1", Tokens: 10, GrantedTokens: MaxBudgetTotal + 1},
		"grant at int64's limit": {TaskID: "t1", SubID: events.ImportTopUpSubID, Tokens: 10,
			GrantedTokens: math.MaxInt64},
	} {
		for how, p := range map[string]any{"pointer": &r, "struct": r} {
			s, err := decide(p)
			require.ErrorContains(t, err, fmt.Sprintf("import.append: event 2: budget.reserved: grantedTokens "+
				"must be an integer in 0..%d", int64(MaxBudgetTotal)), "%s by %s", name, how)
			_, created := s.Run("r1")
			require.False(t, created, "%s by %s: nothing recorded", name, how)
		}
	}
	s, err := decide(&events.BudgetReserved{TaskID: "t1", SubID: "gc-1", Tokens: 10, GrantedTokens: MaxBudgetTotal})
	require.NoError(t, err)
	a, _ := s.Allocation("r1", "t1")
	require.Equal(t, projections.Allocation{TokensGranted: MaxBudgetTotal, TokensSpent: 10}, a)
}

// TestImportedQuestionIsOneWaitRequestAsks: an imported question (ask.requested) and a task's park on it
// (task.waiting) are held to what wait.request records: a question id wait.resolve can name (1..MaxQuestionIDChars
// chars; a task parked on any other waited for good, as nothing answers a question it cannot name and the import of a
// live run is reconciled only once the run has finished) and options of 1..MaxAskOptions strings of
// 1..MaxAskOptionChars chars, by value or by pointer. An empty options list is none, as the log records it: kept, a
// state folded live held it where the same state rebuilt from the log did not.
func TestImportedQuestionIsOneWaitRequestAsks(t *testing.T) {
	decide := func(p any) (Decision, error) {
		return Decide(projections.New(), &Import{Source: events.ForeignSourcePicrew, RunID: "r1",
			Events: []ImportedEvent{
				{Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{}},
				{Type: events.TypeTaskCreated, TimeMs: 1000,
					Payload: &events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow}},
				{Type: events.TypeTaskStarted, TimeMs: 1000, Payload: &events.TaskStarted{TaskID: "t1"}},
				{Type: mustType(t, p), TimeMs: 1000, Payload: p}}},
			Env{Now: 2000 * 1e6, CommandID: "c1", NewID: func() string { return "x" }})
	}
	long := strings.Repeat("q", MaxQuestionIDChars+1)
	many := make([]string, MaxAskOptions+1)
	for i := range many {
		many[i] = "o"
	}
	for name, c := range map[string]struct {
		waiting events.TaskWaiting
		want    string
	}{
		"no question id":     {events.TaskWaiting{TaskID: "t1"}, "questionId must be 1..128 chars"},
		"a long question id": {events.TaskWaiting{TaskID: "t1", QuestionID: long}, "questionId must be 1..128 chars"},
		"17 options": {events.TaskWaiting{TaskID: "t1", QuestionID: "q", Options: many},
			"options must hold 1..16 strings of 1..256 chars"},
		"an empty option": {events.TaskWaiting{TaskID: "t1", QuestionID: "q", Options: []string{"a", ""}},
			"options must hold 1..16 strings"},
		"a long option": {events.TaskWaiting{TaskID: "t1", QuestionID: "q",
			Options: []string{strings.Repeat("é", MaxAskOptionChars+1)}}, "options must hold"},
	} {
		asked := events.AskRequested{TaskID: "t1", QuestionID: c.waiting.QuestionID, Question: "?",
			Options: c.waiting.Options}
		for how, p := range map[string]any{"waiting by pointer": &c.waiting, "waiting by value": c.waiting,
			"asked by pointer": &asked, "asked by value": asked} {
			_, err := decide(p)
			require.ErrorContains(t, err, "import.append: event 3: ", "%s, %s", name, how)
			require.ErrorContains(t, err, c.want, "%s, %s", name, how)
		}
	}
	for how, p := range map[string]any{
		"waiting": &events.TaskWaiting{TaskID: "t1", QuestionID: "q", Options: []string{}},
		"asked":   &events.AskRequested{TaskID: "t1", QuestionID: "q", Question: "?", Options: []string{}},
	} {
		d, err := decide(p)
		require.NoError(t, err, how)
		switch got := d.Events[3].Payload.(type) {
		case *events.TaskWaiting:
			require.Nil(t, got.Options, how)
		case *events.AskRequested:
			require.Nil(t, got.Options, how)
		default:
			t.Fatalf("%s: %T", how, got)
		}
		switch p := p.(type) {
		case *events.TaskWaiting:
			require.NotNil(t, p.Options, "%s: the importer's payload is its own", how)
		case *events.AskRequested:
			require.NotNil(t, p.Options, "%s: the importer's payload is its own", how)
		}
	}
	_, err := decide(&events.AskRequested{TaskID: "t1", QuestionID: strings.Repeat("q", MaxQuestionIDChars),
		Question: "?", Options: []string{strings.Repeat("é", MaxAskOptionChars)}})
	require.NoError(t, err)
}

// TestImportedEmptyOptionsFoldAsTheLogReadsThem: an imported question with options [] (import.append's JSON decodes
// `"options":[]` so) is recorded without options, as the log encodes an empty list (omitempty): recorded as given,
// the engine's live state held an empty list where the same state rebuilt from the log held none, and rebuilding from
// position 1 must give the identical state.
func TestImportedEmptyOptionsFoldAsTheLogReadsThem(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	r, err := f.eng.Submit(context.Background(),
		Request{Principal: events.EnginePrincipal(), CommandID: "import:r1:all",
			Actor: admin, Command: &Import{Source: events.ForeignSourcePicrew, RunID: "r1", Events: []ImportedEvent{
				{Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{}},
				{Type: events.TypeTaskCreated, TimeMs: 1000,
					Payload: &events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow}},
				{Type: events.TypeTaskStarted, TimeMs: 1000, Payload: &events.TaskStarted{TaskID: "t1"}},
				{Type: events.TypeTaskWaiting, TimeMs: 1000,
					Payload: &events.TaskWaiting{TaskID: "t1", QuestionID: "q", Options: []string{}}},
				{Type: events.TypeAskRequested, TimeMs: 1000,
					Payload: &events.AskRequested{TaskID: "t1", QuestionID: "q", Question: "?",
						Options: []string{}}}}}})
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	rebuilt := projections.New()
	require.NoError(t, projections.Replay(rebuilt, f.log, 0))
	f.eng.Read(func(s *projections.State) {
		live, _ := s.Ask("r1", "q")
		again, _ := rebuilt.Ask("r1", "q")
		require.Equal(t, again, live)
		lt, _ := s.Task("r1", "t1")
		rt, _ := rebuilt.Task("r1", "t1")
		require.Equal(t, rt.Waiting, lt.Waiting)
	})
}

// mustType is the event type of payload p.
func mustType(t *testing.T, p any) string {
	typ, ok := events.TypeOf(p)
	require.True(t, ok, "%T", p)
	return typ
}

// decideAfterTask decides an import of run r1 whose write creates the run and its workflow task t1, then imports p.
func decideAfterTask(t *testing.T, p any) error {
	_, err := Decide(projections.New(), &Import{Source: events.ForeignSourcePicrew, RunID: "r1",
		Events: []ImportedEvent{
			{Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{}},
			{Type: events.TypeTaskCreated, TimeMs: 1000,
				Payload: &events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow}},
			{Type: mustType(t, p), TimeMs: 1000, Payload: p}}},
		Env{Now: 2000 * 1e6, CommandID: "c1", NewID: func() string { return "x" }})
	return err
}

// TestImportedDepthIsOneTheEngineRecords: an imported task.created's depth and delegate.admitted's childDepth are
// held to 0..MaxMaxDepth (task.create's bound; an admission's childDepth is at most maxDepth, configured up to it),
// by value or by pointer: a shadow's depth decides whether credential.issue gives it a credential and how deep its
// own delegations go, and one recorded below zero was one the depth limit never reached.
func TestImportedDepthIsOneTheEngineRecords(t *testing.T) {
	decide := func(p any) error { return decideAfterTask(t, p) }
	for _, depth := range []int{-1, MaxMaxDepth + 1} {
		created := events.TaskCreated{TaskID: "t2", Kind: events.TaskKindShadow, Depth: depth}
		admitted := events.DelegateAdmitted{TaskID: "t1", SubID: "gc-1", ChildDepth: depth, Unmetered: true}
		for how, p := range map[string]any{"created by pointer": &created, "created by value": created,
			"admitted by pointer": &admitted, "admitted by value": admitted} {
			require.ErrorContains(t, decide(p), fmt.Sprintf("import.append: event 2: depth %d is not 0..%d", depth,
				MaxMaxDepth),
				"%d, %s", depth, how)
		}
	}
	require.NoError(t, decide(&events.TaskCreated{TaskID: "t2", Kind: events.TaskKindShadow, Depth: MaxMaxDepth}))
	require.NoError(t, decide(&events.DelegateAdmitted{TaskID: "t1", SubID: "gc-1", ChildDepth: MaxMaxDepth,
		Unmetered: true}))
}

// TestImportedDependsOnIsOneTaskCreateTakes: an imported task.created's dependsOn is held to what task.create takes,
// by value or by pointer: at most MaxDependsOn task ids, each 1..MaxIDChars chars. Unbounded, a write carried a list
// of any length of ids of any length (up to the frame), which every read of the task, snapshot of its run and page of
// the dashboard copies.
func TestImportedDependsOnIsOneTaskCreateTakes(t *testing.T) {
	decide := func(p any) error {
		_, err := Decide(projections.New(), &Import{Source: events.ForeignSourcePicrew, RunID: "r1",
			Events: []ImportedEvent{
				{Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{}},
				{Type: events.TypeTaskCreated, TimeMs: 1000, Payload: p}}},
			Env{Now: 2000 * 1e6, CommandID: "c1", NewID: func() string { return "x" }})
		return err
	}
	for name, deps := range map[string][]string{
		"too many":                  slices.Repeat([]string{"t0"}, MaxDependsOn+1),
		"a long id":                 {"t0", strings.Repeat("é", MaxIDChars+1)},
		"an id of two-byte chars":   {"t0", strings.Repeat("é", MaxIDChars/2+1)},
		"an id JSON writes in more": {"t0", strings.Repeat("<", MaxIDChars/6+1)},
		"an empty id":               {""},
	} {
		created := events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow, DependsOn: deps}
		for how, p := range map[string]any{"pointer": &created, "struct": created} {
			require.ErrorContains(t, decide(p), fmt.Sprintf("import.append: event 1: task.created: dependsOn "+
				"must list at most %d task ids, each of 1..%d chars, of at most %d bytes in JSON", MaxDependsOn,
				MaxIDChars, MaxIDChars),
				"%s by %s", name, how)
		}
	}
	require.NoError(t, decide(&events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow,
		DependsOn: append(slices.Repeat([]string{"t0"}, MaxDependsOn-2), strings.Repeat("é", MaxIDChars/2),
			strings.Repeat("<", MaxIDChars/6))}))
	require.NoError(t, decide(&events.TaskCreated{TaskID: "t1", Kind: events.TaskKindWorkflow}))
}

// TestImportedIDsAreOnesCrewlogRecords: an imported payload names a task, a delegation, a question or a message by an
// id of at most MaxIDChars chars that JSON writes in at most MaxIDChars bytes, as every id crewlog's own commands
// record, by value or by pointer: a longer one was recorded, and a delegate.admitted's taskId became its delegation's
// parentTaskId and a budget account's key, an ask.requested's its question's and its run's waitState's, each read and
// snapshot of the run copying it; and one of 256 '<', 1,536 bytes in JSON, was larger alone than a frame of 1 KiB,
// each read of the socket that met it answering oversize-frame for good. A foreign.imported keeps what its source
// wrote.
func TestImportedIDsAreOnesCrewlogRecords(t *testing.T) {
	for _, long := range []string{strings.Repeat("é", MaxIDChars+1), strings.Repeat("<", MaxIDChars),
		strings.Repeat("<", MaxIDChars/6+1), strings.Repeat("é", MaxIDChars/2+1),
		strings.Repeat("\x00", MaxIDChars/6+1)} {
		importedIDsRefused(t, long)
	}
	decide := func(p any) error { return decideAfterTask(t, p) }
	for _, at := range []string{strings.Repeat("t", MaxIDChars), strings.Repeat("é", MaxIDChars/2),
		strings.Repeat("<", MaxIDChars/6)} {
		require.NoError(t, decide(&events.DelegateAdmitted{TaskID: at, SubID: "gc-1", Unmetered: true}))
	}
	long := strings.Repeat("<", MaxIDChars)
	require.NoError(t, decide(&events.ForeignImported{Source: "picrew", Type: "x.y", Seq: 1, TaskID: long}))
}

// importedIDsRefused requires each payload naming something by id long to be refused, by value or by pointer.
func importedIDsRefused(t *testing.T, long string) {
	decide := func(p any) error { return decideAfterTask(t, p) }
	for name, c := range map[string]struct {
		p    any
		want string
	}{
		"an admission's parent": {events.DelegateAdmitted{TaskID: long, SubID: "gc-1", Unmetered: true},
			"delegate.admitted: taskId"},
		"a request's subId":    {events.DelegateRequested{TaskID: "t1", SubID: long}, "delegate.requested: subId"},
		"a reservation's task": {events.BudgetReserved{TaskID: long, SubID: "gc-1"}, "budget.reserved: taskId"},
		"a question's task":    {events.AskRequested{TaskID: long, QuestionID: "q"}, "ask.requested: taskId"},
		"an answer's question": {events.AskAnswered{TaskID: "t1", QuestionID: long}, "ask.answered: questionId"},
		"a delivery's message": {events.MailboxDelivered{MessageID: long, Recipient: "t1"},
			"mailbox.delivered: messageId"},
		"a message's question": {events.MailboxAppended{ID: "m1", To: "t1", QuestionID: long},
			"mailbox.appended: questionId"},
		"a message's id":      {events.MailboxAppended{ID: long, To: "t1"}, "mailbox.appended: id"},
		"a message's mailbox": {events.MailboxAppended{ID: "m1", To: long}, "mailbox.appended: to"},
		"an ack's recipient": {events.MailboxAcknowledged{MessageID: "m1", Recipient: long},
			"mailbox.acknowledged: recipient"},
		"a message's data.subId": {events.MailboxAppended{ID: "m1", To: "t1", Data: &events.MessageData{SubID: long}},
			"mailbox.appended: data.subId"},
	} {
		ptr := reflect.New(reflect.TypeOf(c.p))
		ptr.Elem().Set(reflect.ValueOf(c.p))
		for how, p := range map[string]any{"struct": c.p, "pointer": ptr.Interface()} {
			require.ErrorContains(t, decide(p), fmt.Sprintf("import.append: event 2: %s must be at most %d "+
				"chars, of at most %d bytes in JSON", c.want, MaxIDChars, MaxIDChars), "%q: %s by %s",
				long[:1], name, how)
		}
	}
}
