package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// fakeBroker answers the query methods from a state folded from the
// scenario log, in the shapes the broker documents (query.run → the run;
// query.tasks → {tasks}; query.delegations → {delegations}; query.ledger →
// {accounts}; query.slots → {held, capacity, subIds}; query.runs → {runs,
// nextCursor}; events.since → {events, nextSeq, hasMore}), and streams the
// recorded events for events.subscribe.
type fakeBroker struct {
	s      *projections.State
	events map[string][]json.RawMessage // per run, in seq order
	calls  []string
	// writes are the mutating calls, with their params.
	writes []string
	// omitHistory sends every account without its history, as crewd does for one too large for a frame.
	omitHistory bool
	// omitTexts sends every run, task and delegation without its long texts, as crewd does for one too large for a
	// frame.
	omitTexts bool
	// omitDelegationNames sends every delegation without its texts, role and runId, as crewd does for one too large
	// for a frame without its texts either.
	omitDelegationNames bool
	// slots, when set, is query.slots' answer in place of the state's pool.
	slots *broker.WireSlots
	// stop ends a follow once the stream ran dry, as an interrupt would.
	stop context.CancelFunc
	// fail answers each method it names with its error, as crewd answers a finished run it cannot read back.
	fail map[string]*wire.Error
	// paged, when not 0, is how many of a run's events events.since holds: the rest commit after the tail began, so
	// that only the subscription sends them.
	paged int
	// streamErr, when set, ends the subscription with it once the stream ran dry, as a lost connection would.
	streamErr error
}

