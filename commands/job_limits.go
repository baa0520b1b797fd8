package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/projections"
)

// Upper bounds of the job limits a config may set (0 keeps the
// dispatcher's value, projections.JobLimits). A payload or a grant can never
// be larger than a frame anyway; the bounds keep a config from promising
// what the log could not hold.
const (
	MaxProxyPayloadBytes  = 64 << 20
	MaxProxyManifestBytes = 64 << 20
	MaxProxyMaxInFlight   = 1024
	MaxProxyMaxRequests   = 65536
	MaxRevokedRootLimit   = 65536
)

func validateJobLimits(c projections.Config) []error {
	var errs []error
	check := func(name string, v, hi int64) {
		if v < 0 || v > hi {
			errs = append(errs, fmt.Errorf("%s %d is outside 0..%d", name, v, hi))
		}
	}
	check("proxyPayloadBytes", c.ProxyPayloadBytes, MaxProxyPayloadBytes)
	check("proxyManifestBytes", c.ProxyManifestBytes, MaxProxyManifestBytes)
	check("proxyMaxInFlight", int64(c.ProxyMaxInFlight), MaxProxyMaxInFlight)
	check("proxyMaxRequests", int64(c.ProxyMaxRequests), MaxProxyMaxRequests)
	check("revokedRootLimit", int64(c.RevokedRootLimit), MaxRevokedRootLimit)
	return errs
}
