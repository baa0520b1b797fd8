package broker

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestProtocolDocCoversMethods fails when a method the server answers has no "### `method`" section in
// docs/protocol.md, or a section documents a method the server does not answer.
func TestProtocolDocCoversMethods(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	require.NoError(t, err)
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^### `([^`]+)`\\s*$").FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	served := Methods()
	for _, m := range served {
		require.Contains(t, documented, m, "method %s is served but not documented in docs/protocol.md", m)
	}
	for _, m := range documented {
		require.Contains(t, served, m, "docs/protocol.md documents %s, which the server does not answer", m)
	}
	require.Equal(t, len(served), len(slices.Compact(documented)), "a method is documented twice")

	// Every code the server may send is named in the doc.
	for _, c := range wire.Codes() {
		require.Contains(t, string(doc), "`"+string(c)+"`", "code %s is not in docs/protocol.md", c)
	}
}

// TestServedMethodsAnswer: every method in Methods() is dispatched (never not-implemented), so the doc test above
// checks what the server really answers.
func TestServedMethodsAnswer(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.seed()
	c := f.dial()
	c.helloAdmin()
	for _, m := range Methods() {
		if m == wire.MethodHello {
			continue
		}
		r := c.call(m, map[string]any{"runId": "R404"})
		if r.Error != nil {
			require.NotEqual(t, wire.CodeNotImplemented, r.Error.Code, m)
		}
	}
	require.Equal(t, wire.CodeNotImplemented, c.call("query.nothing", nil).Error.Code)
}

// writerCodes are the codes every mutating method — an engine command (command: true in docs/protocol.json) and
// import.append, whose writes are engine commands — may answer: the disk below its minimum, no writer in a cluster,
// the engine stopped. docs/protocol.md names them once, in its "Every mutating method" paragraph, and a method's
// "Errors:" list leaves them out; a method that is not mutating and answers one (admin.checkpoint's disk-full and
// internal) names it in its list.
var writerCodes = []wire.Code{wire.CodeDiskFull, wire.CodeUnavailable, wire.CodeInternal}

// TestProtocolDocErrors: each method's "Errors:" list in docs/protocol.md names exactly the codes docs/protocol.json
// lists for it (what Describe says), but for writerCodes and, of an engine command, oversize-frame, which its list
// leaves to the paragraph that names them all; a method that answers no code has no list. Only the codes the list
// names itself count: the explanations in parentheses may quote others.
func TestProtocolDocErrors(t *testing.T) {
	raw, err := os.ReadFile("../docs/protocol.md")
	require.NoError(t, err)
	doc := string(raw)
	d, err := Describe()
	require.NoError(t, err)
	known := map[string]bool{}
	for _, c := range d.Codes {
		known[string(c.Code)] = true
	}

	// The paragraph says which codes every mutating method may answer, and protocol.json agrees for each.
	para := regexp.MustCompile(`(?m)^\*\*Every mutating method\*\*[^\n]*(?:\n[^\n]+)*`).FindString(doc)
	require.NotEmpty(t, para, `docs/protocol.md has no "**Every mutating method**" paragraph`)
	for _, c := range append(slices.Clone(writerCodes), wire.CodeOversizeFrame) {
		require.Contains(t, para, "`"+string(c)+"`", "the mutating methods' paragraph leaves out %s", c)
	}

	// The paragraph on a cold run the log cannot give back says that every method but hello may answer
	// replay-failed; a method's list names it only where it says more of it.
	cold := regexp.MustCompile(`(?m)^\*\*A finished run the log cannot give back\.\*\*[^\n]*(?:\n[^\n]+)*`).FindString(doc)
	require.Contains(t, cold, "`"+string(wire.CodeReplayFailed)+"`",
		`docs/protocol.md has no "**A finished run the log cannot give back.**" paragraph naming replay-failed`)

	sections := docSections(doc)
	for _, m := range d.Methods {
		t.Run(m.Name, func(t *testing.T) {
			writes := m.Command || m.Name == methodImportAppend
			want := map[string]bool{}
			for _, c := range m.Errors {
				want[string(c)] = true
			}
			if writes {
				for _, c := range writerCodes {
					require.True(t, want[string(c)], "%s is mutating but protocol.json does not list %s for it", m.Name, c)
					delete(want, string(c))
				}
				// An engine command whose answer would not fit in a frame is refused before anything is recorded:
				// the paragraph says so for every command protocol.json lists oversize-frame for.
				if m.Command {
					delete(want, string(wire.CodeOversizeFrame))
				}
			} else {
				require.False(t, want[string(wire.CodeUnavailable)],
					"%s is not mutating, yet protocol.json lists unavailable for it", m.Name)
				// NB: the checkpoint is the one write beside the log that a client asks for; the others (a snapshot,
				// a view) are skipped on a full disk, not refused.
				require.False(t, want[string(wire.CodeDiskFull)] && m.Name != methodAdminCheckpoint,
					"%s is not mutating, yet protocol.json lists disk-full for it", m.Name)
			}
			sec, ok := sections[m.Name]
			require.True(t, ok, "no section for %s", m.Name)
			listed, err := docErrorsList(sec, known)
			require.NoError(t, err, m.Name)
			if m.Name != wire.MethodHello {
				require.True(t, want[string(wire.CodeReplayFailed)], "protocol.json does not list replay-failed for %s", m.Name)
				if !listed[string(wire.CodeReplayFailed)] {
					delete(want, string(wire.CodeReplayFailed))
				}
			}
			require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(listed)),
				"docs/protocol.md: %s's Errors must name the codes protocol.json lists for it (the mutating methods' "+
					"paragraph names the others)", m.Name)
		})
	}
}