func newFake(t *testing.T) *fakeBroker {
	l, err := eventlog.Open(filepath.Join(scenarioData(t), storeDir), &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	s, _, err := projections.Load(l)
	require.NoError(t, err)
	f := &fakeBroker{s: s, events: map[string][]json.RawMessage{}}
	it := l.Read(1)
	for it.Next() {
		r := it.Event()
		ev, err := projections.FromLog(r)
		require.NoError(t, err)
		data, err := json.Marshal(ev.Payload)
		require.NoError(t, err)
		var task struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(data, &task)
		raw, err := json.Marshal(map[string]any{
			"time": time.Unix(0, r.Time).UTC().Format("2006-01-02T15:04:05.000Z"), "type": r.Type, "runId": r.Stream,
			"taskId": task.TaskID, "data": json.RawMessage(data),
			"metadata": map[string]any{"seq": r.StreamVersion, "provenance": "api", "position": r.Position,
				"schemaVersion": r.SchemaVersion, "commandId": r.CommandID, "actor": ev.Actor},
		})
		require.NoError(t, err)
		f.events[r.Stream] = append(f.events[r.Stream], raw)
	}
	require.NoError(t, it.Close())
	return f
}

func (f *fakeBroker) dial(ctx context.Context, socket, token string) (Broker, error) {
	if token != "t0ken" {
		return nil, fmt.Errorf("fake: bad token %q", token)
	}
	return f, nil
}

func (f *fakeBroker) Close() error { return nil }

func (f *fakeBroker) Call(_ context.Context, method string, params, result any) error {
	f.calls = append(f.calls, method)
	if e := f.fail[method]; e != nil {
		return e
	}
	b, _ := json.Marshal(params)
	var p struct {
		RunID    string `json:"runId"`
		SinceSeq uint64 `json:"sinceSeq"`
		Limit    int    `json:"limit"`
		Cursor   string `json:"cursor"`
		TaskID   string `json:"taskId"`
	}
	_ = json.Unmarshal(b, &p)
	if strings.HasPrefix(method, "query.") && method != "query.runs" && method != "query.slots" {
		if _, ok := f.s.Run(p.RunID); !ok {
			return wire.Errorf(wire.CodeNoManifest, "run %q not found", p.RunID)
		}
	}
	var res any
	switch method {
	case "query.runs":
		page, err := f.s.Runs(projections.RunFilter{Limit: p.Limit})
		if err != nil {
			return err
		}
		res = map[string]any{"runs": page.Runs, "nextCursor": page.NextCursor}
	case "query.run":
		r, _ := f.s.Run(p.RunID)
		res = r
		if f.omitTexts {
			w := broker.WireRun{Run: r}
			w.OmitTexts()
			res = w
		}
	// Pages of two, whatever the limit asked: crewctl must follow the cursor.
	case "query.tasks":
		page := fakePage(f.s.TasksPage(p.RunID, projections.PageFilter{Limit: 2, Cursor: p.Cursor}))("tasks")
		if f.omitTexts {
			page["tasks"] = omittedAll(page["tasks"].([]projections.Task),
				func(t projections.Task) broker.WireTask { return broker.WireTask{Task: t} }, (*broker.WireTask).OmitTexts)
		}
		res = page
	case "query.delegations":
		page := fakePage(f.s.DelegationsPage(p.RunID, projections.PageFilter{Limit: 2, Cursor: p.Cursor}))("delegations")
		if f.omitTexts {
			page["delegations"] = omittedAll(page["delegations"].([]projections.Delegation),
				func(d projections.Delegation) broker.WireDelegation { return broker.WireDelegation{Delegation: d} },
				(*broker.WireDelegation).OmitTexts)
		}
		if f.omitDelegationNames {
			page["delegations"] = omittedAll(page["delegations"].([]projections.Delegation),
				func(d projections.Delegation) broker.WireDelegation { return broker.WireDelegation{Delegation: d} },
				func(w *broker.WireDelegation) { w.OmitTexts(); w.OmitNames() })
		}
		res = page
	case "query.ledger":
		if p.TaskID != "" {
			h, _, err := f.s.AccountHistory(p.RunID, p.TaskID, projections.PageFilter{Limit: 1, Cursor: p.Cursor})
			if err != nil {
				return err
			}
			res = map[string]any{"reservations": h.Reservations, "charges": h.Charges, "nextCursor": h.NextCursor}
			break
		}
		page := fakePage(f.s.LedgerPage(p.RunID, projections.PageFilter{Limit: 2, Cursor: p.Cursor}))("accounts")
		if f.omitHistory {
			var omitted []map[string]any
			for _, a := range page["accounts"].([]projections.Account) {
				b, _ := json.Marshal(a)
				var m map[string]any
				_ = json.Unmarshal(b, &m)
				m["reservations"], m["charges"], m["historyOmitted"] = nil, nil, true
				omitted = append(omitted, m)
			}
			page["accounts"] = omitted
		}
		res = page
	case "query.slots":
		res = f.s.Slots()
		if f.slots != nil {
			res = *f.slots
		}
	case "delegate.cancel", "delegate.settle":
		b, _ := json.Marshal(params)
		f.writes = append(f.writes, method+" "+string(b))
		res = map[string]any{"ok": true}
	case "events.since":
		evs := f.events[p.RunID]
		if f.paged > 0 {
			evs = evs[:min(f.paged, len(evs))]
		}
		from := min(int(p.SinceSeq), len(evs))
		page := evs[from:min(from+20, len(evs))] // small pages exercise paging
		res = sincePage{Events: page, NextSeq: uint64(from + len(page)), HasMore: from+len(page) < len(evs)}
	default:
		return wire.Errorf(wire.CodeNotImplemented, "%s", method)
	}
	b, err := json.Marshal(res)
	if err != nil || result == nil {
		return err
	}
	return json.Unmarshal(b, result)
}

// omittedAll is items as crewd sends them without their texts: each wrapped, then omit applied.
func omittedAll[T, W any](items []T, wrap func(T) W, omit func(*W)) []W {
	out := make([]W, len(items))
	for i, it := range items {
		out[i] = wrap(it)
		omit(&out[i])
	}
	return out
}

// fakePage renders a projection page in the broker's paged shape.
func fakePage[T any](p projections.Page[T], err error) func(key string) map[string]any {
	return func(key string) map[string]any {
		if err != nil {
			return map[string]any{key: []T{}, "error": err.Error()}
		}
		return map[string]any{key: p.Items, "nextCursor": p.NextCursor, "hasMore": p.NextCursor != "", "total": p.Total}
	}
}

func (f *fakeBroker) Subscribe(ctx context.Context, runID string, since uint64, types []string) (Stream, error) {
	if e := f.fail["events.subscribe"]; e != nil {
		return nil, e
	}
	return &fakeStream{f: f, evs: f.events[runID][since:], types: types}, nil
}

type fakeStream struct {
	f     *fakeBroker
	evs   []json.RawMessage
	types []string
}

func (s *fakeStream) Next(ctx context.Context) (json.RawMessage, error) {
	for len(s.evs) > 0 {
		raw := s.evs[0]
		s.evs = s.evs[1:]
		if typeIn(raw, s.types) {
			return raw, nil
		}
	}
	if s.f.streamErr != nil {
		return nil, s.f.streamErr
	}
	s.f.stop()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *fakeStream) Close() error { return nil }

func TestViewsGolden(t *testing.T) {
	f := newFake(t)
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken\n"))
	for _, c := range []struct {
		name string
		args []string
	}{
		{"runs.txt", []string{"runs"}},
		{"show-run.txt", []string{"show", "run", audittest.RunBudget}},
		{"tasks.txt", []string{"tasks", audittest.RunBudget}},
		{"delegations.txt", []string{"delegations", audittest.RunBudget}},
		{"ledger.txt", []string{"ledger", audittest.RunBudget}},
		{"slots.txt", []string{"slots"}},
		{"events.txt", []string{"events", "--run", audittest.RunBudget}},
		{"events-type.txt", []string{"events", "--run", audittest.RunBudget, "--type", "delegate.admitted,delegate.rejected"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := crewctl(t, f.dial, append(c.args, "--token-file", tok)...)
			require.Equal(t, exitOK, r.code, r.err)
			golden(t, c.name, r.out)

			r = crewctl(t, f.dial, append(c.args, "--token-file", tok, "--json")...)
			require.Equal(t, exitOK, r.code, r.err)
			requireJSON(t, r.out)
		})
	}
}

// requireJSON accepts one JSON document or JSON lines.
func requireJSON(t *testing.T, out string) {
	t.Helper()
	if json.Valid([]byte(out)) {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		require.True(t, json.Valid([]byte(line)), "not JSON: %s", line)
	}
}

// TestEventsFollow replays the run's first events with events.since, then
// tails the rest through events.subscribe; every seq shows once, in order.
func TestEventsFollow(t *testing.T) {
	f := newFake(t)
	r := tail(t, f, "--run", audittest.RunUnlimited, "--since", "3", "--json")
	require.Equal(t, exitOK, r.code, r.err)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	require.Len(t, lines, len(f.events[audittest.RunUnlimited])-3)
	for i, line := range lines {
		var ev teamEvent
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		require.Equal(t, uint64(i+4), ev.Metadata.Seq)
	}
}

func TestViewErrors(t *testing.T) {
	f := newFake(t)
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	r := crewctl(t, f.dial, "tasks", "no-such-run", "--token-file", tok)
	require.Equal(t, exitProblem, r.code, "a broker refusal is a finding")
	require.Contains(t, r.err, "no-manifest")
	r = crewctl(t, f.dial, "tasks", "--token-file", tok)
	require.Equal(t, exitUsage, r.code)
	r = crewctl(t, f.dial, "events", "--token-file", tok)
	require.Equal(t, exitUsage, r.code, "events needs --run")
	r = crewctl(t, f.dial, "runs", "--token-file", filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, exitOpen, r.code)
	r = crewctl(t, nil, "runs", "--token-file", tok)
	require.Equal(t, exitOpen, r.code, "no daemon")
	bad := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(bad, "wrong"))
	r = crewctl(t, f.dial, "slots", "--token-file", bad)
	require.Equal(t, exitOpen, r.code)
}

