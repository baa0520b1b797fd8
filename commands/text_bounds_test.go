package commands

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// Every free-text field a client sends in a command is bounded: at
// its bound it is accepted, one char more is refused bad-params naming the
// field and the bound, and nothing is recorded. Multi-byte chars count as
// one.
func TestFreeTextBounds(t *testing.T) {
	// params builds an object of base's members with field set to the text.
	params := func(base map[string]string) func(field string) func(text string) string {
		return func(field string) func(text string) string {
			return func(text string) string {
				m := maps.Clone(base)
				m[field] = text
				var b strings.Builder
				for k, v := range m {
					b.WriteString(`,"` + k + `":` + v)
				}
				return "{" + b.String()[1:] + "}"
			}
		}
	}
	task := params(map[string]string{"taskId": `"N"`, "role": `"r"`, "agent": `"a"`, "title": `"t"`, "cwd": `"/n"`})
	run := params(map[string]string{"runId": `"R2"`, "team": `"t"`, "goal": `"g"`, "cwd": `"/n"`})
	cases := []struct {
		method, field string
		max           int
		params        func(text string) string
	}{
		{"run.create", "goal", MaxBodyChars, run("goal")},
		{"run.create", "workflow", MaxIDChars, run("workflow")},
		{"run.create", "cwd", MaxCwdChars, run("cwd")},
		{"task.create", "role", MaxIDChars, task("role")},
		{"task.create", "agent", MaxIDChars, task("agent")},
		{"task.create", "title", MaxTitleChars, task("title")},
		{"task.create", "cwd", MaxCwdChars, task("cwd")},
		{"task.create", "stepId", MaxIDChars, task("stepId")},
		{"task.create", "model", MaxModelChars, task("model")},
		{"run.transition", "summary", MaxStatusTextChars, func(x string) string {
			return `{"to":"running","summary":` + x + `}`
		}},
		{"run.transition", "reason", MaxStatusTextChars, func(x string) string {
			return `{"to":"cancelled","reason":` + x + `}`
		}},
		{"task.transition", "error", MaxStatusTextChars, func(x string) string {
			return `{"taskId":"W","to":"failed","error":` + x + `}`
		}},
		{"task.transition", "reason", MaxStatusTextChars, func(x string) string {
			return `{"taskId":"W","to":"cancelled","reason":` + x + `}`
		}},
		{"task.transition", "cwd", MaxCwdChars, func(x string) string {
			return `{"taskId":"Q","to":"running","cwd":` + x + `}`
		}},
		{"delegate.cancel", "reason", MaxStatusTextChars, func(x string) string {
			return `{"subId":"gc-00000001","reason":` + x + `}`
		}},
		{"proxy.complete", "requestId", MaxRequestIDChars, func(x string) string {
			return `{"jobId":"J","requestId":` + x + `,"nonce":"secret-1","result":{"content":[]}}`
		}},
		{"manifest.revalidate", "requestId", MaxRequestIDChars, func(x string) string {
			return `{"jobId":"J","requestId":` + x + `,"tools":` + loopGrant + `}`
		}},
	}
	for _, tc := range cases {
		for _, char := range []string{"a", "é"} {
			t.Run(fmt.Sprintf("%s %s %s", tc.method, tc.field, char), func(t *testing.T) {
				tooLong := fmt.Sprintf("%s: %s must be at most %d chars", tc.method, tc.field, tc.max)
				quote := func(n int) string { b, _ := json.Marshal(strings.Repeat(char, n)); return string(b) }

				w := boundsWorld(t)
				send := func(params string) scenarioOutcome {
					if tc.method != "run.create" {
						return w.send(orch(tc.method, params))
					}
					o, err := w.when(events.RoleAdmin, "", "", tc.method, json.RawMessage(params))
					require.NoError(t, err)
					return o
				}
				o := send(tc.params(quote(tc.max + 1)))
				require.NotNil(t, o.err)
				require.Equal(t, CodeBadParams, o.err.Code)
				require.Equal(t, tooLong, o.err.Message)
				require.Empty(t, o.events)

				o = send(tc.params(quote(tc.max)))
				if o.err != nil {
					require.NotEqual(t, tooLong, o.err.Message)
				}
				if strings.HasPrefix(tc.method, "run.") || strings.HasPrefix(tc.method, "task.") {
					require.Nil(t, o.err, "at the bound")
				}
			})
		}
	}
}

// A task's dependencies are a list of task ids of the run: at most
// MaxDependsOn of them, each a task of the run.
func TestDependsOnBound(t *testing.T) {
	w := loopWorld(t, 1_000_000)
	deps := func(n int) string {
		b, _ := json.Marshal(slices.Repeat([]string{"W"}, n))
		return `{"taskId":"N","role":"r","agent":"a","title":"t","cwd":"/n","dependsOn":` + string(b) + `}`
	}
	o := w.send(orch("task.create", deps(MaxDependsOn+1)))
	require.NotNil(t, o.err)
	require.Equal(t, fmt.Sprintf("task.create: dependsOn must list at most %d tasks", MaxDependsOn), o.err.Message)
	require.Nil(t, w.send(orch("task.create", deps(MaxDependsOn))).err)
}

