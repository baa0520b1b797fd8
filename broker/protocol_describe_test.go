package broker

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/projections"
)

// TestProtocolJSONCurrent is the drift test of docs/protocol.json: it must be what the method table generates.
func TestProtocolJSONCurrent(t *testing.T) {
	want, err := ProtocolJSON()
	require.NoError(t, err)
	got, err := os.ReadFile("../docs/protocol.json")
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got),
		"docs/protocol.json is stale: run `go generate ./broker` and commit the result (the TypeScript client's types follow from it)")
}

// TestProtocolSpec: every served method is described (summary, result, codes) and nothing else is; a broker method
// names its roles.
func TestProtocolSpec(t *testing.T) {
	served := Methods()
	for _, m := range served {
		spec, ok := protocolSpec[m]
		require.True(t, ok, "method %s is served but not described in broker/protocol_spec.go", m)
		require.NotEmpty(t, spec.summary, m)
		require.NotEmpty(t, spec.results, "%s: describe its result", m)
		if _, command := commands.DescribeMethod(m); !command {
			require.NotEmpty(t, spec.roles, "%s: name the roles that may call it", m)
		} else {
			require.Empty(t, spec.roles, "%s: a command method's roles come from the method table", m)
		}
		for _, c := range spec.errors {
			require.True(t, c.Valid(), "%s: unknown code %s", m, c)
		}
	}
	for m := range protocolSpec {
		require.Contains(t, served, m, "broker/protocol_spec.go describes %s, which the server does not answer", m)
	}
	d, err := Describe()
	require.NoError(t, err)
	for _, m := range d.Methods {
		for _, p := range m.Params {
			require.NotEmpty(t, p.Type, "%s.%s has no type", m.Name, p.Name)
		}
		require.NotContains(t, m.Result, "unknown", "%s: a result of unknown shape", m.Name)
	}
}

// TestProtocolParamsAreRead: a strict method (one that refuses unknown keys) accepts every key the description
// gives it, so a key the description names but the handler no longer reads, or spells differently, fails here.
// (Command methods' keys are read off their parse functions, so they cannot drift; this covers the broker's own.)
func TestProtocolParamsAreRead(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	admin, worker := f.dial(), f.dial()
	admin.helloAdmin()
	worker.hello(runR, taskP, s.p)
	d, err := Describe()
	require.NoError(t, err)
	checked := 0
	for _, m := range d.Methods {
		if !m.StrictParams || m.Command {
			continue
		}
		c := admin
		if !slices.Contains(m.Roles, "admin") {
			c = worker
		}
		params := map[string]any{}
		for _, p := range m.Params {
			params[p.Name] = sampleParam(p)
		}
		r := c.call(m.Name, params)
		if r.Error != nil {
			require.NotContains(t, r.Error.Message, "unknown field", "%s does not read a key its description names", m.Name)
		}
		params["notDescribed"] = true
		require.Contains(t, c.fails(m.Name, params, wire.CodeBadParams).Message, "unknown field", m.Name)
		checked++
	}
	require.Positive(t, checked)
}

// sampleParam is a value of p's type within its bounds.
func sampleParam(p paramDesc) any {
	switch {
	case len(p.Enum) > 0:
		return p.Enum[0]
	case p.Name == "dir":
		return "/nonexistent-parent/copy"
	case p.Name == "taskId":
		return taskP
	case p.Name == "runId":
		return runR
	case p.Name == "cursor":
		return nil
	}
	switch strings.Split(p.Type, " | ")[0] {
	case "integer", "number":
		if p.Min != nil {
			return *p.Min
		}
		return 1
	case "boolean":
		return false
	case "string[]":
		return []string{"x"}
	}
	return "x"
}

// TestProtocolDescribesEveryCode: the description lists every wire code with whether it closes the connection.
func TestProtocolDescribesEveryCode(t *testing.T) {
	d, err := Describe()
	require.NoError(t, err)
	var codes []wire.Code
	for _, c := range d.Codes {
		codes = append(codes, c.Code)
		require.Equal(t, c.Code.Closes(), c.Closes, c.Code)
	}
	require.Equal(t, wire.Codes(), codes)
	require.True(t, slices.ContainsFunc(d.Pushes, func(p pushDesc) bool { return p.Event == wire.EventResync }))
}

// TestProtocolTypesSayWhatMayBeNull: a field the server sends as null is described as possibly null, so that a
// typed client checks for it: a task too large for a frame is sent with dependsOn null (dependsOnOmitted), which the
// description gave as string[] alone.
func TestProtocolTypesSayWhatMayBeNull(t *testing.T) {
	d, err := Describe()
	require.NoError(t, err)
	w := WireTask{Task: projections.Task{TaskID: "T", DependsOn: []string{"A"}}}
	w.OmitDependsOn()
	b, err := json.Marshal(w)
	require.NoError(t, err)
	var sent map[string]any
	require.NoError(t, json.Unmarshal(b, &sent))
	nulls := 0
	for _, f := range d.Types["Task"].Fields {
		if v, ok := sent[f.Name]; ok && v == nil {
			require.Contains(t, f.Type, "null", "Task.%s is sent as null", f.Name)
			nulls++
		}
	}
	require.Positive(t, nulls, "the omitted dependsOn is sent as null")
}