// TestReplayDiffLive compares the rebuilt state with the (fake) daemon's
// views: they agree.
func TestReplayDiffLive(t *testing.T) {
	f := newFake(t)
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	r := crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--diff", "--socket", "fake.sock", "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err+r.out)
	require.Contains(t, r.out, "diff with the daemon, compared at position 46: 0 difference(s)")

	// An account sent without its history is completed page by page: no difference either.
	f.omitHistory = true
	r = crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--diff", "--socket", "fake.sock", "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err+r.out)
	require.Contains(t, r.out, "0 difference(s)")
	require.Contains(t, f.calls, "query.ledger")
	f.omitHistory = false

	// A daemon that moved on differs, by JSON path.
	f.s = f.s.Clone()
	r = crewctl(t, f.dial, "replay", "--data", scenarioData(t), "--to", "30", "--diff", "--socket", "fake.sock", "--token-file", tok)
	require.Equal(t, exitProblem, r.code)
	require.Contains(t, r.out, "$.runs[0].run.status: rebuilt \"running\", daemon \"completed\"")
}

// TestCancelAnyRunsDelegation: crewctl cancel names only the subId (the admin's delegate.cancel finds the run);
// --free also settles it cancelled, which frees the slot.
func TestCancelAnyRunsDelegation(t *testing.T) {
	f := newFake(t)
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	r := crewctl(t, f.dial, "cancel", "gc-1", "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "gc-1 asked to cancel")
	require.Equal(t, []string{`delegate.cancel {"subId":"gc-1"}`}, f.writes)

	f.writes = nil
	r = crewctl(t, f.dial, "cancel", "gc-2", "--reason", "slot hog", "--free", "--json", "--token-file", tok)
	require.Equal(t, exitOK, r.code, r.err)
	require.JSONEq(t, `{"subId":"gc-2","cancelRequested":true,"freed":true}`, r.out)
	require.Equal(t, []string{
		`delegate.cancel {"reason":"slot hog","subId":"gc-2"}`,
		`delegate.settle {"outcome":"cancelled","subId":"gc-2","text":"cancelled by the operator: slot hog"}`,
	}, f.writes)
	r = crewctl(t, f.dial, "cancel", "--token-file", tok)
	require.Equal(t, exitUsage, r.code)
}

// TestRunsLimitOutOfRange: a --limit query.runs cannot take is a usage error, before crewd is asked, where a
// negative one was dropped and the daemon's default page answered; the ends of the range, 0 (the daemon's default)
// and 1000, are asked of crewd as given.
func TestRunsLimitOutOfRange(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	for _, tc := range []struct {
		limit   string
		inRange bool
	}{{"-1", false}, {"0", true}, {"1000", true}, {"1001", false}} {
		t.Run(tc.limit, func(t *testing.T) {
			f := newFake(t)
			r := crewctl(t, f.dial, "runs", "--limit", tc.limit, "--token-file", tok)
			if tc.inRange {
				require.Equal(t, exitOK, r.code, r.err)
				require.Equal(t, []string{"query.runs"}, f.calls)
				return
			}
			require.Equal(t, exitUsage, r.code, r.err)
			require.Contains(t, r.err, "--limit "+tc.limit+" is outside 0..1000")
			require.Empty(t, f.calls)
		})
	}
}

// TestEmptySocketRefused: --socket "" is a usage error naming the flag, where it was dialled as given (the error
// naming no socket) and backup took its offline path for a crewd it never looked for.
func TestEmptySocketRefused(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	f := newFake(t)
	r := crewctl(t, f.dial, "runs", "--socket", "", "--token-file", tok)
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "--socket: a path is required")
	require.Empty(t, f.calls)
}

