package main

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

func TestPrintable(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "ship the parser", "ship the parser"},
		{"empty", "", ""},
		{"unicode letters and symbols", "café ✓ 日本 ├─ │", "café ✓ 日本 ├─ │"},
		{"backslash stays", `C:\dir \x1b`, `C:\dir \x1b`},
		{"replacement character stays", "a\uFFFDb", "a\uFFFDb"},
		{"newline", "x\nr-other  completed", `x\nr-other  completed`},
		{"tab", "a\tb", `a\tb`},
		{"carriage return", "safe\rEVIL", `safe\rEVIL`},
		{"bell, form feed, vertical tab, backspace", "\a\f\v\b", `\a\f\v\b`},
		{"nul", "a\x00b", `a\x00b`},
		{"window title (OSC)", "\x1b]0;title\x07", `\x1b]0;title\a`},
		{"clear screen (CSI)", "\x1b[2J", `\x1b[2J`},
		{"cursor up and erase line", "\x1b[1A\x1b[2K", `\x1b[1A\x1b[2K`},
		{"delete", "a\x7fb", `a\x7fb`},
		{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"C1 OSC and ST", "\u009d0;t\u009c", `\u009d0;t\u009c`},
		{"right-to-left override", "exe.\u202etxt", `exe.\u202etxt`},
		{"embeddings and pop", "\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`},
		{"isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"zero width space", "r-\u200b1", `r-\u200b1`},
		{"byte order mark", "\ufeffid", `\ufeffid`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"tag character", "a\U000E0041", `a\U000e0041`},
		{"invalid UTF-8: a raw C1 byte", "a\x9b2J", `a\x9b2J`},
		{"invalid UTF-8: a lone 0xff", "\xff", `\xff`},
		{"truncated sequence", "é\xe2\x80", `é\xe2\x80`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := printable(c.in)
			require.Equal(t, c.want, got)
			require.Equal(t, got, printable(got), "escaping twice reads as once")
			for _, r := range got {
				require.False(t, hidden(r), "%q left in the output", r)
			}
		})
	}
}

type hostileStringer struct{}

type label string

func (hostileStringer) String() string { return "s\x1b[2J" }

func TestScreenEscapesValuesNotFormat(t *testing.T) {
	type pair struct{ A, B string }
	for _, c := range []struct {
		name   string
		format string
		args   []any
		want   string
	}{
		{"format keeps its tabs and newline", "%s\t%s\n", []any{"a\tb", "c\nd"}, "a\\tb\tc\\nd\n"},
		{"numbers and booleans as they are", "%d %5.1f %v %x\n", []any{42, 1.5, true, uint64(255)}, "42   1.5 true ff\n"},
		{"a number as a character", "%c%c\n", []any{0x1b, rune(0x202e)}, "\\x1b\\u202e\n"},
		{"width applies before escaping", "[%-4s]\n", []any{"\x1b"}, "[\\x1b   ]\n"},
		{"precision", "%.3s\n", []any{"\u202eabcdef"}, "\\u202eab\n"},
		{"Stringer", "%s %v\n", []any{hostileStringer{}, hostileStringer{}}, "s\\x1b[2J s\\x1b[2J\n"},
		{"error", "%v\n", []any{errors.New("e\rE")}, "e\\rE\n"},
		{"struct", "%v %+v\n", []any{pair{"\x07", "b"}, pair{"a", "\n"}}, "{\\a b} {A:a B:\\n}\n"},
		{"named string type", "%s\n", []any{label("k\x1b")}, "k\\x1b\n"},
		{"quoted stays quoted", "%q\n", []any{"\x1b\u202e"}, "\"\\x1b\\u202e\"\n"},
		{"bytes", "%s\n", []any{[]byte("b\x1b")}, "b\\x1b\n"},
		{"own escape sequence kept", "\r\033[K%s", []any{"\x1b[K"}, "\r\033[K\\x1b[K"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			require.NoError(t, screen{&b}.printf(c.format, c.args...))
			require.Equal(t, c.want, b.String())
		})
	}
}

