package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
)

func TestAdminCheckpoint(t *testing.T) {
	f := newFixture(t, fixtureOpts{disk: true})
	s := f.seed()
	head, _ := f.log.Head()
	a := f.dial()
	a.helloAdmin()
	dir := filepath.Join(t.TempDir(), "copy")

	res := a.ok(methodAdminCheckpoint, map[string]any{"dir": dir})
	require.Equal(t, dir, res["dir"])
	require.EqualValues(t, head, res["head"])
	l, err := eventlog.Open(dir, &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, rep.Head, head)
	require.NoError(t, l.Close())

	a.fails(methodAdminCheckpoint, map[string]any{"dir": dir}, wire.CodeBadParams)                             // exists
	a.fails(methodAdminCheckpoint, map[string]any{"dir": "relative/copy"}, wire.CodeBadParams)                 // not absolute
	a.fails(methodAdminCheckpoint, map[string]any{"dir": filepath.Join(dir+"-none", "x")}, wire.CodeBadParams) // no parent
	a.fails(methodAdminCheckpoint, map[string]any{}, wire.CodeBadParams)
	a.fails(methodAdminCheckpoint, map[string]any{"dir": dir + "2", "extra": 1}, wire.CodeBadParams)
	_, err = os.Stat(dir + "2")
	require.ErrorIs(t, err, os.ErrNotExist)

	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	o.fails(methodAdminCheckpoint, map[string]any{"dir": dir + "3"}, wire.CodeForbidden)
	_, err = os.Stat(dir + "3")
	require.ErrorIs(t, err, os.ErrNotExist)
}