// TestRunsNextPageKeepsTheListing: the cursor of query.runs is a place in creation order, not the listing, so the
// next page of runs --newest --status S is that listing's only when asked with the same flags. The command runs
// prints for it must carry them, where it named the cursor alone: oldest first, every status, the runs already shown
// again.
func TestRunsNextPageKeepsTheListing(t *testing.T) {
	data, socket := liveDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := adminOf(t, ctx, socket)
	for i := range 5 { // R0 … R4 in creation order; the even ones running
		run := fmt.Sprintf("R%d", i)
		callOK(t, ctx, a, "run.create", map[string]any{"runId": run, "team": "t", "goal": "g", "cwd": "/w"})
		if i%2 == 0 {
			callOK(t, ctx, a, "run.transition", map[string]any{"runId": run, "to": "running"})
		}
	}
	listed := func(args ...string) (runs []string, more []string) {
		t.Helper()
		r := crewctl(t, dialBroker, append(args, "--data", data, "--socket", socket)...)
		require.Equal(t, exitOK, r.code, r.err)
		for _, line := range strings.Split(strings.TrimSpace(r.out), "\n")[1:] {
			if next, ok := strings.CutPrefix(line, "more: crewctl "); ok {
				more = strings.Fields(next)
				continue
			}
			runs = append(runs, strings.Fields(line)[0])
		}
		return runs, more
	}
	for _, tc := range []struct {
		name  string
		args  []string
		pages [][]string
	}{
		{"newest first", []string{"runs", "--newest", "--limit", "2"},
			[][]string{{"R4", "R3"}, {"R2", "R1"}, {"R0"}}},
		{"by status", []string{"runs", "--status", "running", "--limit", "1"},
			[][]string{{"R0"}, {"R2"}, {"R4"}}},
		{"by status, newest first", []string{"runs", "--status", "queued", "--newest", "--limit", "1"},
			[][]string{{"R3"}, {"R1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			for i, want := range tc.pages {
				runs, more := listed(args...)
				require.Equal(t, want, runs, "page %d of %v", i+1, tc.args)
				if i == len(tc.pages)-1 {
					// NB: a page that ends the listing may name a next one all the same (the last run it looked at
					// matched); what it shows must then be nothing.
					if more != nil {
						runs, _ := listed(more...)
						require.Empty(t, runs, "past the last page of %v", tc.args)
					}
					break
				}
				require.NotNil(t, more, "page %d of %v names the next", i+1, tc.args)
				args = more
			}
		})
	}
}

