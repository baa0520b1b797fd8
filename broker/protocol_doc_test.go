package broker

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestProtocolDocCoversMethods fails when a method the server answers has no "### `method`" section in
// docs/protocol.md, or a section documents a method the server does not answer.
func TestProtocolDocCoversMethods(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	require.NoError(t, err)
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^### `([^`]+)`\\s*$").FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	served := Methods()
	for _, m := range served {
		require.Contains(t, documented, m, "method %s is served but not documented in docs/protocol.md", m)
	}
	for _, m := range documented {
		require.Contains(t, served, m, "docs/protocol.md documents %s, which the server does not answer", m)
	}
	require.Equal(t, len(served), len(slices.Compact(documented)), "a method is documented twice")

	// Every code the server may send is named in the doc.
	for _, c := range wire.Codes() {
		require.Contains(t, string(doc), "`"+string(c)+"`", "code %s is not in docs/protocol.md", c)
	}
}

// TestServedMethodsAnswer: every method in Methods() is dispatched (never not-implemented), so the doc test above
// checks what the server really answers.
func TestServedMethodsAnswer(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.seed()
	c := f.dial()
	c.helloAdmin()
	for _, m := range Methods() {
		if m == wire.MethodHello {
			continue
		}
		r := c.call(m, map[string]any{"runId": "R404"})
		if r.Error != nil {
			require.NotEqual(t, wire.CodeNotImplemented, r.Error.Code, m)
		}
	}
	require.Equal(t, wire.CodeNotImplemented, c.call("query.nothing", nil).Error.Code)
}
