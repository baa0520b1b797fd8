package broker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// dashboard.login hands the admin the link the daemon mints, with its expiry in unix ms; a run's credentials are
// forbidden it, params are refused, and a daemon that serves no dashboard says so.
func TestDashboardLogin(t *testing.T) {
	exp := time.Date(2026, 12, 5, 12, 10, 0, 0, time.UTC)
	var serving atomic.Bool
	var minted atomic.Int32
	serving.Store(true)
	f := newFixture(t, fixtureOpts{opts: Options{DashboardLogin: func() (string, time.Time, bool) {
		if !serving.Load() {
			return "", time.Time{}, false
		}
		minted.Add(1)
		return "http://127.0.0.1:7717/login?code=c", exp, true
	}}})
	s := f.seed()
	a := f.dial()
	a.helloAdmin()
	res := a.ok(methodDashboardLogin, map[string]any{})
	require.Equal(t, "http://127.0.0.1:7717/login?code=c", res["url"])
	require.EqualValues(t, exp.UnixMilli(), res["expiresAt"])
	require.EqualValues(t, 1, minted.Load())

	a.fails(methodDashboardLogin, map[string]any{"ttl": 1}, wire.CodeBadParams)
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	o.fails(methodDashboardLogin, map[string]any{}, wire.CodeForbidden)
	w := f.dial()
	w.hello(runR, taskP, s.p)
	w.fails(methodDashboardLogin, map[string]any{}, wire.CodeForbidden)
	require.EqualValues(t, 1, minted.Load(), "no link minted for a refused request")

	serving.Store(false)
	e := a.fails(methodDashboardLogin, map[string]any{}, wire.CodeNotImplemented)
	require.Contains(t, e.Message, "serves no dashboard")
}

// A server without the hook (a broker outside crewd) serves no dashboard.
func TestDashboardLoginWithoutADashboard(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	a := f.dial()
	a.helloAdmin()
	e := a.fails(methodDashboardLogin, map[string]any{}, wire.CodeNotImplemented)
	require.Equal(t, `dashboard.login: this crewd serves no dashboard (started with --http "", its address was in use, `+
		`or it is still starting)`, e.Message)
}