// TestShowRunPrintsEveryTask: show run prints every task of the run once, where it printed only those it reached
// from a task no delegation names: a shadow task whose delegation names a parent the run does not hold, and the
// shadow tasks of delegations that name each other as parents (an import can record both), were left out, silently.
// The first is a root in its place in the run's order of tasks; only a cycle, which reaches no root, comes last.
func TestShowRunPrintsEveryTask(t *testing.T) {
	data, socket, imported := importedRun(t)
	imported("W", "task.created", map[string]any{"taskId": "W", "role": "engineer", "agent": "e", "title": "w", "cwd": "/w"})
	for _, d := range [][2]string{{"W", "gc-w"}, {"ghost", "gc-x"}, {"gc-z", "gc-y"}, {"gc-y", "gc-z"}} {
		imported(d[1], "delegate.admitted", map[string]any{"taskId": d[0], "subId": d[1], "childDepth": 2,
			"role": "explorer", "timeoutSec": 100, "cwd": "/w", "title": d[1], "prompt": "p"})
	}
	imported("V", "task.created", map[string]any{"taskId": "V", "role": "engineer", "agent": "e", "title": "v", "cwd": "/w"})
	r := crewctl(t, dialBroker, "show", "run", "P", "--data", data, "--socket", socket)
	require.Equal(t, exitOK, r.code, r.err)
	for _, task := range []string{"W", "gc-w", "gc-x", "gc-y", "gc-z", "V"} {
		require.Equal(t, 1, strings.Count(r.out, " "+task+"  "), "task %s once in\n%s", task, r.out)
	}
	require.Contains(t, r.out, "├─ W  engineer  queued  depth 1  1 delegation(s)\n│  └─ gc-w  explorer  queued  depth 2\n",
		"a delegation under its parent")
	// NB: a task whose parent the run does not hold is a root where the run lists it, before V, which came after it;
	// only a cycle, which has no root, is cut and printed last.
	require.True(t, strings.HasSuffix(r.out, "├─ gc-x  explorer  queued  depth 2  delegated by ghost\n"+
		"├─ V  engineer  queued  depth 1\n"+
		"└─ gc-y  explorer  queued  depth 2  1 delegation(s)  delegated by gc-z\n"+
		"   └─ gc-z  explorer  queued  depth 2\n"), r.out)
}

