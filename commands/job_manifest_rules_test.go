package commands

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/projections"
)

// manifestToolWith is jobTool("read") with its fields set (a nil value deletes the field).
func manifestToolWith(set map[string]any) map[string]any {
	t := jobTool("read", false, "read")
	for k, v := range set {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = v
	}
	return t
}

// TestManifestRules: each rule of T1–T3 a grant's tool is checked by, on both sides of its bound: the name's chars
// (1..MaxToolNameChars), the callable's (at most MaxIDChars), the one tool callable without a callable identity
// (codemode), the delegation tools no grant holds, and sourceInfo's fields, which are a closed set.
func TestManifestRules(t *testing.T) {
	sourceInfo := func(extra string) map[string]any {
		si := map[string]any{"path": "/t/read", "source": "pi", "scope": "user", "origin": "package"}
		if extra != "" {
			si[extra] = "x"
		}
		return si
	}
	for _, tc := range []struct {
		name   string
		set    map[string]any
		reason string // "" accepted
	}{
		{"a name of the longest", map[string]any{"name": strings.Repeat("é", MaxToolNameChars)}, ""},
		{"a name one char too long", map[string]any{"name": strings.Repeat("é", MaxToolNameChars+1)}, reasonToolName},
		{"an empty name", map[string]any{"name": ""}, reasonToolName},
		{"a callable of the longest", map[string]any{"callable": strings.Repeat("c", MaxIDChars)}, ""},
		{"a callable one char too long", map[string]any{"callable": strings.Repeat("c", MaxIDChars+1)},
			reasonManifestInvalid},
		{"codemode without a callable", map[string]any{"name": projections.CodemodeTool, "callable": nil}, ""},
		{"another tool without a callable", map[string]any{"callable": nil}, reasonNotCallable},
		{"delegate", map[string]any{"name": "delegate"}, reasonDelegationTool},
		{"delegate_status", map[string]any{"name": "delegate_status"}, reasonDelegationTool},
		{"delegates, not a delegation tool", map[string]any{"name": "delegates"}, ""},
		{"sourceInfo with baseDir", map[string]any{"sourceInfo": sourceInfo("baseDir")}, ""},
		{"sourceInfo with an unknown field", map[string]any{"sourceInfo": sourceInfo("zone")}, reasonManifestInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal([]any{manifestToolWith(tc.set)})
			require.NoError(t, err)
			tools, _, _, merr := parseManifest(raw, 1<<20)
			if tc.reason == "" {
				require.Nil(t, merr)
				require.Len(t, tools, 1)
				return
			}
			require.NotNil(t, merr)
			require.Equal(t, tc.reason, merr.reason, merr.msg)
			require.Equal(t, 0, merr.index)
		})
	}
}

// TestManifestByteLimit: the limit bounds the canonical list, brackets included: a list of exactly limit bytes is
// accepted, and refused manifest-too-large with the bytes it measured under a limit one byte less.
func TestManifestByteLimit(t *testing.T) {
	raw, err := json.Marshal([]any{jobTool("read", true, "read"), jobTool("write", false, "write")})
	require.NoError(t, err)
	tools, size, _, merr := parseManifest(raw, 1<<20)
	require.Nil(t, merr)
	require.Len(t, tools, 2)

	tools, got, _, merr := parseManifest(raw, size)
	require.Nil(t, merr, "a list of exactly the limit")
	require.Len(t, tools, 2)
	require.Equal(t, size, got)

	_, got, _, merr = parseManifest(raw, size-1)
	require.NotNil(t, merr, "a list one byte over the limit")
	require.Equal(t, reasonManifestTooLarge, merr.reason)
	require.Equal(t, size, merr.bytes)
	require.Equal(t, size, got)
	require.Equal(t, 1, merr.index, "the tool that passed the limit")
}
