package commands

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Scenario files (testdata/scenarios/*.txt) pin the golden scenarios of D§12
// as transcripts a reviewer can read. Directives, one per line:
//
//	# comment                  kept verbatim
//	case <name>                starts a case (a subtest with a fresh state);
//	                           lines before the first case run first in every case
//	config k=v …               engine.configured (defaults of projections.DefaultConfig;
//	                           catalog=a,b · catalog= is the empty catalog; slotShare,
//	                           slotWaitSec, quotaEvents, quotaBytes, quotaMsgsPerMin, quotaReserve,
//	                           quotaWorkerMsgShare, quotaWorkerShare;
//	                           budgetMode=picrew|nested; proxyPayloadBytes, proxyManifestBytes,
//	                           proxyMaxInFlight, proxyMaxRequests, revokedRootLimit;
//	                           rerouteEndedAttempts, shareByDelegator, workerSlotShare=true|false)
//	given <type> <stream> <json>  an event, decoded with events.NewPayload, folded
//	clock +<duration>          advances the clock (time.ParseDuration)
//	when <role> <run> <task> <method> <json>
//	                           a broker request: ParseCommand with Caller{role, run, task}
//	                           ("-" = none), then Decide; its events are committed
//	tick                       the engine clock's expiry pass (Engine.Tick)
//	rebuild [<pos>]            a restart: fresh fold of positions 1..pos (default all),
//	                           checked against the incremental state and a snapshot round trip
//	then events [none]         the last when's events, one "<type> <payload json>" per entry
//	then result <json>         the last when's result
//	then error <code> <reason> the last when's rejection; the next line is its message
//	then state <query> <args>  a projections query as JSON (slots, config, inflight, run R,
//	                           task R T, tasks R, delegation R S, delegations R, ledger R,
//	                           mailbox R <recipient|->, asks R, credentials R, credential R K,
//	                           job R J, roots R, authorize R <parentToolCallId|-> <tool>)
//	then log <from> <to> [none] the committed events at those positions
//
// A then block ends at a blank line or the next directive. Every when must be
// followed by then events and then result/error. JSON is compared as JSON.
// go test ./commands -run TestScenarios -rewrite regenerates every then block
// from the actual output; review the diff.
var scenarioRewrite = flag.Bool("rewrite", false, "rewrite the then blocks of testdata/scenarios from actual output")

func TestScenarios(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) { runScenarioFile(t, path) })
	}
}

type scenarioLine struct {
	no   int
	text string
}

func runScenarioFile(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var all []scenarioLine
	for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		all = append(all, scenarioLine{no: i + 1, text: l})
	}
	first := len(all)
	for i, l := range all {
		if word, _ := scenarioWord(l.text); word == "case" {
			first = i
			break
		}
	}
	preamble, rest := all[:first], all[first:]
	if len(rest) == 0 { // no case lines: the whole file is one case
		preamble, rest = nil, all
	}
	out := linesText(preamble)
	for len(rest) > 0 {
		end := 1
		for end < len(rest) {
			if word, _ := scenarioWord(rest[end].text); word == "case" {
				break
			}
			end++
		}
		lines := rest[:end]
		rest = rest[end:]
		name := "main"
		if word, arg := scenarioWord(lines[0].text); word == "case" {
			name = strings.TrimSpace(arg)
		}
		caseOut := linesText(lines) // what is kept if the case stops early
		t.Run(name, func(t *testing.T) {
			r := &scenarioRunner{t: t, path: path, w: newScenarioWorld(t)}
			r.run(preamble, false)
			caseOut = r.run(lines, true)
		})
		out = append(out, caseOut...)
	}
	if *scenarioRewrite {
		text := strings.Join(out, "\n") + "\n"
		if text != string(b) {
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		}
	}
}

func linesText(ls []scenarioLine) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.text
	}
	return out
}

// scenarioWord splits a line into its directive word and the rest.
func scenarioWord(line string) (word, rest string) {
	word, rest, _ = strings.Cut(strings.TrimSpace(line), " ")
	return word, strings.TrimSpace(rest)
}

// scenarioDirectives are the words that end a then block.
var scenarioDirectives = map[string]bool{
	"case": true, "config": true, "given": true, "clock": true, "when": true, "tick": true, "rebuild": true,
	"then": true,
}

type scenarioRunner struct {
	t    *testing.T
	path string
	w    *scenarioWorld
	out  []string
	// The latest when: its outcome, its line, whether its events and its
	// outcome were asserted, and where its group ends in out.
	last                  *scenarioOutcome
	lastLine              int
	sawEvents, sawOutcome bool
	groupEnd              int
}

// run executes lines and returns them with every then block as it should
// read: unchanged, or the actual output with -rewrite.
func (r *scenarioRunner) run(lines []scenarioLine, thenAllowed bool) []string {
	r.out = nil
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		word, rest := scenarioWord(l.text)
		if word == "" || strings.HasPrefix(word, "#") {
			r.out = append(r.out, l.text)
			continue
		}
		if word == "then" {
			if !thenAllowed {
				r.fatalf(l, "then is not allowed before the first case")
			}
			j := i + 1
			for j < len(lines) {
				w, _ := scenarioWord(lines[j].text)
				if strings.TrimSpace(lines[j].text) == "" || scenarioDirectives[w] || strings.HasPrefix(w, "#") {
					break
				}
				j++
			}
			r.then(l, rest, lines[i+1:j])
			i = j - 1
			continue
		}
		r.finishWhen()
		r.out = append(r.out, l.text)
		switch word {
		case "case":
		case "config":
			r.check(l, r.w.config(strings.Fields(rest)))
		case "given":
			typ, rest := scenarioWord(rest)
			stream, payload := scenarioWord(rest)
			r.check(l, r.w.given(typ, stream, payload))
		case "clock":
			d, err := time.ParseDuration(strings.TrimPrefix(rest, "+"))
			if err != nil || d < 0 {
				r.fatalf(l, "clock: want +<duration>, got %q", rest)
			}
			r.w.now += int64(d)
		case "when":
			f := strings.SplitN(rest, " ", 5)
			if len(f) < 4 {
				r.fatalf(l, "when: want <role> <run> <task> <method> <json>")
			}
			params := json.RawMessage("null")
			if len(f) == 5 && strings.TrimSpace(f[4]) != "" {
				params = json.RawMessage(strings.TrimSpace(f[4]))
			}
			if !json.Valid(params) {
				r.fatalf(l, "when: params are not JSON")
			}
			o, err := r.w.when(f[0], dash(f[1]), dash(f[2]), f[3], params)
			r.check(l, err)
			r.startWhen(l, o)
		case "tick":
			o, err := r.w.tick()
			r.check(l, err)
			r.startWhen(l, o)
		case "rebuild":
			pos := 0
			if rest != "" {
				var err error
				if pos, err = strconv.Atoi(rest); err != nil || pos <= 0 {
					r.fatalf(l, "rebuild: want a position, got %q", rest)
				}
			}
			r.check(l, r.w.rebuild(pos))
		default:
			r.fatalf(l, "unknown directive %q", word)
		}
		r.check(l, r.w.checkInvariants())
	}
	r.finishWhen()
	return r.out
}

func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

func (r *scenarioRunner) startWhen(l scenarioLine, o scenarioOutcome) {
	r.last, r.lastLine, r.sawEvents, r.sawOutcome = &o, l.no, false, false
	r.groupEnd = len(r.out)
}

// finishWhen ends the latest when's group: its events and its outcome must
// have been asserted (with -rewrite, the missing blocks are written).
func (r *scenarioRunner) finishWhen() {
	if r.last == nil {
		return
	}
	var missing []string
	if !r.sawEvents {
		missing = append(missing, r.renderEvents()...)
	}
	if !r.sawOutcome {
		missing = append(missing, r.renderOutcome()...)
	}
	if len(missing) > 0 {
		if *scenarioRewrite {
			r.out = append(r.out[:r.groupEnd], append(missing, r.out[r.groupEnd:]...)...)
		} else {
			r.t.Errorf("%s:%d: a when needs then events and then result (or then error); actual:\n%s",
				r.path, r.lastLine, strings.Join(missing, "\n"))
		}
	}
	r.last = nil
}

// then checks one then block against the actual output.
func (r *scenarioRunner) then(l scenarioLine, header string, block []scenarioLine) {
	args := strings.Fields(header)
	if len(args) == 0 {
		r.fatalf(l, "then what?")
	}
	expected := strings.Join(linesText(block), "\n")
	var actual []string
	ok := false
	switch args[0] {
	case "events":
		r.needWhen(l)
		r.sawEvents = true
		actual = r.renderEvents()
		if len(args) > 1 && args[1] == "none" {
			ok = len(r.last.events) == 0 && strings.TrimSpace(expected) == ""
		} else {
			ok = len(r.last.events) > 0 && entriesEqual(expected, strings.Join(actual[1:], "\n"))
		}
	case "result", "error":
		r.needWhen(l)
		r.sawOutcome = true
		actual = r.renderOutcome()
		if args[0] == "error" {
			ok = r.last.err != nil && strings.Join(append([]string{"then " + header}, linesText(block)...),
				"\n") == strings.Join(actual, "\n")
		} else {
			ok = r.last.err == nil && jsonEqual(strings.TrimPrefix(header, "result")+"\n"+expected,
				scenarioJSON(r.last.result))
		}
	case "state":
		if len(args) < 2 {
			r.fatalf(l, "then state <query> <args>")
		}
		js, err := r.w.query(args[1:])
		r.check(l, err)
		actual = append([]string{"then " + header}, strings.Split(js, "\n")...)
		ok = jsonEqual(expected, js)
	case "log":
		if len(args) < 3 {
			r.fatalf(l, "then log <from> <to>")
		}
		from, err1 := strconv.Atoi(args[1])
		to, err2 := strconv.Atoi(args[2])
		if err1 != nil || err2 != nil || from < 1 || to < from {
			r.fatalf(l, "then log <from> <to>: bad positions")
		}
		var entries []string
		for _, ev := range r.w.log[min(from-1, len(r.w.log)):min(to, len(r.w.log))] {
			entries = append(entries, fmt.Sprintf("%d %s %s %s", ev.Position, ev.Stream, ev.Type,
				scenarioJSON(ev.Payload)))
		}
		if len(entries) == 0 {
			actual = []string{fmt.Sprintf("then log %d %d none", from, to)}
			ok = len(args) > 3 && args[3] == "none" && strings.TrimSpace(expected) == ""
		} else {
			actual = append([]string{fmt.Sprintf("then log %d %d", from, to)}, entries...)
			ok = entriesEqual(expected, strings.Join(entries, "\n"))
		}
	default:
		r.fatalf(l, "unknown then %q", args[0])
	}
	defer func() {
		if args[0] == "events" || args[0] == "result" || args[0] == "error" {
			r.groupEnd = len(r.out)
		}
	}()
	switch {
	case *scenarioRewrite:
		r.out = append(r.out, actual...)
	case !ok:
		r.t.Errorf("%s:%d: then %s differs\nexpected:\n%s\nactual:\n%s", r.path, l.no, header,
			strings.Join(append([]string{l.text}, linesText(block)...), "\n"), strings.Join(actual, "\n"))
		fallthrough
	default:
		r.out = append(r.out, l.text)
		r.out = append(r.out, linesText(block)...)
	}
}

func (r *scenarioRunner) needWhen(l scenarioLine) {
	if r.last == nil {
		r.fatalf(l, "then events/result/error must follow a when")
	}
}

func (r *scenarioRunner) renderEvents() []string {
	if len(r.last.events) == 0 {
		return []string{"then events none"}
	}
	out := []string{"then events"}
	for _, ev := range r.last.events {
		out = append(out, ev.Type+" "+scenarioJSON(ev.Payload))
	}
	return out
}

func (r *scenarioRunner) renderOutcome() []string {
	if e := r.last.err; e != nil {
		reason := e.Reason
		if reason == "" {
			reason = "-"
		}
		return []string{"then error " + e.Code + " " + reason, e.Message}
	}
	return []string{"then result " + scenarioJSON(r.last.result)}
}

func (r *scenarioRunner) check(l scenarioLine, err error) {
	r.t.Helper()
	if err != nil {
		r.fatalf(l, "%v", err)
	}
}

func (r *scenarioRunner) fatalf(l scenarioLine, format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s:%d: %s\n  %s", r.path, l.no, fmt.Sprintf(format, args...), l.text)
}

// entriesEqual compares two lists of "<words> <json>" entries: the words
// exactly, the JSON as JSON. An entry's JSON may span lines.
func entriesEqual(expected, actual string) bool {
	a, err1 := parseEntries(expected)
	b, err2 := parseEntries(actual)
	if err1 != nil || err2 != nil || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i][0] != b[i][0] || !jsonEqual(a[i][1], b[i][1]) {
			return false
		}
	}
	return true
}

func parseEntries(s string) ([][2]string, error) {
	var out [][2]string
	for {
		s = strings.TrimSpace(s)
		if s == "" {
			return out, nil
		}
		i := strings.IndexAny(s, "{[")
		if i < 0 {
			return nil, fmt.Errorf("no JSON in %q", s)
		}
		dec := json.NewDecoder(strings.NewReader(s[i:]))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, [2]string{strings.Join(strings.Fields(s[:i]), " "), string(raw)})
		s = s[i+int(dec.InputOffset()):]
	}
}

// jsonEqual compares two JSON texts as values.
func jsonEqual(a, b string) bool {
	va, err1 := decodeJSONValue(a)
	vb, err2 := decodeJSONValue(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(va, vb)
}

func decodeJSONValue(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}
