package broker

import (
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// methodDashboardLogin mints a login link to the dashboard for the admin.
const methodDashboardLogin = "dashboard.login"

// dashboardLoginResult is dashboard.login's answer.
type dashboardLoginResult struct {
	URL       string `json:"url"`
	ExpiresAt int64  `json:"expiresAt"` // unix ms, as every time on the wire
}

// dashboard.login {} → {url, expiresAt (unix ms)}: a one-time login link to the dashboard crewd serves, for the
// admin, valid for ten minutes. Why through the socket: the dashboard listens on TCP, where any local process may
// hold the address first (crewd then serves no dashboard); a client that sent the admin token there (POST
// /api/v1/login) would hand it to that process, while the socket is crewd's own, in a directory only its user may
// reach, and the link names the address crewd itself listens on (or the one its operator gave for a proxy in front
// of it: crewd's --http-public-url).
func handleDashboardLogin(cl *call) (any, error) {
	if cl.c.id.role != events.RoleAdmin {
		return nil, forbidden("%s: admin only", cl.method)
	}
	p := readParams(cl)
	p.strict()
	if p.err != nil {
		return nil, p.err
	}
	if mint := cl.c.s.opts.DashboardLogin; mint != nil {
		if url, exp, ok := mint(); ok {
			return dashboardLoginResult{URL: url, ExpiresAt: exp.UnixMilli()}, nil
		}
	}
	return nil, wire.NewError(wire.CodeNotImplemented,
		"dashboard.login: this crewd serves no dashboard (started with --http \"\", its address was in use, or it is "+
			"still starting)")
}
