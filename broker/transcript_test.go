package broker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestTranscripts runs testdata/transcripts/*.txt: raw NDJSON exchanged with a real server over its unix socket.
//
//	# comment
//	server queue=32 maxframe=2048 hello=100ms nesting=off slots=4 waits=off   options; before anything else (optional)
//	seed                     the standard run R1 (tasks P, Q running); sets $ORCH, $P, $Q and $ADMIN
//	conn NAME                open a connection
//	send NAME <line>         send the line as is, after $VAR substitution
//	sendlong NAME <bytes>    send one line of that many 'x' bytes
//	recv NAME <json>         the next frame of NAME that matches (frames skipped over must match later recvs)
//	closed NAME              the server closes NAME with no further frame
//	usage N                  the engine commits N task.usage events for P (in process)
//
// Expected JSON is compared as values. "<any>" matches any value, "<iso-time>" a string in JavaScript's
// toISOString layout, "<capture:NAME>" matches any value and sets
// $NAME, and an object with the key "<more>" may have keys the expectation does not list. Every frame a
// connection received must have been matched by the end.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/transcripts/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { runTranscript(t, file) })
	}
}

var varRef = regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`)

type transcript struct {
	t     *testing.T
	f     *fixture
	fo    fixtureOpts
	vars  map[string]string
	conns map[string]*client
	line  int
}

func runTranscript(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	tr := &transcript{t: t, vars: map[string]string{"ADMIN": testAdminToken}, conns: map[string]*client{}}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		tr.line++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		tr.do(verb, strings.TrimSpace(rest))
	}
	for name, c := range tr.conns {
		require.Empty(t, c.pending, "%s: connection %s has unmatched frames:\n%s", file, name, joinFrames(c.pending))
	}
}

func (tr *transcript) fixture() *fixture {
	if tr.f == nil {
		tr.f = newFixture(tr.t, tr.fo)
	}
	return tr.f
}

func (tr *transcript) subst(s string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		v, ok := tr.vars[m[1:]]
		require.True(tr.t, ok, "line %d: unknown variable %s", tr.line, m)
		return v
	})
}

func (tr *transcript) conn(name string) *client {
	c, ok := tr.conns[name]
	require.True(tr.t, ok, "line %d: unknown connection %q", tr.line, name)
	return c
}

func (tr *transcript) do(verb, rest string) {
	t := tr.t
	at := fmt.Sprintf("line %d", tr.line)
	switch verb {
	case "server":
		require.Nil(t, tr.f, "%s: server must come first", at)
		cfg := projections.DefaultConfig()
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "queue":
				tr.fo.opts.OutboundQueueCap, _ = strconv.Atoi(v)
			case "maxframe":
				tr.fo.opts.MaxFrame, _ = strconv.Atoi(v)
			case "hello":
				d, err := time.ParseDuration(v)
				require.NoError(t, err)
				tr.fo.opts.HelloTimeout = d
			case "nesting":
				cfg.NestingEnabled = v == "on"
			case "slots":
				cfg.MaxSlots, _ = strconv.Atoi(v)
			case "waits":
				cfg.WaitMethodsEnabled = v == "on"
			default:
				t.Fatalf("%s: unknown server option %q", at, k)
			}
		}
		tr.fo.config = &cfg
	case "seed":
		s := tr.fixture().seed()
		tr.vars["ORCH"], tr.vars["P"], tr.vars["Q"] = s.orch, s.p, s.q
	case "conn":
		tr.conns[rest] = tr.fixture().dial()
	case "send":
		name, line, _ := strings.Cut(rest, " ")
		tr.conn(name).sendLine(tr.subst(line))
	case "sendlong":
		name, n, _ := strings.Cut(rest, " ")
		size, err := strconv.Atoi(n)
		require.NoError(t, err)
		c := tr.conn(name)
		c.nc.SetWriteDeadline(time.Now().Add(guard))
		// The server may close before it has read everything; a write error then is expected.
		c.nc.Write([]byte(strings.Repeat("x", size) + "\n"))
	case "recv":
		name, want, _ := strings.Cut(rest, " ")
		tr.recv(tr.conn(name), tr.subst(want))
	case "closed":
		c := tr.conn(strings.TrimSpace(rest))
		require.Empty(t, c.pending, "%s: unmatched frames before close:\n%s", at, joinFrames(c.pending))
		c.closed()
	case "usage":
		n, err := strconv.Atoi(rest)
		require.NoError(t, err)
		for i := 1; i <= n; i++ {
			r, err := tr.f.eng.Submit(context.Background(), commands.Request{
				Actor:   events.Actor{Role: events.RoleOrchestrator},
				Command: &commands.TaskUsage{RunID: runR, TaskID: taskP, Input: int64(i), Output: 1, CacheRead: 0, CacheWrite: 0},
			})
			require.NoError(t, err)
			require.Nil(t, r.Rejected)
		}
	default:
		t.Fatalf("%s: unknown verb %q", at, verb)
	}
}

// recv finds the first frame (buffered first, then read) matching want.
func (tr *transcript) recv(c *client, want string) {
	t := tr.t
	var exp any
	require.NoError(t, json.Unmarshal([]byte(want), &exp), "line %d: expectation is not JSON", tr.line)
	for i, f := range c.pending {
		if tr.match(exp, f) {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return
		}
	}
	for {
		f, err := c.read()
		if err != nil {
			t.Fatalf("line %d: waiting for %s: %v\nunmatched frames:\n%s", tr.line, want, err, joinFrames(c.pending))
		}
		if tr.match(exp, f) {
			return
		}
		c.pending = append(c.pending, f)
	}
}

func joinFrames(fs [][]byte) string {
	var b strings.Builder
	for _, f := range fs {
		b.Write(f)
		b.WriteByte('\n')
	}
	return b.String()
}

func (tr *transcript) match(exp any, frame []byte) bool {
	var act any
	if json.Unmarshal(frame, &act) != nil {
		return false
	}
	captures := map[string]string{}
	if !matchValue(exp, act, captures) {
		return false
	}
	for k, v := range captures {
		tr.vars[k] = v
	}
	return true
}

func matchValue(exp, act any, captures map[string]string) bool {
	switch e := exp.(type) {
	case string:
		if e == "<any>" {
			return true
		}
		if e == "<iso-time>" {
			s, ok := act.(string)
			if !ok {
				return false
			}
			_, err := time.Parse(isoMillis, s)
			return err == nil
		}
		if name, ok := strings.CutPrefix(e, "<capture:"); ok && strings.HasSuffix(name, ">") {
			if s, ok := act.(string); ok {
				captures[strings.TrimSuffix(name, ">")] = s
			} else {
				b, _ := json.Marshal(act)
				captures[strings.TrimSuffix(name, ">")] = string(b)
			}
			return true
		}
	case map[string]any:
		a, ok := act.(map[string]any)
		if !ok {
			return false
		}
		_, more := e["<more>"]
		n := 0
		for k, v := range e {
			if k == "<more>" {
				continue
			}
			n++
			av, ok := a[k]
			if !ok || !matchValue(v, av, captures) {
				return false
			}
		}
		return more || n == len(a)
	case []any:
		a, ok := act.([]any)
		if !ok || len(a) != len(e) {
			return false
		}
		for i := range e {
			if !matchValue(e[i], a[i], captures) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(exp, act)
}
