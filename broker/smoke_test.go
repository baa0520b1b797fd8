package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSmoke(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	w := f.dial()
	w.hello(runR, taskP, s.p)
	require.Equal(t, true, w.ok("ping", nil)["pong"])
	res := w.ok("delegate.request", map[string]any{"prompt": "find X", "description": "search"})
	require.Equal(t, float64(2), res["childDepth"])
}