// docSections maps each method to its section of docs/protocol.md: the lines after its "### `method`" heading, up
// to the next heading.
func docSections(doc string) map[string]string {
	heading := regexp.MustCompile("^### `([^`]+)`\\s*$")
	out := map[string]string{}
	var name string
	var body []string
	flush := func() {
		if name != "" {
			out[name] = strings.Join(body, "\n")
		}
		name, body = "", nil
	}
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "#") {
			flush()
			if m := heading.FindStringSubmatch(line); m != nil {
				name = m[1]
			}
			continue
		}
		body = append(body, line)
	}
	flush()
	return out
}

// docErrorsList reads a section's "Errors:" sentence ("Errors, all closing:" and the like too): the set of codes it
// names in backticks outside parentheses, up to the full stop that ends it. An empty set when the section has none;
// an error when it has two, or names outside parentheses something in backticks that is no code, or its parentheses
// or backticks do not close.
func docErrorsList(sec string, known map[string]bool) (map[string]bool, error) {
	labels := regexp.MustCompile("Errors(?:, [^:.`]+)?:").FindAllStringIndex(sec, -1)
	listed := map[string]bool{}
	switch len(labels) {
	case 0:
		return listed, nil
	case 1:
	default:
		return nil, fmt.Errorf("%d Errors lists, want one", len(labels))
	}
	clauses, err := docClauses(sec[labels[0][1]:], "", true)
	if err != nil {
		return nil, err
	}
	for _, tok := range clauses[0] {
		if !known[tok] {
			return nil, fmt.Errorf("the Errors list names `%s`, which is no code", tok)
		}
		listed[tok] = true
	}
	return listed, nil
}

// docClauses splits s into clauses, each ended outside parentheses by a full stop (a '.' before a space, a line's
// end or the end of s) or by a byte of stops, and returns what each names in backticks outside parentheses: the
// explanations in parentheses may quote anything. With first, it reads only the first clause. An error when a
// parenthesis or a backtick of what it reads does not close, or a parenthesis closes that never opened.
func docClauses(s, stops string, first bool) ([][]string, error) {
	clauses := [][]string{nil}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '`':
			n := strings.IndexByte(s[i+1:], '`')
			if n < 0 {
				return nil, fmt.Errorf("a backtick does not close in %q", s)
			}
			if depth == 0 {
				clauses[len(clauses)-1] = append(clauses[len(clauses)-1], s[i+1:i+1+n])
			}
			i += n + 1
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("a parenthesis closes that never opened in %q", s)
			}
		case depth == 0 && (strings.IndexByte(stops, c) >= 0 ||
			c == '.' && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\n')):
			if first {
				return clauses, nil
			}
			clauses = append(clauses, nil)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("a parenthesis does not close in %q", s)
	}
	return clauses, nil
}

