package broker

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// sinceResult is the shape of an events.since answer, as json.Marshal encodes it: the reference sincePage.result is
// checked against.
type sinceResult struct {
	Events  []json.RawMessage `json:"events"`
	NextSeq uint64            `json:"nextSeq"`
	HasMore bool              `json:"hasMore"`
}

// neverLifted makes every rendering read the payload's taskId back from its JSON, as before taskid.go.
func neverLifted(any) (string, bool) { return "", false }

// sinceFrame is the frame the events.since tests use: small enough that a 3,000-character message fills a fifth of
// a page, so pages end on their size, and that a 16,200-character one cannot fit any page and is sent omitted.
const sinceFrame = 16 << 10

// writeVariedRun gives run R1 of f (seeded as s) every kind of event events.since renders differently: delegations
// admitted, spawned and settled (their results as mailbox messages, one charged for its usage), one refused by the
// policy, messages to a task and read from its inbox, large messages that end pages on their size and one sent
// omitted, credentials issued and revoked (their digests removed), usage; worker P's own commands (whose ids P
// sees) among the orchestrator's (whose ids P does not).
func writeVariedRun(t *testing.T, f *fixture, s seeded) (o, p *client) {
	t.Helper()
	o, p = f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)
	for i := range 3 {
		sub := p.ok("delegate.request", map[string]any{"prompt": "look", "description": fmt.Sprint("d", i),
			"budgetTokens": 10, "commandId": fmt.Sprint("p-del-", i)})["grandchildTaskRef"].(string)
		o.ok("delegate.spawned", map[string]any{"subId": sub, "pid": 4242 + i})
		settle := map[string]any{"subId": sub, "outcome": "ok", "text": fmt.Sprintf("result <%d> & more", i)}
		if i == 1 {
			settle["outcome"], settle["usageTokens"] = "failed", 50
		}
		o.ok("delegate.settle", settle)
	}
	p.fails("delegate.request", map[string]any{"prompt": "x", "description": "d", "role": "no-such-role"}, "policy-denied")
	for i := range 4 {
		o.ok("msg.send", map[string]any{"to": taskP, "body": fmt.Sprintf("%d:%s", i, strings.Repeat("m", 3000))})
	}
	o.ok("msg.send", map[string]any{"to": taskP, "body": strings.Repeat("y", 16_200)})
	o.ok("msg.send", map[string]any{"to": taskP, "body": "héllo ✓ \u2028"})
	p.ok("msg.inbox", map[string]any{})
	tok := o.ok("credential.issue", map[string]any{"taskId": taskQ})["token"].(string)
	require.NotEmpty(t, tok)
	o.ok("credential.revoke", map[string]any{"taskId": taskQ})
	f.streamUsage(t, 5)
	return o, p
}

// sinceCase is one events.since request: a viewer, sinceSeq and limit (0: the default).
type sinceCase struct {
	viewer string
	since  int
	limit  int
}

func (c sinceCase) String() string {
	return fmt.Sprintf("%s sinceSeq=%d limit=%d", c.viewer, c.since, c.limit)
}

func (c sinceCase) params(admin bool) map[string]any {
	p := map[string]any{"sinceSeq": c.since}
	if admin {
		p["runId"] = runR
	}
	if c.limit > 0 {
		p["limit"] = c.limit
	}
	return p
}