// TestAdminTokenFileLikeCrewds: the admin token is read, as crewd reads admin.token, only from a file neither group
// nor others may access (its token may have leaked: crewd refuses to start on one) and that holds one token. crewctl
// sent the token of any file it could read, one that became world-readable since crewd started included, and read a
// file whole whatever its size.
func TestAdminTokenFileLikeCrewds(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		says          string
	}{
		{"readable by others", "t0ken\n", 0o644, "has mode 0644: group or others may access it"},
		{"readable by the group", "t0ken\n", 0o640, "has mode 0640: group or others may access it"},
		{"writable by the group", "t0ken\n", 0o620, "has mode 0620: group or others may access it"},
		{"two tokens", "t0ken\nother\n", 0o600, "must hold one token"},
		{"longer than a token", strings.Repeat("t", 257), 0o600, "must hold one token of 1..256 bytes"},
		// NB: 129 chars: the bound is in bytes, and the refusal said chars.
		{"longer than a token in bytes", strings.Repeat("é", 129), 0o600, "must hold one token of 1..256 bytes"},
		{"far longer than a token", strings.Repeat("t", 1<<20), 0o600, "is longer than a token file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			tok := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			require.NoError(t, writeFile(tok, tc.content))
			require.NoError(t, os.Chmod(tok, tc.mode))
			r := crewctl(t, f.dial, "slots", "--token-file", tok)
			require.Equal(t, exitOpen, r.code, r.err)
			require.Contains(t, r.err, "admin token file "+tok)
			require.Contains(t, r.err, tc.says)
			require.Empty(t, f.calls, "the token went nowhere")
		})
	}
	t.Run("a symlink", func(t *testing.T) {
		f := newFake(t)
		target := filepath.Join(dir, "target")
		require.NoError(t, writeFile(target, "t0ken\n"))
		tok := filepath.Join(dir, "link")
		require.NoError(t, os.Symlink(target, tok))
		r := crewctl(t, f.dial, "slots", "--token-file", tok)
		require.Equal(t, exitOpen, r.code, r.err)
		require.Contains(t, r.err, "admin token file "+tok+" is a symlink")
		require.Empty(t, f.calls, "the token went nowhere")
	})
	t.Run("a FIFO", func(t *testing.T) {
		f := newFake(t)
		tok := filepath.Join(dir, "fifo")
		require.NoError(t, syscall.Mkfifo(tok, 0o600))
		// A writer with a token, should crewctl open the FIFO to read it (an open that blocks until a writer comes).
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			w, err := os.OpenFile(tok, os.O_WRONLY, 0)
			if err == nil {
				_, _ = w.WriteString("t0ken\n")
				_ = w.Close()
			}
		}()
		r := crewctl(t, f.dial, "slots", "--token-file", tok)
		// NB: a reader of the test's own lets the writer's open end once crewctl did not open the FIFO.
		rd, err := os.OpenFile(tok, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		require.NoError(t, err)
		<-wrote
		require.NoError(t, rd.Close())
		require.Equal(t, exitOpen, r.code, r.err)
		require.Contains(t, r.err, "admin token file "+tok+" is not a regular file")
		require.Empty(t, f.calls, "the token went nowhere")
	})
	f := newFake(t)
	tok := filepath.Join(dir, "spaced")
	require.NoError(t, writeFile(tok, "  t0ken \n\n"))
	r := crewctl(t, f.dial, "slots", "--token-file", tok)
	require.Equal(t, exitOK, r.code, "the whitespace around the token is no part of it: %s", r.err)
}