// TestTableRowsCannotBeForged: a value with a tab or a newline stays in its cell.
func TestTableRowsCannotBeForged(t *testing.T) {
	var b strings.Builder
	tw := screen{&b}.table()
	require.NoError(t, tw.printf("RUN\tSTATUS\tGOAL\n"))
	require.NoError(t, tw.printf("%s\t%s\t%s\n", "r-1", "running", "x\nr-other\tcompleted\tforged"))
	require.NoError(t, tw.flush())
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	require.Equal(t, `r-1  running  x\nr-other\tcompleted\tforged`, lines[1])
}

// TestOutputGoesThroughScreen: no file of crewctl but terminal.go prints with fmt or io.WriteString, and none but
// main.go names os.Stdout or os.Stderr, so every line for a person goes through a screen (or a table) and a value
// cannot reach the terminal unescaped by a print written without thinking of it.
func TestOutputGoesThroughScreen(t *testing.T) {
	banned := map[string]map[string]bool{
		"fmt": {"Print": true, "Printf": true, "Println": true, "Fprint": true, "Fprintf": true, "Fprintln": true},
		"io":  {"WriteString": true},
		"os":  {"Stdout": true, "Stderr": true},
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var found []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "terminal.go" {
			continue
		}
		allowed := map[string]bool{}
		if name == "main.go" {
			allowed["os"] = true // it hands the process's stdout and stderr to run
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && banned[pkg.Name][sel.Sel.Name] && !allowed[pkg.Name] {
				found = append(found, fset.Position(sel.Pos()).String()+": "+pkg.Name+"."+sel.Sel.Name)
			}
			return true
		})
	}
	require.Empty(t, found, "print through screen, table or machineLine (terminal.go)")
}

// hostile is text a worker may choose for a goal, a title, an id or a tool: a window title, a screen clear, a C1
// control, a carriage return, a bidirectional override, and a newline and tabs that would forge another row.
const hostile = "x\x1b]0;pwned\x07\x1b[2J\u009b1A\rsafe\u202etxt.exe\nr-forged\tcompleted\t"

// hostileEscaped is hostile as crewctl prints it.
const hostileEscaped = `x\x1b]0;pwned\a\x1b[2J\u009b1A\rsafe\u202etxt.exe\nr-forged\tcompleted\t`

// requireTerminalSafe: out holds none of the characters a terminal obeys but the newlines and tabs of crewctl's own
// format strings, and no line that hostile's newline would have started.
func requireTerminalSafe(t *testing.T, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && r != '\t' {
			require.False(t, hidden(r), "%q printed raw in %q", r, out)
		}
	}
	require.NotRegexp(t, regexp.MustCompile(`(?m)^r-forged`), out, "a forged line")
}