// sinceAnswers asks events.since of run R1 as every viewer in viewers, from every sinceSeq (before the first event
// to past the last) with each limit, and returns each answer's bytes. It requires each to be the page the reference
// gives: the same events read from the log, each rendered with its taskId read back from its JSON (neverLifted),
// the page encoded by json.Marshal. It also follows nextSeq from 0 with each limit and requires every event once,
// in order.
func sinceAnswers(t *testing.T, f *fixture, viewers map[string]*client) map[string][]byte {
	t.Helper()
	var length uint64
	f.eng.Read(func(st *projections.State) {
		run, ok := st.Run(runR)
		require.True(t, ok)
		length = uint64(run.Usage.Events)
	})
	limits := []int{0, 1, 2, 3, 7, 1000}
	out := make(map[string][]byte)
	for name, c := range viewers {
		admin := name == "admin"
		for _, limit := range limits {
			for since := -1; since <= int(length)+1; since++ {
				k := sinceCase{name, since, limit}
				want := referenceSince(t, f, c, k)
				r := c.call("events.since", k.params(admin))
				require.Nil(t, r.Error, "%s", k)
				require.Equal(t, string(want), string(r.Result), "%s: not the reference page", k)
				out[k.String()] = r.Result
			}
			seq := uint64(0)
			for next := 0; ; {
				var page sinceResult
				require.NoError(t, json.Unmarshal(out[sinceCase{name, next, limit}.String()], &page))
				for _, raw := range page.Events {
					var ev teamEvent
					require.NoError(t, json.Unmarshal(raw, &ev))
					seq++
					require.Equal(t, seq, ev.Metadata.Seq, "%s limit=%d: a gap or a repeat", name, limit)
				}
				if !page.HasMore {
					break
				}
				next = int(page.NextSeq)
			}
			require.Equal(t, length, seq, "%s limit=%d: paging did not reach every event", name, limit)
		}
	}
	return out
}

// referenceSince is the page c's next events.since call answers for k, built by the reference: readSince with
// every taskId read back from the payload's JSON, the page encoded by json.Marshal (each event by
// teamEvent.encodeJSON, which TestTeamEventEncodesAsJSONMarshal holds to json.Marshal's bytes).
func referenceSince(t *testing.T, f *fixture, c *client, k sinceCase) []byte {
	t.Helper()
	viewer := identity{role: events.RoleAdmin}
	switch k.viewer {
	case "orchestrator":
		viewer = identity{role: events.RoleOrchestrator, runID: runR, key: events.OrchestratorKey}
	case "worker":
		viewer = identity{role: events.RoleWorker, runID: runR, taskID: taskP, key: taskP}
	}
	limit := k.limit
	if limit == 0 {
		limit = maxSinceLimit
	}
	budget := frameBudget(f.srv.opts.MaxFrame, fmt.Sprintf("c%d", c.n+1)) // pageBudget of the call's id
	page, err := readSince(f.log, runR, uint64(max(k.since, 0)), math.MaxUint64, limit, budget, func(r *eventlog.Event) (teamEvent, error) {
		return renderEventWith(r, eventViewer{identity: viewer, eng: f.eng}, neverLifted)
	})
	require.NoError(t, err, "%s", k)
	b, err := json.Marshal(sinceResult{Events: page.events, NextSeq: page.nextSeq, HasMore: page.hasMore})
	require.NoError(t, err)
	return b
}

// TestEventsSinceOfAColdRunAnswersAsWhileHot: every page of a finished run's events.since — each viewer, each
// sinceSeq, each limit, pages ended by the limit and by the frame, an event sent omitted — is the same, byte for
// byte, while the run is hot, once it is cold after a rebuild from position 1, and as the reference builds it
// (sinceAnswers), and reading the cold run's pages reads nothing of the run back but its events.
func TestEventsSinceOfAColdRunAnswersAsWhileHot(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{MaxFrame: sinceFrame}
	hot := newFixture(t, fixtureOpts{fs: fs, opts: opts, snapshotEvery: -1})
	s := hot.seed()
	o, p := writeVariedRun(t, hot, s)
	// A worker sees the ids of its own commands only: its pages, against the reference, while it may still read.
	sinceAnswers(t, hot, map[string]*client{"worker": p})
	o.ok("run.transition", map[string]any{"to": "completed"})
	a := hot.dial()
	a.helloAdmin()
	o = hot.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	hot.eng.Read(func(st *projections.State) { require.False(t, st.IsCold(runR), "the run must be hot here") })
	whileHot := sinceAnswers(t, hot, map[string]*client{"admin": a, "orchestrator": o})
	var omitted int
	for _, b := range whileHot {
		omitted += strings.Count(string(b), `"omitted":true`)
	}
	require.Positive(t, omitted, "no page sent an event omitted: the frame does not test that")
	var page sinceResult
	require.NoError(t, json.Unmarshal(whileHot[sinceCase{"admin", 0, 0}.String()], &page))
	require.True(t, page.HasMore, "the first page of the default limit must end on its size: the frame does not test that")
	hot.close()

	// Started again with no retention and no snapshot: the state is folded from position 1, and the first group
	// after it (another run's creation) makes the ended run cold; that run ends too and takes the one place of the
	// cache of decoded cold runs, so reading R1 back would show in refolds.
	cold := newFixture(t, fixtureOpts{fs: fs, opts: opts, cold: true, snapshotEvery: -1})
	cold.clock.Store(hot.clock.Load()) // the engine's clock goes on from where the log left it
	r9 := cold.dial()
	r9.hello("R9", events.OrchestratorKey, cold.seedRun("R9", "X"))
	cold.eng.Read(func(st *projections.State) { require.True(t, st.IsCold(runR), "the ended run must be cold here") })
	r9.ok("run.transition", map[string]any{"to": "completed"})
	a = cold.dial()
	a.helloAdmin()
	before := cold.refolds()
	o = cold.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	whenCold := sinceAnswers(t, cold, map[string]*client{"admin": a, "orchestrator": o})
	require.Equal(t, before, cold.refolds(), "events.since read the cold run back")
	require.Len(t, whenCold, len(whileHot))
	for k, want := range whileHot {
		require.Equal(t, string(want), string(whenCold[k]), "%s: the cold run's page differs from the hot run's", k)
	}
}

