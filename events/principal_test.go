package events

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every principal has its own Key, whatever characters its run and task ids
// hold, and the Key parses back to it; the engine's is no client's.
func TestPrincipalKey(t *testing.T) {
	ps := []Principal{
		AdminPrincipal(), EnginePrincipal(),
		OrchestratorPrincipal("R"), OrchestratorPrincipal("R1"), OrchestratorPrincipal(""),
		OrchestratorPrincipal("a"),
		OrchestratorPrincipal("e"), OrchestratorPrincipal("\x01R"),
		WorkerPrincipal("R", "T"), WorkerPrincipal("R\x01T", ""), WorkerPrincipal("R", "\x01T"),
		WorkerPrincipal("", "RT"),
		WorkerPrincipal("RT", ""), WorkerPrincipal("R", "T1"), WorkerPrincipal(string(make([]byte, 200)), "T"),
	}
	seen := map[string]Principal{}
	for _, p := range ps {
		k := p.Key()
		require.NotEmpty(t, k)
		if q, dup := seen[k]; dup {
			t.Fatalf("%+v and %+v share the key %q", p, q, k)
		}
		seen[k] = p
		require.Equal(t, "prefix"+k, string(p.AppendKey([]byte("prefix"))), "AppendKey appends the Key")
		back, ok := ParsePrincipalKey(k)
		require.True(t, ok, "%q", k)
		require.Equal(t, p, back)
	}
	require.Empty(t, Principal{}.Key(), "the zero principal has no key")
	require.Empty(t, Principal{Role: "bogus"}.Key())
	for _, bad := range []string{"", "x", "a1", "e ", "o", "o\x05R", "w\x01R", "w\x01R\x01T+"} {
		_, ok := ParsePrincipalKey(bad)
		require.False(t, ok, "%q", bad)
	}
}

// FuzzParsePrincipalKey: a key ParsePrincipalKey accepts is the Key of the principal it gives.
func FuzzParsePrincipalKey(f *testing.F) {
	for _, p := range []Principal{AdminPrincipal(), EnginePrincipal(), OrchestratorPrincipal("R"),
		WorkerPrincipal("R", "T"),
		WorkerPrincipal("", "")} {
		f.Add(p.Key())
	}
	f.Fuzz(func(t *testing.T, k string) {
		if p, ok := ParsePrincipalKey(k); ok {
			require.Equal(t, k, p.Key())
		}
	})
}

// An event's envelope names the principal whose command wrote it.
func TestEventPrincipal(t *testing.T) {
	cases := []struct {
		role, stream, task, correlation string
		want                            Principal
	}{
		{RoleAdmin, "R", "", "", AdminPrincipal()},
		{RoleAdmin, EngineStream, "", "", AdminPrincipal()},
		{RoleOrchestrator, "R", "", "", OrchestratorPrincipal("R")},
		{RoleWorker, "R", "T", "", WorkerPrincipal("R", "T")},
		{RoleEngine, "R", "", "", EnginePrincipal()},
		{RoleAdmin, "R", "", ImportCorrelation + "picrew", EnginePrincipal()},
		{"", "R", "", "", AdminPrincipal()},
	}
	for _, c := range cases {
		require.Equal(t, c.want, EventPrincipal(c.role, c.stream, c.task, c.correlation), "%+v", c)
		require.Equal(t, c.want.Actor().Role, c.want.Role)
	}
	require.Equal(t, Actor{Role: RoleWorker, TaskID: "T"}, WorkerPrincipal("R", "T").Actor())
}
