package commands

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/projections"
)

// TestRevalidateRules: T4 compares the manager's current grant with the job's tool by tool, and reports the first
// difference: the count (index -1), then at each index the name, the fingerprint and the callable identity, which
// is compared for every tool but codemode (called through no manager identity of its own).
func TestRevalidateRules(t *testing.T) {
	read := manifestTool{name: "read", fingerprint: "f-read", callable: "mgr:read"}
	code := manifestTool{name: projections.CodemodeTool, fingerprint: "f-code"}
	with := func(m manifestTool, set func(*manifestTool)) manifestTool { set(&m); return m }
	for _, tc := range []struct {
		name        string
		want, got   []manifestTool
		index       int
		cause, w, g string // cause "": the same grant
	}{
		{"the same grant", []manifestTool{read, code}, []manifestTool{read, code}, 0, "", "", ""},
		{"codemode with a callable identity now", []manifestTool{read, code},
			[]manifestTool{read, with(code, func(m *manifestTool) { m.callable = "mgr:code" })}, 0, "", "", ""},
		{"a tool more", []manifestTool{read}, []manifestTool{read, code}, -1, "count", "1", "2"},
		{"another name", []manifestTool{read, code},
			[]manifestTool{read, with(code, func(m *manifestTool) { m.name = "code" })}, 1, "name", "codemode", "code"},
		{"another fingerprint", []manifestTool{code, read},
			[]manifestTool{code, with(read, func(m *manifestTool) { m.fingerprint = "f-other" })}, 1, "fingerprint",
			"f-read", "f-other"},
		{"another callable identity", []manifestTool{code, read},
			[]manifestTool{code, with(read, func(m *manifestTool) { m.callable = "mgr:other" })}, 1, "callable",
			"mgr:read", "mgr:other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			index, cause, w, g, ok := revalidate(tc.want, tc.got)
			require.Equal(t, tc.cause == "", ok)
			require.Equal(t, tc.index, index)
			require.Equal(t, tc.cause, cause)
			require.Equal(t, tc.w, w)
			require.Equal(t, tc.g, g)
		})
	}
}