// A page read from the log stops at the position it was given, the published state's: the log may already hold
// events the state has not published, and those (a revocation, mail after it) wait for the next page.
func TestReadSinceStopsAtTheHead(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.seed()
	render := func(r *eventlog.Event) (teamEvent, error) {
		return renderEventWith(r, eventViewer{identity: identity{role: events.RoleAdmin}}, neverLifted)
	}
	all, err := readSince(f.log, runR, 0, math.MaxUint64, maxSinceLimit, 1<<20, render)
	require.NoError(t, err)
	require.Greater(t, len(all.events), 3)
	var last teamEvent
	require.NoError(t, json.Unmarshal(all.events[2], &last))
	head := last.Metadata.Position

	page, err := readSince(f.log, runR, 0, head, maxSinceLimit, 1<<20, render)
	require.NoError(t, err)
	require.Equal(t, all.events[:3], page.events, "the events up to the head, and none after it")
	require.False(t, page.hasMore)
	require.Equal(t, last.Metadata.Seq, page.nextSeq, "the next page starts after the head")
}

// TestEventsSinceIsChargedWhatItReads: events.since is charged one unit for every event it reads of the log, the
// one past its page included, which it reads to learn that there is more (a page cut at its limit) or reads and
// renders to find it too large for the rest of the frame (a page cut at the frame), where it was charged only the
// events it returned; a page that ends the run reads none past it. The answers are unchanged.
func TestEventsSinceIsChargedWhatItReads(t *testing.T) {
	const full = 1 << 20
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor, RatePerCredential: 1,
		BurstPerCredential: full}})
	clock := installPacerClock(f)
	s := f.seed()
	clock.freeze()
	last := f.lastVersion(runR)
	p := f.dial()
	p.hello(runR, taskP, s.p)
	for _, tc := range []struct {
		name         string
		since, limit int
		returned     int // events the page returns, -1: fewer than limit, cut at the frame
		more         bool
		read         int // events read: returned, and the one past the page when there is more
	}{
		{"a page cut at its limit", 0, 1, 1, true, 2},
		{"a page cut at the frame", 0, maxSinceLimit, -1, true, -1},
		{"the run's last event", int(last) - 1, maxSinceLimit, 1, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clock.level(workerKey(taskP))
			page := p.ok("events.since", map[string]any{"sinceSeq": tc.since, "limit": tc.limit})
			n := len(page["events"].([]any))
			require.Equal(t, tc.more, page["hasMore"])
			read := tc.read
			if tc.returned < 0 {
				require.Positive(t, n)
				require.Less(t, n, int(last), "the page must end on its size: the frame does not test that")
				read = n + 1
			} else {
				require.Equal(t, tc.returned, n)
			}
			require.Equal(t, float64(1+read), before-clock.level(workerKey(taskP)),
				"the request and the %d events it read", read)
		})
	}
}
