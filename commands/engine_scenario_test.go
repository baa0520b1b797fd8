package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Engine scenario files (testdata/engine-scenarios/*.txt) pin what only the
// engine decides, above Decide: whose a command id is, the fingerprint of a
// retry, the engine's own namespace, and what survives a restart. Each case
// runs a real Engine on an in-memory file system. Directives, one per line:
//
//	# comment                  kept verbatim
//	case <name>                starts a case (a fresh engine and store)
//	clock <+|-><duration>      moves the engine clock (time.ParseDuration)
//	when <role> <run> <task> <commandId> <method> <json>
//	                           a broker request from the principal that role, run
//	                           and task name ("-" = none; commandId "-" = none):
//	                           ParseCommand with that caller, then Engine.Submit
//	tick                       Engine.Tick, the engine clock's expiry pass
//	restart                    close the engine and the log, and open both again
//	then answer <json>         the last when's answer: {"replayed", "result"} or
//	                           {"replayed", "error": {"code", "reason", "message"}}
//	then expired <n>           how many expiries the last tick decided
//	then outcome <role> <run> <task> <commandId> <json|none>
//	                           the recorded outcome of that principal's id:
//	                           {"events": count, "code": …} or none
//	then head <position>       the log's last durable position
//	then state <query> <args>  a projections query, as in scenario files
//
// go test ./commands -run TestEngineScenarios -rewrite rewrites every then
// line from the actual output; review the diff.
func TestEngineScenarios(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "engine-scenarios", "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) { runEngineScenarioFile(t, path) })
	}
}

func runEngineScenarioFile(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var es *engineScenario
	var out []string
	for i, text := range lines {
		where := fmt.Sprintf("%s:%d", path, i+1)
		word, rest := scenarioWord(text)
		if word == "case" {
			if es != nil {
				es.close()
			}
			es = newEngineScenario(t)
			out = append(out, text)
			continue
		}
		if word == "" || strings.HasPrefix(word, "#") {
			out = append(out, text)
			continue
		}
		if es == nil {
			es = newEngineScenario(t)
		}
		got, err := es.step(word, rest)
		require.NoError(t, err, "%s: %s", where, text)
		if word == "then" {
			kind, _ := scenarioWord(rest)
			actual := "then " + kind + " " + got
			if !engineThenEqual(text, actual) {
				if *scenarioRewrite {
					text = actual
				} else {
					t.Errorf("%s:\n  want %s\n  got  %s", where, text, actual)
				}
			}
		}
		out = append(out, text)
	}
	if es != nil {
		es.close()
	}
	if *scenarioRewrite {
		text := strings.Join(out, "\n") + "\n"
		if text != string(b) {
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		}
	}
}

// engineThenEqual compares a then line with the actual one: the words as
// words, the JSON (if any) as a value.
func engineThenEqual(want, got string) bool {
	wi, gi := strings.IndexAny(want, "{["), strings.IndexAny(got, "{[")
	if wi < 0 || gi < 0 {
		return strings.Join(strings.Fields(want), " ") == strings.Join(strings.Fields(got), " ")
	}
	return strings.Join(strings.Fields(want[:wi]), " ") == strings.Join(strings.Fields(got[:gi]), " ") &&
		jsonEqual(want[wi:], got[gi:])
}

// engineScenario is one case: an engine on an in-memory store, its clock,
// and the answers of the latest when and tick.
type engineScenario struct {
	t       *testing.T
	fs      vfs.FS
	clock   *testClock
	ids     func() string
	log     *eventlog.Log
	eng     *Engine
	secrets int
	answer  *Reply
	expired int
}

func newEngineScenario(t *testing.T) *engineScenario {
	clock := newTestClock()
	clock.ns.Store(scenarioEpoch.UnixNano())
	es := &engineScenario{t: t, fs: vfs.NewMem(), clock: clock, ids: counterIDs()}
	es.open()
	return es
}

func (es *engineScenario) open() {
	l, err := eventlog.Open("db", &eventlog.Options{FS: es.fs})
	require.NoError(es.t, err)
	e, err := Open(l, Options{Clock: es.clock.Now, NewID: es.ids, ExpiryInterval: -1})
	require.NoError(es.t, err)
	es.log, es.eng = l, e
}

func (es *engineScenario) close() {
	require.NoError(es.t, es.eng.Close())
	require.NoError(es.t, es.log.Close())
}

// principal is the principal a credential of role, run and task would
// authenticate as (the broker's identity).
func scenarioPrincipal(role, run, task string) (events.Principal, error) {
	switch role {
	case events.RoleAdmin:
		return events.AdminPrincipal(), nil
	case events.RoleOrchestrator:
		return events.OrchestratorPrincipal(run), nil
	case events.RoleWorker:
		return events.WorkerPrincipal(run, task), nil
	case events.RoleEngine:
		return events.EnginePrincipal(), nil
	}
	return events.Principal{}, fmt.Errorf("unknown role %q", role)
}

func (es *engineScenario) step(word, rest string) (string, error) {
	switch word {
	case "clock":
		d, err := time.ParseDuration(strings.TrimPrefix(rest, "+"))
		if err != nil {
			return "", fmt.Errorf("clock: %w", err)
		}
		es.clock.Advance(d)
	case "when":
		f := strings.SplitN(rest, " ", 6)
		if len(f) < 5 {
			return "", errors.New("when: want <role> <run> <task> <commandId> <method> <json>")
		}
		params := json.RawMessage("null")
		if len(f) == 6 && strings.TrimSpace(f[5]) != "" {
			params = json.RawMessage(strings.TrimSpace(f[5]))
		}
		return "", es.when(f[0], dash(f[1]), dash(f[2]), dash(f[3]), f[4], params)
	case "tick":
		es.expired = es.eng.Tick(context.Background())
	case "restart":
		es.close()
		es.open()
	case "then":
		return es.then(rest)
	default:
		return "", fmt.Errorf("unknown directive %q", word)
	}
	return "", nil
}

func (es *engineScenario) when(role, run, task, id, method string, params json.RawMessage) error {
	p, err := scenarioPrincipal(role, run, task)
	if err != nil {
		return err
	}
	cmd, err := ParseCommand(method, params, Caller{Role: role, RunID: run, TaskID: task})
	if err != nil {
		var rej *RejectedError
		if !errors.As(err, &rej) {
			return fmt.Errorf("ParseCommand: %w", err)
		}
		es.answer = &Reply{Rejected: rej}
		return nil
	}
	// The broker mints the secrets a command issues; the engine sees digests.
	switch c := cmd.(type) {
	case *CredentialIssue:
		c.Digest = es.digest()
	case *RunCreate:
		c.OrchestratorDigest = es.digest()
	}
	r, err := es.eng.Submit(context.Background(),
		Request{Principal: p, CommandID: id, Actor: p.Actor(), Command: cmd})
	if err != nil {
		return fmt.Errorf("Submit: %w", err)
	}
	es.answer = &r
	return nil
}

func (es *engineScenario) digest() string {
	es.secrets++
	return digestHex(fmt.Sprintf("secret-%d", es.secrets))
}

func (es *engineScenario) then(rest string) (string, error) {
	kind, args := scenarioWord(rest)
	switch kind {
	case "answer":
		if es.answer == nil {
			return "", errors.New("then answer: no when before it")
		}
		a := map[string]any{"replayed": es.answer.Replayed}
		if r := es.answer.Rejected; r != nil {
			a["error"] = map[string]string{"code": r.Code, "reason": r.Reason, "message": r.Message}
		} else {
			a["result"] = json.RawMessage(es.answer.Result)
		}
		return compactJSON(a)
	case "expired":
		return strconv.Itoa(es.expired), nil
	case "outcome":
		f := strings.Fields(args)
		if len(f) < 4 {
			return "", errors.New("then outcome: want <role> <run> <task> <commandId>")
		}
		p, err := scenarioPrincipal(f[0], dash(f[1]), dash(f[2]))
		if err != nil {
			return "", err
		}
		prefix := strings.Join(f[:4], " ") + " "
		o, err := es.log.Outcome(p.Key(), f[3])
		if errors.Is(err, eventlog.ErrNotFound) {
			return prefix + "none", nil
		}
		if err != nil {
			return "", err
		}
		s, err := compactJSON(map[string]any{"events": o.Count, "code": o.Code})
		return prefix + s, err
	case "head":
		h, _ := es.log.Head()
		return strconv.FormatUint(h, 10), nil
	case "state":
		w := &scenarioWorld{t: es.t}
		es.eng.Read(func(s *projections.State) { w.s = s.Clone() })
		if i := strings.IndexAny(args, "{["); i >= 0 {
			args = args[:i] // the expected value, not part of the query
		}
		q := strings.Fields(args)
		if len(q) == 0 {
			return "", errors.New("then state: want a query")
		}
		v, err := w.query(q)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(v)); err != nil {
			return "", err
		}
		return strings.Join(q, " ") + " " + buf.String(), nil
	}
	return "", fmt.Errorf("unknown then %q", kind)
}

func compactJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
