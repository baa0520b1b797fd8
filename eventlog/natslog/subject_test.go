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
	for _, tok := range []string{"", "~", "~cg", "~cg==", "a.b", "~!!", "~" + strings.Repeat("A", maxTokenLen),
		strings.Repeat("z", eventlog.MaxStreamLen+1), "~JGVu\nZ2luZQ", "~JGVu\rZ2luZQ"} {
		_, err := tokenStream(tok)
		require.ErrorIs(t, err, errNotToken, "%q", tok)
	}
	_, err := testConfig.subjectStream("crewlog.OTHER.events.r")
	require.ErrorIs(t, err, errNotToken)
	s, err := testConfig.subjectStream(testConfig.EventSubject("$import"))
	require.NoError(t, err)
	require.Equal(t, "$import", s)
}

// FuzzSubjectStream reads any subject as a copy reads the subject of a stored message, which any publisher on the
// stream's events wildcard chooses: a crewlog stream's name of 1..MaxStreamLen bytes whose subject is the one read,
// or errNotToken; never a panic, and never one name read from two subjects.
func FuzzSubjectStream(f *testing.F) {
	for _, s := range []string{"r1", "$engine", "a.b", "~", strings.Repeat("é", eventlog.MaxStreamLen/2)} {
		f.Add(testConfig.EventSubject(s))
	}
	for _, tok := range []string{"", "~", "~cg", "~cg==", "~JGVuZ2luZQ==", "a.b", "r1.r2"} {
		f.Add("crewlog." + testConfig.Stream + ".events." + tok)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		s, err := testConfig.subjectStream(subject)
		if err != nil {
			require.ErrorIs(t, err, errNotToken)
			return
		}
		require.NotEmpty(t, s)
		require.LessOrEqual(t, len(s), eventlog.MaxStreamLen)
		require.Equal(t, subject, testConfig.EventSubject(s), "stream %q", s)
	})
}