// boundsWorld is loopWorld with a queued task Q, a delegation of W
// (gc-00000001) and a job J of W with a lease.
func boundsWorld(t *testing.T) *scenarioWorld {
	w := loopWorld(t, 1_000_000)
	require.NoError(t, w.config([]string{"nestingEnabled=true"}))
	for _, r := range []loopRequest{
		orch("task.create", `{"taskId":"Q","role":"executor","agent":"a","title":"q","cwd":"/q"}`),
		{events.RoleWorker, "delegate.request", `{"prompt":"p"}`},
		orch("job.create", `{"jobId":"J","taskId":"W","tools":`+loopGrant+`}`),
		orch("lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"root"}`),
	} {
		require.Nil(t, w.send(r).err, "setup %s", r.method)
	}
	_, ok := w.s.Delegation("R", "gc-00000001")
	require.True(t, ok)
	return w
}

// A grant refused for what a client wrote in it (a key twice, a number)
// quotes it; what is recorded of the refusal is bounded all the same.
func TestRecordedManifestRefusalsAreBounded(t *testing.T) {
	long := strings.Repeat("k", 100_000)
	tool := `{"name":"read","label":"Read","description":"d","parameters":{"` + long + `":1,"` + long + `":2},` +
		`"sourceInfo":{"path":"/t","source":"pi","scope":"user","origin":"package"},"callable":"mgr:read"}`
	w := loopWorld(t, 1_000_000)
	o := w.send(orch("job.create", `{"jobId":"J","taskId":"W","tools":[`+tool+`]}`))
	require.NotNil(t, o.err)
	require.Len(t, o.events, 1)
	p := events.PayloadAs[events.JobRejected](o.events[0])
	require.NotNil(t, p)
	require.Equal(t, reasonNotJSONSafe, p.Reason)
	require.LessOrEqual(t, len(p.Message), MaxRejectionMessageBytes+len("job.create: "))

	require.Nil(t, w.send(orch("job.create", `{"jobId":"J","taskId":"W","tools":`+loopGrant+`}`)).err)
	require.Nil(t, w.send(orch("lease.open", `{"jobId":"J","mode":"start","rootToolCallId":"root"}`)).err)
	require.Nil(t, w.send(orch("job.transition", `{"jobId":"J","to":"paused"}`)).err)
	o = w.send(orch("lease.open", `{"jobId":"J","mode":"continue","rootToolCallId":"root","tools":[`+tool+`]}`))
	require.NotNil(t, o.err)
	f := events.PayloadAs[events.ManifestRevalidationFailed](o.events[0])
	require.NotNil(t, f)
	require.LessOrEqual(t, len(f.Got), MaxRejectionMessageBytes)
}

// What a command records of a refusal counts chars as its bounds do: a
// grant's tool name and callable at their bound are not refused for their
// length whatever their chars' size, and a proxied call's request id past
// its bound is recorded with its length in chars. A tool name quoted in a
// refusal is cut on a char boundary.
func TestRecordedBoundsCountChars(t *testing.T) {
	grant := func(name, callable string) string {
		b, _ := json.Marshal([]map[string]any{{"name": name, "label": "L", "description": "d",
			"parameters": map[string]any{"type": "object"}, "callable": callable,
			"sourceInfo": map[string]any{"path": "/t", "source": "pi", "scope": "user", "origin": "package"}}})
		return `{"jobId":"J","taskId":"W","tools":` + string(b) + `}`
	}
	for _, char := range []string{"é", "😀"} {
		t.Run(char, func(t *testing.T) {
			rejection := func(o scenarioOutcome) string {
				if o.err == nil {
					return ""
				}
				require.NotEmpty(t, o.events)
				p := events.PayloadAs[events.JobRejected](o.events[0])
				require.NotNil(t, p)
				return p.Message
			}
			name, callable := strings.Repeat(char, MaxToolNameChars), strings.Repeat(char, MaxIDChars)
			w := loopWorld(t, 1_000_000)
			require.Empty(t, rejection(w.send(orch("job.create", grant(name, callable)))))
			w = loopWorld(t, 1_000_000)
			require.Contains(t, rejection(w.send(orch("job.create", grant(name+char, callable)))),
				fmt.Sprintf("name must be 1..%d chars", MaxToolNameChars))
			require.Contains(t, rejection(w.send(orch("job.create", grant(name, callable+char)))),
				fmt.Sprintf("callable must be a string of at most %d chars", MaxIDChars))

			w = boundsWorld(t)
			cancel := func(requestID string) *events.ProxyRejected {
				b, _ := json.Marshal(map[string]string{"jobId": "J", "requestId": requestID, "nonce": "secret-1"})
				o := w.send(loopRequest{events.RoleWorker, "proxy.cancel", string(b)})
				require.NotNil(t, o.err)
				require.NotEmpty(t, o.events)
				p := events.PayloadAs[events.ProxyRejected](o.events[0])
				require.NotNil(t, p)
				return p
			}
			at := strings.Repeat(char, MaxRequestIDChars)
			require.Equal(t, at, cancel(at).RequestID)
			past := cancel(at + char)
			require.Empty(t, past.RequestID)
			require.Equal(t, MaxRequestIDChars+1, past.RequestIDChars)

			b, _ := json.Marshal(map[string]string{"jobId": "J", "requestId": "", "nonce": "secret-1",
				"tool": name + name})
			o := w.send(loopRequest{events.RoleWorker, "proxy.request", string(b)})
			require.NotNil(t, o.err)
			p := events.PayloadAs[events.ProxyRejected](o.events[0])
			require.NotNil(t, p)
			require.Equal(t, name, p.Tool)
		})
	}
}
