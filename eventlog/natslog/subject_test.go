package natslog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// Every crewlog stream name maps to one valid subject token and back; run
// ids are their own token; no two names share a token.
func TestStreamTokensAreValidAndReversible(t *testing.T) {
	names := []string{"r", "run-01_x", "$engine", "$import", "a.b", "a b", "*", ">", "~", "~abc", "é", "\x00",
		strings.Repeat("z", eventlog.MaxStreamLen), strings.Repeat("$", eventlog.MaxStreamLen), "JGVuZ2luZQ"}
	seen := map[string]string{}
	for _, s := range names {
		tok := streamToken(s)
		require.NotEmpty(t, tok)
		require.LessOrEqual(t, len(tok), maxTokenLen, s)
		require.False(t, strings.ContainsAny(tok, ".*> \t\r\n$"), "%q → %q", s, tok)
		back, err := tokenStream(tok)
		require.NoError(t, err, s)
		require.Equal(t, s, back)
		require.NotContains(t, seen, tok, "%q and %q", s, seen[tok])
		seen[tok] = s
	}
	require.Equal(t, "run-01_x", streamToken("run-01_x"))
	require.Equal(t, "~JGVuZ2luZQ", streamToken("$engine"))

	// Tokens streamToken never makes are refused, not decoded to a name
	// that has another token.
	for _, tok := range []string{"", "~", "~cg", "~cg==", "a.b", "~!!", "~" + strings.Repeat("A", maxTokenLen)} {
		_, err := tokenStream(tok)
		require.ErrorIs(t, err, errNotToken, "%q", tok)
	}
	_, err := testConfig.subjectStream("crewlog.OTHER.events.r")
	require.ErrorIs(t, err, errNotToken)
	s, err := testConfig.subjectStream(testConfig.EventSubject("$import"))
	require.NoError(t, err)
	require.Equal(t, "$import", s)
}
