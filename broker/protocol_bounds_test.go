package broker

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// TestProtocolStringBoundsMatchCommands: the maxLength docs/protocol.json gives a command method's string param is
// what the server enforces, read off the server itself rather than the command layer's constants. Each param is
// sent at lengths in frames of the largest size, every other param a valid sample:
//   - a param the command layer bounds (refused "<key> must …" in the largest frame) is accepted at maxLength,
//     and refused naming the key at maxLength+1;
//   - one it does not bound is either unbounded in the description, or a reference to something the server knows
//     (a job, a task, a tool of the grant) whose longer value is refused all the same.
//
// A bound is probed in ASCII, and in chars of 2 and 4 bytes (the last 2 UTF-16 units) too: maxLength counts code
// points (docs/protocol.md, "Lengths"), so a bound counting bytes or UTF-16 units fails here. A param refused
// for one such char (an id of [A-Za-z0-9_-]) is ASCII by its pattern and is probed in ASCII only; a length whose
// frame would not fit is not probed in that char.
//
// A bound added to or changed in a command without the description, or the other way round, fails here.
func TestProtocolStringBoundsMatchCommands(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameCeiling}})
	s := f.seed()
	callers := map[string]*client{events.RoleAdmin: f.dial(), events.RoleWorker: f.dial(), events.RoleOrchestrator: f.dial()}
	callers[events.RoleAdmin].helloAdmin()
	callers[events.RoleWorker].hello(runR, taskP, s.p)
	callers[events.RoleOrchestrator].hello(runR, events.OrchestratorKey, s.orch)
	// Room for the rest of the request in the frame.
	ceiling := wire.MaxFrameCeiling - 4096

	d, err := Describe()
	require.NoError(t, err)
	probed := 0
	for _, m := range d.Methods {
		if !m.Command {
			continue
		}
		c := callers[m.Roles[0]]
		if slices.Contains(m.Roles, events.RoleOrchestrator) {
			c = callers[events.RoleOrchestrator]
		}
		for _, p := range m.Params {
			// commandId is the broker's, and an enum's refusal is for its value.
			if p.Type != commands.ParamString || len(p.Enum) > 0 || p.Name == "commandId" {
				continue
			}
			probed++
			t.Run(m.Name+"."+p.Name, func(t *testing.T) {
				send := func(char string, n int) *wire.Error {
					return c.call(m.Name, probeParams(m, p.Name, strings.Repeat(char, n))).Error
				}
				lengthRefused := func(char string, n int) bool {
					e := send(char, n)
					return e != nil && e.Code == wire.CodeBadParams && strings.Contains(e.Message, p.Name+" must")
				}
				if !lengthRefused("a", ceiling) {
					if p.MaxLength > 0 {
						require.NotNil(t, send("a", p.MaxLength+1),
							"%s.%s: accepted past the description's maxLength %d", m.Name, p.Name, p.MaxLength)
					}
					return
				}
				require.NotZero(t, p.MaxLength, "the server bounds %s.%s: give it a maxLength in broker/protocol_spec.go", m.Name, p.Name)
				for _, char := range []string{"a", "é", "😀"} {
					if char != "a" && lengthRefused(char, 1) || (p.MaxLength+1)*len(char) > ceiling {
						continue
					}
					require.False(t, lengthRefused(char, p.MaxLength), "%s.%s: %q×%d refused at the description's maxLength",
						m.Name, p.Name, char, p.MaxLength)
					require.True(t, lengthRefused(char, p.MaxLength+1), "%s.%s: %q×%d not refused past the description's maxLength",
						m.Name, p.Name, char, p.MaxLength+1)
				}
			})
		}
	}
	require.Positive(t, probed)
}

// probeParams are params of method m for the seeded fixture: key the value given, every required param (and runId)
// a valid sample.
func probeParams(m methodDesc, key, value string) map[string]any {
	params := map[string]any{"runId": runR}
	for _, p := range m.Params {
		if !p.Required {
			continue
		}
		switch {
		case p.Name == "result":
			params[p.Name] = map[string]any{"content": []any{}}
		case p.Name == "tools":
			params[p.Name] = []any{}
		case p.Name == "taskId" && (m.Name == "credential.revoke" || m.Name == "task.transition"):
			params[p.Name] = taskQ // not the prober's own: its revocation, or its task's retry, ends its connections
		case p.Name == "to" && len(p.Enum) == 0:
			params[p.Name] = taskQ
		default:
			params[p.Name] = sampleParam(p)
		}
	}
	params[key] = value
	return params
}
