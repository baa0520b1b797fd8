package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// boundCall is a call of a method that its caller may make on the fixture's state: accepted, or refused for a
// reason of that state, never for a param's value. The probe changes one param of it.
type boundCall struct {
	c      *client
	params map[string]any
}

// TestProtocolBoundsEnforced: every numeric bound (min, max), array bound (maxItems, and maxLength of each item)
// and enum docs/protocol.json declares is the server's, and a number it declares no bound of is refused at none.
// For each method and param of the description, a fresh valid call by the right principal on real fixture ids is
// sent with the param at its bound (every value of an enum), which must not be refused for that param, and one past
// it (below min, above max, a half past for a number that need not be whole, one item more, one char more, a value
// outside the enum), which must be refused bad-params naming it. A method that answers no bad-params (hello: pi-crew
// answers every bad hello auth) must refuse it with a code it declares; a param whose note says out of range is
// recorded, with that recorded refusal (policy-denied naming it). A number the description leaves unbounded (no
// min, max, nor a note of how it is clamped) is sent at -1 and 2^53, and must not be refused for it.
//
// The params probed are read off the description, so a bound added later is probed here, and a method with a
// bounded or unbounded number and no fixture call below fails.
func TestProtocolBoundsEnforced(t *testing.T) {
	// Room for every delegation and message the probes make.
	cfg := projections.DefaultConfig()
	cfg.MaxSlots, cfg.SlotShare, cfg.QuotaMsgsPerMin = 64, 64, 1<<20
	f := newFixture(t, fixtureOpts{opts: wideOpen(), config: &cfg})
	s := f.seed()
	a, o, p := f.dial(), f.dial(), f.dial()
	a.helloAdmin()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)

	n := 0
	fresh := func(prefix string) string { n++; return fmt.Sprintf("%s%d", prefix, n) }
	newSub := func() string {
		return p.ok("delegate.request", map[string]any{"prompt": "p"})["grandchildTaskRef"].(string)
	}
	newTask := func() string {
		id := fresh("T")
		o.ok("task.create", map[string]any{"taskId": id, "role": "executor", "agent": "a", "title": id, "cwd": "/w"})
		return id
	}
	newWorker := func() *client {
		id := newTask()
		o.ok("task.transition", map[string]any{"taskId": id, "to": "running"})
		w := f.dial()
		w.hello(runR, id, o.ok("credential.issue", map[string]any{"taskId": id})["token"].(string))
		return w
	}
	var liveJob string
	newJob := func() string {
		// A run has one live job at a time: the last one ends first (whatever the probe left it as).
		if liveJob != "" {
			o.call("job.transition", map[string]any{"jobId": liveJob, "to": "cancelled"})
		}
		liveJob = fresh("J")
		o.ok("job.create", map[string]any{"jobId": liveJob, "taskId": taskP, "tools": testGrant})
		return liveJob
	}
	newRun := func() *client {
		id := fresh("RB")
		orch := f.seedRun(id, "T")
		c := f.dial()
		c.hello(id, events.OrchestratorKey, orch)
		return c
	}
	message := func() string {
		return o.ok("msg.send", map[string]any{"to": taskP, "body": "b"})["messageId"].(string)
	}
	fixedJob := newJob()
	write := importWriteOf("import:bounds", runR, importEventOf(events.TypeForeignImported, 1790928001000,
		map[string]any{"source": "picrew", "type": "task.progress", "seq": 7, "time": "2026-10-02T08:00:01.000Z"}))

	calls := map[string]func() boundCall{
		"delegate.request": func() boundCall { return boundCall{p, map[string]any{"prompt": "p"}} },
		"delegate.settle": func() boundCall {
			return boundCall{o, map[string]any{"subId": newSub(), "outcome": "ok", "text": "t"}}
		},
		"delegate.spawned": func() boundCall { return boundCall{o, map[string]any{"subId": newSub(), "pid": 7}} },
		"escalate":         func() boundCall { return boundCall{p, map[string]any{"to": "parent", "body": "b"}} },
		"events.subscribe": func() boundCall {
			c := f.dial()
			c.helloAdmin()
			return boundCall{c, map[string]any{"runId": runR, "types": []any{events.TypeRunCreated}}}
		},
		"hello": func() boundCall {
			return boundCall{f.dial(), map[string]any{"protocol": 1, "role": events.RoleAdmin, "token": testAdminToken}}
		},
		methodImportAppend: func() boundCall {
			return boundCall{a, map[string]any{"source": "s", "writes": []any{write}}}
		},
		methodImportCheckpoints: func() boundCall { return boundCall{a, map[string]any{"source": "s"}} },
		"job.transition": func() boundCall {
			return boundCall{o, map[string]any{"jobId": newJob(), "to": "paused"}}
		},
		"lease.open": func() boundCall {
			return boundCall{o, map[string]any{"jobId": newJob(), "mode": "start", "rootToolCallId": fresh("root")}}
		},
		"mailbox.ack":       func() boundCall { return boundCall{p, map[string]any{"messageIds": []any{message()}}} },
		"mailbox.deliver":   func() boundCall { return boundCall{p, map[string]any{"messageIds": []any{message()}}} },
		"msg.inbox":         func() boundCall { return boundCall{p, map[string]any{}} },
		"msg.send":          func() boundCall { return boundCall{o, map[string]any{"to": []any{taskQ}, "body": "b"}} },
		"query.delegations": func() boundCall { return boundCall{o, map[string]any{}} },
		"query.job":         func() boundCall { return boundCall{o, map[string]any{"jobId": fixedJob}} },
		"query.jobs":        func() boundCall { return boundCall{o, map[string]any{}} },
		"query.ledger":      func() boundCall { return boundCall{o, map[string]any{}} },
		"query.mailbox":     func() boundCall { return boundCall{o, map[string]any{"taskId": taskP}} },
		"query.runs":        func() boundCall { return boundCall{a, map[string]any{"status": []any{"running"}}} },
		"query.tasks":       func() boundCall { return boundCall{o, map[string]any{}} },
		"run.create": func() boundCall {
			return boundCall{a, map[string]any{"runId": fresh("RC"), "team": "t", "goal": "g", "cwd": "/w"}}
		},
		"run.transition": func() boundCall { return boundCall{newRun(), map[string]any{"to": "running"}} },
		"steer.push":     func() boundCall { return boundCall{o, map[string]any{"taskId": taskQ, "body": "b"}} },
		"task.create": func() boundCall {
			return boundCall{o, map[string]any{"taskId": fresh("T"), "role": "executor", "agent": "a", "title": "t",
				"cwd": "/w", "dependsOn": []any{taskP}}}
		},
		"task.transition": func() boundCall { return boundCall{o, map[string]any{"taskId": newTask(), "to": "running"}} },
		"task.usage": func() boundCall {
			return boundCall{o, map[string]any{"taskId": taskQ, "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}
		},
		"task.waitStatus": func() boundCall {
			return boundCall{o, map[string]any{"taskId": taskQ, "until": "running", "timeoutMs": 0}}
		},
		"wait.request": func() boundCall {
			return boundCall{newWorker(), map[string]any{"question": "q", "options": []any{"a"}}}
		},
	}

	d, err := Describe()
	require.NoError(t, err)
	probed := map[string]bool{}
	for _, m := range d.Methods {
		for _, pd := range m.Params {
			bounded := pd.Min != nil || pd.Max != nil || pd.MaxItems > 0 || len(pd.Enum) > 0
			if !bounded && !unbounded(pd) {
				continue
			}
			call, ok := calls[m.Name]
			require.True(t, ok, "%s.%s is a bounded param or an unbounded number in the description: give %s a call "+
				"in TestProtocolBoundsEnforced", m.Name, pd.Name, m.Name)
			probed[m.Name] = true
			send := func(v any) *wire.Error {
				bc := call()
				params := maps.Clone(bc.params)
				params[pd.Name] = v
				return bc.c.call(m.Name, params).Error
			}
			if !bounded {
				t.Run(m.Name+"."+pd.Name+"/unbounded", func(t *testing.T) {
					for _, v := range []json.Number{"-1", "9007199254740992"} {
						if e := send(v); e != nil {
							require.False(t, refusedFor(m, pd, v, e), "%s.%s=%s refused, and the description declares "+
								"no bound: give it min or max in broker/protocol_spec.go (%s)", m.Name, pd.Name, v, e.Message)
						}
					}
				})
				continue
			}
			t.Run(m.Name+"."+pd.Name, func(t *testing.T) {
				for _, v := range atBound(pd, call().params[pd.Name]) {
					if e := send(v); e != nil {
						require.False(t, refusedFor(m, pd, v, e), "%s.%s=%s at its bound refused: %s %s", m.Name, pd.Name,
							show(v), e.Code, e.Message)
					}
				}
				for _, v := range pastBound(pd, call().params[pd.Name]) {
					e := send(v)
					require.NotNil(t, e, "%s.%s=%s past its bound accepted", m.Name, pd.Name, show(v))
					require.True(t, refusedFor(m, pd, v, e), "%s.%s=%s past its bound refused for another reason: %s %s",
						m.Name, pd.Name, show(v), e.Code, e.Message)
				}
			})
		}
	}
	for name := range calls {
		require.True(t, probed[name], "%s has no bounded param nor unbounded number: drop its call", name)
	}
}

// refusedFor reports whether e is the refusal of param pd of method m for its value v: bad-params naming it (its
// name or its item's, or the word refusedWord gives, with what it must be), or for a value outside an enum, quoting
// it; where m answers no bad-params, a code it declares; a param whose note says out of range is recorded, its
// recorded refusal (policy-denied naming it).
func refusedFor(m methodDesc, pd paramDesc, v any, e *wire.Error) bool {
	name := pd.Name
	if w, ok := refusedWord[m.Name+"."+pd.Name]; ok {
		name = w
	}
	// An array's refusal may name one of its items ("each option must …").
	named := regexp.MustCompile(`\b`+regexp.QuoteMeta(strings.TrimSuffix(name, "s"))+`s?\b`).MatchString(e.Message) &&
		regexp.MustCompile(`must|out of range|outside|at most|invalid|is not a`).MatchString(e.Message)
	if s, ok := v.(string); ok && len(pd.Enum) > 0 && !slices.Contains(pd.Enum, s) {
		named = named || strings.Contains(e.Message, strconv.Quote(s))
	}
	switch {
	case strings.Contains(pd.Note, "recorded"):
		return e.Code == wire.CodePolicyDenied && named
	case !slices.Contains(m.Errors, wire.CodeBadParams):
		return slices.Contains(m.Errors, e.Code)
	}
	return e.Code == wire.CodeBadParams && named
}

// refusedWord is the word a refusal names a param by where it is not the param's name.
var refusedWord = map[string]string{"msg.send.to": "recipient"}

// unbounded reports whether pd is a number the description gives no bound: neither min nor max, nor a note of how
// the server floors or clamps it (pi-crew's numbers, never refused).
func unbounded(pd paramDesc) bool {
	return (pd.Type == "integer" || pd.Type == "number") && pd.Min == nil && pd.Max == nil &&
		!strings.Contains(pd.Note, "clamped") && !strings.Contains(pd.Note, "floored")
}

// atBound are the values of param pd at its bounds; sample is its value in the fixture's call (an array's item).
func atBound(pd paramDesc, sample any) []any {
	var out []any
	if pd.Min != nil {
		out = append(out, number(*pd.Min, 0))
	}
	if pd.Max != nil {
		out = append(out, number(*pd.Max, 0))
	}
	if pd.MaxItems > 0 {
		out = append(out, items(sample, pd.MaxItems))
	}
	if eachItem(pd) {
		out = append(out, []any{strings.Repeat("a", pd.MaxLength)})
	}
	for _, v := range pd.Enum {
		out = append(out, v)
	}
	return out
}

// pastBound are the values of param pd one past its bounds: for a number that is not an integer, a half past too.
func pastBound(pd paramDesc, sample any) []any {
	var out []any
	steps := []float64{1}
	if pd.Type == "number" {
		steps = append(steps, 0.5)
	}
	for _, step := range steps {
		if pd.Min != nil {
			out = append(out, number(*pd.Min, -step))
		}
		if pd.Max != nil {
			out = append(out, number(*pd.Max, step))
		}
	}
	if pd.MaxItems > 0 {
		out = append(out, items(sample, pd.MaxItems+1))
	}
	if eachItem(pd) {
		out = append(out, []any{strings.Repeat("a", pd.MaxLength+1)})
	}
	if len(pd.Enum) > 0 {
		out = append(out, "not-"+pd.Enum[0])
	}
	return out
}

// eachItem reports whether pd is an array whose maxLength bounds each of its strings (an enum's are its values).
func eachItem(pd paramDesc) bool {
	return pd.MaxItems > 0 && pd.MaxLength > 0 && len(pd.Enum) == 0
}

// number is bound+step as a JSON number written exactly: a bound as large as 2^53 plus one is no float64.
//
// NB: a step a float64 cannot tell from the bound (1 past 2^53) is widened to the next float64 beyond it: params read a
// number as JavaScript does, so 2^53+1 is 2^53, at the bound, not past it.
func number(bound, step float64) json.Number {
	if step != 0 && bound+step == bound {
		step = math.Nextafter(bound, bound+math.Copysign(math.Inf(1), step)) - bound
	}
	if step == math.Trunc(step) && bound == math.Trunc(bound) {
		return json.Number(strconv.FormatInt(int64(bound)+int64(step), 10))
	}
	return json.Number(strconv.FormatFloat(bound+step, 'f', -1, 64))
}

// items is an array of n copies of sample's first item (sample itself when it is no array).
func items(sample any, n int) []any {
	item := sample
	if arr, ok := sample.([]any); ok {
		item = arr[0]
	}
	out := make([]any, n)
	for i := range out {
		out[i] = item
	}
	return out
}

func show(v any) string {
	if arr, ok := v.([]any); ok {
		return fmt.Sprintf("[%d items]", len(arr))
	}
	return fmt.Sprint(v)
}

// clampNote is what a param's note says of its clamp: "clamped to lo..hi", or "clamped to hi" above its min.
var clampNote = regexp.MustCompile(`clamped to (?:(-?\d+)\.\.)?(\d+)`)

// TestProtocolClampsEnforced: a param whose note in docs/protocol.json says it is clamped is answered at the clamp,
// neither refused nor taken as it is: one past each end (and a number far past the top, and a fraction) is sent on
// the fixture's state, where what the server used can be seen in its answer, and must be what the clamp gives. The
// params are read off the description: a clamp added later with no observer below fails.
func TestProtocolClampsEnforced(t *testing.T) {
	cfg := projections.DefaultConfig()
	cfg.QuotaMsgsPerMin = 1 << 20
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameCeiling}, config: &cfg})
	s := f.seed()
	o, p := f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)
	// More messages in P's mailbox, and events in the run, than any page holds.
	for i := 0; i < maxInboxLimit+1; i++ {
		r, err := f.eng.Submit(context.Background(), commands.Request{Actor: events.Actor{Role: events.RoleOrchestrator},
			Command: &commands.MessageSend{RunID: runR, To: []string{taskP}, Body: `"b"`}})
		require.NoError(t, err)
		require.Nil(t, r.Rejected)
	}
	newWorker := func(n int) *client {
		id := fmt.Sprintf("W%d", n)
		o.ok("task.create", map[string]any{"taskId": id, "role": "executor", "agent": "a", "title": id, "cwd": "/w"})
		o.ok("task.transition", map[string]any{"taskId": id, "to": "running"})
		w := f.dial()
		w.hello(runR, id, o.ok("credential.issue", map[string]any{"taskId": id})["token"].(string))
		return w
	}
	workers := 0

	// observe sends v as the param and answers the value the server used; top is false where only the clamp's
	// bottom can be seen in a test (its top is a wait of that long).
	type observer struct {
		observe func(t *testing.T, v json.Number) int64
		top     bool
	}
	observers := map[string]observer{
		"msg.inbox.limit": {func(t *testing.T, v json.Number) int64 {
			return int64(len(p.ok("msg.inbox", map[string]any{"limit": v})["messages"].([]any)))
		}, true},
		"events.since.limit": {func(t *testing.T, v json.Number) int64 {
			return int64(len(p.ok("events.since", map[string]any{"sinceSeq": 0, "limit": v})["events"].([]any)))
		}, true},
		"wait.request.timeoutSec": {func(t *testing.T, v json.Number) int64 {
			workers++
			w := newWorker(workers)
			return int64(w.ok("wait.request", map[string]any{"question": "q", "timeoutSec": v})["timeoutSec"].(float64))
		}, true},
		"task.waitStatus.timeoutMs": {func(t *testing.T, v json.Number) int64 {
			// Q stays running: a wait for its completion times out when the timeout used is over.
			e := o.call("task.waitStatus", map[string]any{"taskId": taskQ, "until": "completed", "timeoutMs": v}).Error
			require.NotNil(t, e)
			require.Equal(t, wire.CodeWaitTimeout, e.Code, e.Message)
			return 0
		}, false},
	}

	d, err := Describe()
	require.NoError(t, err)
	observed := map[string]bool{}
	for _, m := range d.Methods {
		for _, pd := range m.Params {
			match := clampNote.FindStringSubmatch(pd.Note)
			if match == nil {
				continue
			}
			key := m.Name + "." + pd.Name
			ob, ok := observers[key]
			require.True(t, ok, "%s is clamped in the description: give it an observer in TestProtocolClampsEnforced", key)
			observed[key] = true
			hi, err := strconv.ParseInt(match[2], 10, 64)
			require.NoError(t, err)
			lo := int64(0)
			switch {
			case match[1] != "":
				lo, err = strconv.ParseInt(match[1], 10, 64)
				require.NoError(t, err)
			case pd.Min != nil:
				lo = int64(*pd.Min)
			}
			t.Run(key, func(t *testing.T) {
				if pd.Min == nil || float64(lo-1) >= *pd.Min {
					require.Equal(t, lo, ob.observe(t, json.Number(strconv.FormatInt(lo-1, 10))), "%s below %d", key, lo)
				}
				if !ob.top {
					return
				}
				for _, v := range []string{strconv.FormatInt(hi, 10), strconv.FormatInt(hi+1, 10), "1e300",
					strconv.FormatInt(hi, 10) + ".5"} {
					require.Equal(t, hi, ob.observe(t, json.Number(v)), "%s=%s", key, v)
				}
			})
		}
	}
	for key := range observers {
		require.True(t, observed[key], "%s is not clamped in the description: drop its observer", key)
	}
}
