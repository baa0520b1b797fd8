package commands

import (
	"encoding/json"
	"slices"

	"github.com/crewlog/crewlog/events"
)

// MethodInfo describes a method of the method table as ParseCommand reads it: who may call it, whether unknown
// params keys are refused, and every params key its parse function reads. The broker's machine-readable protocol
// description (docs/protocol.json) is generated from it, so a key added to a parse function is described without
// anyone remembering to.
type MethodInfo struct {
	Roles  []string // events.RoleWorker, events.RoleOrchestrator, events.RoleAdmin, in that order
	Strict bool     // unknown params keys are refused (crewlog's engine methods)
	// RunOptionalForAdmin: the admin may leave out runId (run.create mints one; delegate.settle and
	// delegate.cancel find a slot holder's run).
	RunOptionalForAdmin bool
	Params              []ParamInfo // in the order the parse function reads them; runId first
}

// ParamInfo is one params key: its JSON type (ParamString, …) and whether a request without it is refused.
type ParamInfo struct {
	Name     string
	Type     string
	Required bool
}

// JSON types of params keys, as ParamInfo.Type spells them.
const (
	ParamString          = "string"
	ParamInteger         = "integer"
	ParamNumber          = "number"
	ParamBoolean         = "boolean"
	ParamStrings         = "string[]"
	ParamStringOrStrings = "string | string[]"
	ParamAny             = "unknown"
)

// paramTypes maps what a paramReader read wants (its error text) to the key's JSON type.
var paramTypes = map[string]string{
	"a string":                        ParamString,
	"an integer":                      ParamInteger,
	"a number":                        ParamNumber,
	"a boolean":                       ParamBoolean,
	"an array of strings":             ParamStrings,
	"a string or an array of strings": ParamStringOrStrings,
	"present":                         ParamAny,
}

// DescribeMethod describes a method of the table, false for one it does not know. It runs the method's parse
// function on a recording reader, so it does no IO and decides nothing. A read whose want has no JSON type in
// paramTypes is described with an empty Type, which the broker's protocol test refuses.
func DescribeMethod(name string) (MethodInfo, bool) {
	m, ok := methods[name]
	if !ok {
		return MethodInfo{}, false
	}
	probe := &paramProbe{optional: map[string]bool{}}
	probe.note("runId", "a string", false)
	p := &paramReader{method: name, m: map[string]json.RawMessage{}, probe: probe}
	m.parse(p, Caller{Role: events.RoleAdmin}, "")
	return MethodInfo{
		Roles: m.who.roles(), Strict: m.strict,
		RunOptionalForAdmin: runOptionalForAdmin(name),
		Params:              probe.params,
	}, true
}

// paramProbe records the reads of a parse function.
type paramProbe struct {
	params   []ParamInfo
	optional map[string]bool // keys a has() guards: read only when given
}

func (pp *paramProbe) note(key, want string, required bool) {
	t, ok := paramTypes[want]
	if !ok {
		t = ""
	}
	i := slices.IndexFunc(pp.params, func(x ParamInfo) bool { return x.Name == key })
	if i < 0 {
		pp.params = append(pp.params, ParamInfo{Name: key, Type: t, Required: required && !pp.optional[key]})
		return
	}
	pp.params[i].Required = pp.params[i].Required || required && !pp.optional[key]
}

func (a audience) roles() []string {
	switch a {
	case runtimeRole:
		return []string{events.RoleOrchestrator, events.RoleAdmin}
	case workerRole:
		return []string{events.RoleWorker}
	case adminRole:
		return []string{events.RoleAdmin}
	}
	return []string{events.RoleWorker, events.RoleOrchestrator, events.RoleAdmin}
}
