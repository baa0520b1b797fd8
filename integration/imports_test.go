package integration

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/crewlog/crewlog"

// allowedImports is the layering of DESIGN.md: which project packages each
// package may import. A package missing here may import anything (mains,
// tests).
var allowedImports = map[string][]string{
	"eventlog": {},
	// The JetStream log and the conformance suite of the log contract.
	"eventlog/natslog": {"eventlog", "events/msgpacklen"},
	"eventlog/logtest": {"eventlog"},
	// A leaf: msgpack writers shared by the events payload codec, the
	// projections snapshot encoder and the commands' fingerprints.
	"events/msgpackappend": {},
	// A leaf: passes over msgpack values, so the log's backends can check
	// declared lengths without depending on the domain (and commands can
	// find where a forwarded request's array ends).
	"events/msgpacklen": {},
	"events":            {"events/msgpackappend", "events/msgpacklen"},
	"projections":       {"events", "eventlog", "events/msgpackappend"},
	// A leaf: a string appended as json.Marshal encodes it, for commands' results and broker/wire's encoders.
	"events/jsonstring": {},
	// A leaf: the tests' reference for those encoders, encoding/json's bytes as Go 1.26 wrote them on every release.
	"events/jsonstring/jsonref": {},
	// A leaf: the scanner of valid JSON behind broker/wire's frames and the bounded lists of the broker's and
	// commands' params.
	"events/jsonscan": {},
	"commands": {"events", "projections", "eventlog", "events/msgpackappend", "events/msgpacklen",
		"events/jsonstring", "events/jsonscan"},
	// A crewd of a JetStream cluster: the engine over the JetStream log.
	"commands/cluster": {"commands", "events", "projections", "eventlog", "eventlog/natslog"},
	"migrations":       {"events", "eventlog"},
	// The pi-crew import writes events directly: no commands, no projections.
	"migrations/picrew": {"events", "eventlog"},
	"broker/wire":       {"events/jsonstring", "events/jsonscan"},
	// Per-key turns: the broker's and the HTTP API's per-credential limits.
	"broker/internal/turns": {},
	"broker": {"commands", "projections", "events", "eventlog", "broker/wire", "broker/internal/turns",
		"events/jsonscan"},
	// The HTTP API reads what the broker and crewctl read; it decides nothing.
	"broker/httpapi":       {"broker", "commands", "projections", "events", "eventlog", "audit", "broker/internal/turns"},
	"broker/httpapi/webui": {},
}

// TestImportRules enforces the package layering and that only eventlog
// imports Pebble (direct, non-test imports). The one exception is crewbench,
// whose plain-Pebble baseline measures Pebble itself.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...").Output()
	require.NoError(t, err)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		require.NoError(t, dec.Decode(&p))
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		allowed, ruled := allowedImports[rel]
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") && !strings.HasPrefix(rel, "cmd/crewbench/") {
				require.Equal(t, "eventlog", rel, "%s imports Pebble; only eventlog may", p.ImportPath)
			}
			if !ruled || !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			require.Contains(t, allowed, dep, "%s may not import %s", rel, dep)
		}
		seen++
	}
	require.Greater(t, seen, 4)
}