// TestDocErrorsList: what TestProtocolDocErrors reads of a section.
func TestDocErrorsList(t *testing.T) {
	known := map[string]bool{"forbidden": true, "bad-params": true, "no-task": true, "protocol": true}
	for _, tc := range []struct {
		name, sec string
		want      []string // nil: an error
	}{
		{"none", "Who: W. Result: `{ok: true}`.", []string{}},
		{"a list", "Result: `{}`. Errors: `forbidden`, `bad-params`. Pushes `no-task`.", []string{"bad-params", "forbidden"}},
		{"to the section's end", "Errors: `forbidden`,\n`no-task`", []string{"forbidden", "no-task"}},
		{"codes in parentheses are explanations", "Errors: `bad-params` (not `no-task`. Nor `x.y`), `forbidden`.",
			[]string{"bad-params", "forbidden"}},
		{"no code, a full stop in it", "Errors: `forbidden` `x. y`", nil},
		{"a label with words", "Errors, all closing: `protocol` \"hello required\" (first). Then `no-task`.",
			[]string{"protocol"}},
		{"no code", "Errors: `forbidden`, `bad-param`.", nil},
		{"two lists", "Errors: `forbidden`. Errors: `no-task`.", nil},
		{"unclosed parenthesis", "Errors: `forbidden` (a worker, `no-task`", nil},
		{"stray parenthesis", "Errors: `forbidden`), `no-task`.", nil},
		{"unclosed backtick", "Errors: `forbidden", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := docErrorsList(tc.sec, known)
			if tc.want == nil {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.ElementsMatch(t, tc.want, slices.Collect(maps.Keys(got)))
		})
	}
}

// TestProtocolDocWho: each method's "Who:" sentence in docs/protocol.md names the roles protocol.json gives it (W,
// O and A outside parentheses, up to the sentence's full stop); "Who and params as `m`" takes m's, and hello's
// "anyone" every role.
func TestProtocolDocWho(t *testing.T) {
	raw, err := os.ReadFile("../docs/protocol.md")
	require.NoError(t, err)
	d, err := Describe()
	require.NoError(t, err)
	sections := docSections(string(raw))
	letters := map[rune]string{'W': events.RoleWorker, 'O': events.RoleOrchestrator, 'A': events.RoleAdmin}
	var who func(name string) []string
	who = func(name string) []string {
		sec := sections[name]
		if m := regexp.MustCompile("Who and params as `([^`]+)`").FindStringSubmatch(sec); m != nil {
			return who(m[1])
		}
		at := strings.Index(sec, "Who:")
		require.GreaterOrEqual(t, at, 0, "docs/protocol.md: %s has no Who", name)
		sentence := sec[at+len("Who:"):]
		if strings.HasPrefix(strings.TrimSpace(sentence), "anyone") {
			return slices.Sorted(maps.Values(letters))
		}
		var roles []string
		depth, code := 0, false
		prev := ' '
		for i, r := range sentence {
			switch {
			case r == '`':
				code = !code
			case code:
			case r == '(':
				depth++
			case r == ')':
				depth--
			case depth == 0 && r == '.':
				slices.Sort(roles)
				return slices.Compact(roles)
			case depth == 0 && letters[r] != "" && !isWordRune(prev) && (i+1 == len(sentence) || !isWordRune(rune(sentence[i+1]))):
				roles = append(roles, letters[r])
			}
			prev = r
		}
		t.Fatalf("docs/protocol.md: %s's Who has no full stop", name)
		return nil
	}
	for _, m := range d.Methods {
		want := slices.Clone(m.Roles)
		slices.Sort(want)
		require.Equal(t, want, who(m.Name), "docs/protocol.md: %s's Who must name the roles protocol.json gives it", m.Name)
	}
}

func isWordRune(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}
