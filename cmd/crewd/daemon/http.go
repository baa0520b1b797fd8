package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/httpapi"
	"github.com/crewlog/crewlog/broker/httpapi/webui"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// startHTTP makes the dashboard's HTTP server and binds cfg.HTTPAddr; nil when HTTP is off. A default address
// that is already in use (another crewd, say) turns HTTP off with a warning; an address given explicitly that
// cannot be bound stops the start. notReady is why crewd stops, or "" while it runs (httpapi.Options.NotReady).
func startHTTP(cfg Config, eng *commands.Engine, log *eventlog.Log, srv *broker.Server, metrics *httpapi.Metrics,
	adminDigest string, notReady func() string, lg *slog.Logger) (*httpapi.Server, error) {
	if cfg.HTTPAddr == "" {
		return nil, nil
	}
	hl := lg.With("component", "http")
	opts := httpapi.Options{
		Engine: eng, Log: log, AdminDigest: adminDigest, UI: webui.FS(), AllowRemote: cfg.HTTPAllowRemote,
		SecureCookie: cfg.HTTPSecureCookie, PublicURL: cfg.HTTPPublicURL,
		ReadOnly: NewReadOnlyTokens(cfg.DataDir, func(err error) {
			hl.Warn("read-only tokens unreadable; none accepted", "err", err)
		}),
		Metrics: metrics, Logger: hl, NotReady: notReady,
	}
	if srv != nil {
		opts.Broker, opts.Pacer = srv, srv
	}
	web, err := httpapi.New(opts)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if err := web.Listen(cfg.HTTPAddr); err != nil {
		web.Close()
		if !cfg.HTTPAddrSet && errors.Is(err, syscall.EADDRINUSE) {
			lg.Warn("the dashboard's default address is in use; serving without HTTP (pass --http ADDR)", "addr", cfg.HTTPAddr)
			return nil, nil
		}
		return nil, fmt.Errorf("daemon: --http: %w", err)
	}
	if cfg.HTTPSecureCookie && cfg.HTTPPublicURL == "" {
		// NB: the links then name crewd's own http address, where the browser gets a Secure cookie over plain http
		// (refused by browsers but on localhost) that it sends only over https: the operator must know.
		lg.Warn("the login links name crewd's own address, but the session cookie is Secure (--http-secure-cookie): "+
			"open each through the proxy's https address (its path and query on the proxy's host), or pass "+
			"--http-public-url https://HOST/", "addr", web.BaseURL())
	}
	return web, nil
}