// TestLiveViewsEscapeWorkerText: a goal, a title, a request id and a tool name that hold control and bidi
// characters are printed escaped by runs, show run, tasks, events, jobs and show job; their --json is the
// broker's JSON as it was.
func TestLiveViewsEscapeWorkerText(t *testing.T) {
	data, socket := liveDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := adminOf(t, ctx, socket)
	run := callOK(t, ctx, a, "run.create", map[string]any{"team": "t", "goal": hostile, "cwd": "/w"})["runId"].(string)
	callOK(t, ctx, a, "run.transition", map[string]any{"runId": run, "to": "running"})
	callOK(t, ctx, a, "task.create", map[string]any{"runId": run, "taskId": "W", "role": "engineer", "agent": "e",
		"title": hostile, "cwd": "/w"})
	callOK(t, ctx, a, "task.transition", map[string]any{"runId": run, "taskId": "W", "to": "running"})
	tok := callOK(t, ctx, a, "credential.issue", map[string]any{"runId": run, "taskId": "W"})["token"].(string)
	nonce := callOK(t, ctx, a, "job.create", map[string]any{"runId": run, "jobId": "J", "taskId": "W", "tools": jobGrant})["nonce"].(string)
	callOK(t, ctx, a, "lease.open", map[string]any{"runId": run, "jobId": "J", "mode": "start", "rootToolCallId": hostile})
	w, err := client.Dial(ctx, socket, client.Hello{RunID: run, TaskID: "W", Token: tok}, nil)
	require.NoError(t, err)
	defer w.Close()
	// Refused (the tool is not granted), but recorded with its request id and tool.
	_ = w.Call(ctx, "proxy.request", map[string]any{"jobId": "J", "requestId": hostile, "nonce": nonce, "tool": hostile}, nil)

	for _, c := range []struct {
		name string
		args []string
	}{
		{"runs", []string{"runs"}},
		{"show run", []string{"show", "run", run}},
		{"tasks", []string{"tasks", run}},
		{"events", []string{"events", "--run", run}},
		{"jobs", []string{"jobs", run}},
		{"show job", []string{"show", "job", run, "J"}},
	} {
		args := c.args
		t.Run(c.name, func(t *testing.T) {
			r := crewctl(t, dialBroker, append(args, "--data", data, "--socket", socket)...)
			require.Equal(t, exitOK, r.code, r.err)
			requireTerminalSafe(t, r.out)
			require.Contains(t, r.out, hostileEscaped)

			r = crewctl(t, dialBroker, append(args, "--data", data, "--socket", socket, "--json")...)
			require.Equal(t, exitOK, r.code, r.err)
			requireJSON(t, r.out)
			require.Contains(t, r.out, `\u001b]0;pwned\u0007`, "JSON escapes C0 as it always did")
			require.Contains(t, r.out, "\u202e", "and leaves the rest to the script reading it")
		})
	}
}

// TestReplayEscapesWorkerText: replay's timeline shows a task title and a cancellation reason from the store
// escaped, and a title's newline forges no timeline row.
func TestReplayEscapesWorkerText(t *testing.T) {
	dir := t.TempDir()
	l, err := eventlog.Open(filepath.Join(dir, storeDir), nil)
	require.NoError(t, err)
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	const run = "r-hostile"
	for _, c := range []struct {
		actor events.Actor
		cmd   commands.Command
	}{
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: hostile, Cwd: "/w"}},
		{audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"}},
		{audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "T", Role: "executor", Agent: "executor", Title: hostile, Cwd: "/w"}},
		{audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "T", To: "cancelled", Reason: hostile}},
	} {
		_, err := w.Do(c.actor, c.cmd)
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())

	r := crewctl(t, nil, "replay", "--data", dir)
	require.Equal(t, exitOK, r.code, r.err)
	requireTerminalSafe(t, r.out)
	require.Contains(t, r.out, "task T created (executor, "+hostileEscaped+")")

	r = crewctl(t, nil, "replay", "--data", dir, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	requireJSON(t, r.out)
}

// TestErrorsPrintedEscaped: an error may quote the daemon or the store, so its line is escaped like any value, and
// crewctl's own advice under it keeps its line.
func TestErrorsPrintedEscaped(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	refuse := func(context.Context, string, string) (Broker, error) { return nil, errors.New(hostile) }
	r := crewctl(t, refuse, "runs", "--token-file", tok, "--socket", "crewd.sock")
	require.Equal(t, exitOpen, r.code)
	require.Equal(t, "crewctl: connect to crewd at crewd.sock: "+hostileEscaped+"\n", r.err)

	data, _ := liveDaemon(t)
	r = crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitOpen, r.code, r.err)
	lines := strings.Split(strings.TrimSuffix(r.err, "\n"), "\n")
	require.Len(t, lines, 2, r.err)
	require.Contains(t, lines[0], "locked")
	require.Equal(t, "  crewd is running on this store; stop it, or run this command on a backup (crewctl backup takes one through crewd)", lines[1])
}
