package daemon

import (
	"fmt"
	"strconv"
	"time"

	"github.com/crewlog/crewlog/broker"
)

// Limits are the broker's per-principal limits (broker.Options; docs/protocol.md lists what each refusal looks
// like). Load fills every field; the broker validates them again.
type Limits struct {
	MaxConns                      int
	ReservedConns                 int
	MaxConnsPerCredential         int
	MaxConnsPerRun                int
	MaxPendingPerProcess          int
	IdleTimeout                   time.Duration // 0: never
	MaxWaitsPerConn               int
	MaxWaitsPerCredential         int
	MaxSubscriptionsPerCredential int
	MaxReadsPerCredential         int
	OutboundBytes                 int
	GlobalOutboundBytes           int
	OutboundBytesPerCredential    int
	OutboundBytesPerRun           int
	GlobalInboundBytes            int
	InboundBytesPerCredential     int
	InboundBytesPerRun            int
	RatePerCredential             int // 0: no pacing
	BurstPerCredential            int
	RatePerRun                    int // 0: no pacing per run
	BurstPerRun                   int
}

const maxLimit = 1 << 20 // a bound on counts no deployment reaches, so a typo is refused, not obeyed

// minIdleTimeout is the shortest --idle-timeout but 0s. NB: a connection that holds a wait or a subscription has its
// idle timer armed again at every expiry, and every other one is closed as soon as its hello is answered: a timeout
// of microseconds (a typo) fired the timer of each such connection thousands of times a second, and closed the rest.
const minIdleTimeout = 100 * time.Millisecond

var limitOptions = []option{
	{"max-conns", kindInt, "N", fmt.Sprintf("connections of every token but the admin's, 1..%d; one more gets too-many-connections, and %d more are kept for the admin", maxLimit, broker.AdminConns), fixed(strconv.Itoa(broker.DefaultMaxConns))},
	{"reserved-conns", kindInt, "N", "connections of max-conns only the admin and orchestrators may use, 0..max-conns-1", fixed(strconv.Itoa(broker.DefaultMaxConns / 16))},
	{"max-conns-per-credential", kindInt, "N", fmt.Sprintf("connections of one token, 1..%d", maxLimit), fixed(strconv.Itoa(broker.DefaultMaxConnsPerCredential))},
	{"max-conns-per-run", kindInt, "N", fmt.Sprintf("worker connections of one run (its orchestrator's are bounded per credential only), 1..%d", maxLimit), fixed(strconv.Itoa(broker.DefaultMaxConnsPerRun))},
	{"max-pending-per-process", kindInt, "N", fmt.Sprintf("connections of one client process that have not finished their hello, 1..%d", maxLimit), fixed(strconv.Itoa(broker.DefaultMaxPendingPerPeer))},
	{"idle-timeout", kindDuration, "DURATION", "close a connection that sent no request for this long and holds no subscription or wait; 0s: never, else at least " + minIdleTimeout.String(), fixed(broker.DefaultIdleTimeout.String())},
	{"max-waits-per-conn", kindInt, "N", fmt.Sprintf("task.waitStatus in flight on one connection, 1..%d", maxLimit), fixed(strconv.Itoa(broker.DefaultMaxWaitsPerConn))},
	{"max-waits-per-credential", kindInt, "N", fmt.Sprintf("task.waitStatus in flight for one token, 1..%d", maxLimit), fixed(strconv.Itoa(broker.DefaultMaxWaitsPerCredential))},
	{"max-subscriptions-per-credential", kindInt, "N", fmt.Sprintf("connections of one token holding a subscription, 1..%d", maxLimit), fixed(strconv.Itoa(broker.DefaultMaxSubscriptionsPerCredential))},
	{"max-reads-per-credential", kindInt, "N", fmt.Sprintf("page reads (events.since, msg.inbox, query.*, proxy.result) of one token in progress at once, 1..%d; more wait their turn", maxLimit), fixed(strconv.Itoa(broker.DefaultMaxReadsPerCredential))},
	{"outbound-bytes", kindInt, "BYTES", "bytes queued or being written to one connection before a subscriber is resynced, at least max-frame", fixed(strconv.Itoa(broker.DefaultOutboundBytes))},
	{"global-outbound-bytes", kindInt, "BYTES", "bytes queued or being written to all connections together, at least outbound-bytes", fixed(strconv.Itoa(broker.DefaultGlobalOutboundBytes))},
	{"outbound-bytes-per-credential", kindIntOrAuto, "BYTES|auto", "bytes queued or being written to the connections of one token together, outbound-bytes..global-outbound-bytes, so a token whose connections read nothing cannot hold every other client's budget; auto: a sixteenth of global-outbound-bytes, at least outbound-bytes", fixed("auto")},
	{"global-inbound-bytes", kindInt, "BYTES", "bytes all connections' readers hold together in requests longer than 4 KiB they have not ended, at least max-frame; a reader without room reads no more and waits up to 10s, then its connection is closed as for a request over max-frame", fixed(strconv.Itoa(broker.DefaultGlobalInboundBytes))},
	{"inbound-bytes-per-credential", kindIntOrAuto, "BYTES|auto", "bytes the readers of the connections of one token hold together in requests longer than 4 KiB they have not ended, max-frame..global-inbound-bytes, so a token whose requests never end cannot hold every other client's budget (the admin's count against global-inbound-bytes alone); auto: a sixteenth of global-inbound-bytes, at least max-frame", fixed("auto")},
	{"inbound-bytes-per-run", kindIntOrAuto, "BYTES|auto", "bytes the readers of the worker connections of one run hold together in requests longer than 4 KiB they have not ended, whatever their tokens (its orchestrator's not counted), inbound-bytes-per-credential..global-inbound-bytes, so a run that issues a token to every task cannot hold every other run's budget; auto: a quarter of global-inbound-bytes, at least inbound-bytes-per-credential", fixed("auto")},
	{"rate-per-credential", kindInt, "N", fmt.Sprintf("units per second one token is served (a request, and one more per 4 KiB of it; a hello 50; an event events.since or a subscription reads; a read-only token's dashboard read or stream opened, and one more per event it reads of a finished run read back, a page of events, a stream's replay or live events or a past rebuilt, and per 4 KiB of run summaries read from disk or fields searched), 0..%d; beyond it its requests wait; 0: no pacing", maxLimit), fixed(strconv.Itoa(broker.DefaultRatePerCredential))},
	{"burst-per-credential", kindInt, "N", fmt.Sprintf("units one token may use at once above its rate, 1..%d", maxLimit), fixed(strconv.Itoa(broker.DefaultRatePerCredential))},
	{"outbound-bytes-per-run", kindIntOrAuto, "BYTES|auto", "bytes queued or being written to the worker connections of one run together, whatever their tokens (its orchestrator's not counted), outbound-bytes-per-credential..global-outbound-bytes, so a run that issues a token to every task cannot hold every other run's budget; auto: a quarter of global-outbound-bytes, at least outbound-bytes-per-credential", fixed("auto")},
	{"rate-per-run", kindIntOrAuto, "N|auto", fmt.Sprintf("units per second the workers of one run are served together, whatever their tokens (its orchestrator is paced by its own token alone), 0..%d; beyond it their requests wait; 0: no pacing per run; auto: four times rate-per-credential", maxLimit), fixed("auto")},
	{"burst-per-run", kindIntOrAuto, "N|auto", fmt.Sprintf("units the workers of one run may use at once above its rate, 1..%d; auto: four times burst-per-credential, at least rate-per-run", maxLimit), fixed("auto")},
}

func init() { options = append(options, limitOptions...) }

// loadLimits reads the limit options with Load's helpers; maxFrame is --max-frame, which a connection's outbound
// budget and the inbound budget must hold.
func loadLimits(maxFrame int, integer func(name string, lo, hi int) int, duration func(name string) time.Duration,
	str func(name string) (text, src string), fail func(format string, args ...any)) Limits {
	l := Limits{
		MaxConns:                      integer("max-conns", 1, maxLimit),
		ReservedConns:                 integer("reserved-conns", 0, maxLimit),
		MaxConnsPerCredential:         integer("max-conns-per-credential", 1, maxLimit),
		MaxConnsPerRun:                integer("max-conns-per-run", 1, maxLimit),
		MaxPendingPerProcess:          integer("max-pending-per-process", 1, maxLimit),
		IdleTimeout:                   duration("idle-timeout"),
		MaxWaitsPerConn:               integer("max-waits-per-conn", 1, maxLimit),
		MaxWaitsPerCredential:         integer("max-waits-per-credential", 1, maxLimit),
		MaxSubscriptionsPerCredential: integer("max-subscriptions-per-credential", 1, maxLimit),
		MaxReadsPerCredential:         integer("max-reads-per-credential", 1, maxLimit),
		OutboundBytes:                 integer("outbound-bytes", 1024, 1<<30),
		GlobalOutboundBytes:           integer("global-outbound-bytes", 1024, 1<<40),
		GlobalInboundBytes:            integer("global-inbound-bytes", 1024, 1<<40),
		RatePerCredential:             integer("rate-per-credential", 0, maxLimit),
		BurstPerCredential:            integer("burst-per-credential", 1, maxLimit),
	}
	if l.IdleTimeout > 0 && l.IdleTimeout < minIdleTimeout {
		_, src := str("idle-timeout")
		fail("%s: %s is below %s (0s: never)", src, l.IdleTimeout, minIdleTimeout)
	}
	if l.ReservedConns >= l.MaxConns {
		_, src := str("reserved-conns")
		fail("%s: %d must be below max-conns %d", src, l.ReservedConns, l.MaxConns)
	}
	if l.OutboundBytes < maxFrame {
		_, src := str("outbound-bytes")
		fail("%s: %d must be at least max-frame %d", src, l.OutboundBytes, maxFrame)
	}
	if l.GlobalOutboundBytes < l.OutboundBytes {
		_, src := str("global-outbound-bytes")
		fail("%s: %d must be at least outbound-bytes %d", src, l.GlobalOutboundBytes, l.OutboundBytes)
	}
	if l.GlobalInboundBytes < maxFrame {
		_, src := str("global-inbound-bytes")
		fail("%s: %d must be at least max-frame %d", src, l.GlobalInboundBytes, maxFrame)
	}
	l.OutboundBytesPerCredential = bytesWithin(str, integer, "outbound-bytes-per-credential",
		int(broker.DefaultOutboundBytesPerCredential(int64(l.GlobalOutboundBytes), l.OutboundBytes)),
		"outbound-bytes", l.OutboundBytes, "global-outbound-bytes", l.GlobalOutboundBytes, fail)
	l.OutboundBytesPerRun = bytesWithin(str, integer, "outbound-bytes-per-run",
		int(broker.DefaultOutboundBytesPerRun(int64(l.GlobalOutboundBytes), int64(l.OutboundBytesPerCredential))),
		"outbound-bytes-per-credential", l.OutboundBytesPerCredential, "global-outbound-bytes", l.GlobalOutboundBytes,
		fail)
	l.InboundBytesPerCredential = bytesWithin(str, integer, "inbound-bytes-per-credential",
		int(broker.DefaultInboundBytesPerCredential(int64(l.GlobalInboundBytes), maxFrame)),
		"max-frame", maxFrame, "global-inbound-bytes", l.GlobalInboundBytes, fail)
	l.InboundBytesPerRun = bytesWithin(str, integer, "inbound-bytes-per-run",
		int(broker.DefaultInboundBytesPerRun(int64(l.GlobalInboundBytes), int64(l.InboundBytesPerCredential))),
		"inbound-bytes-per-credential", l.InboundBytesPerCredential, "global-inbound-bytes", l.GlobalInboundBytes,
		fail)
	l.RatePerRun = intOrAuto(str, integer, "rate-per-run", 0, broker.DefaultRatePerRun(l.RatePerCredential))
	l.BurstPerRun = intOrAuto(str, integer, "burst-per-run", 1,
		broker.DefaultBurstPerRun(l.BurstPerCredential, l.RatePerRun))
	return l
}

// bytesWithin reads the byte budget option name, auto when it is "auto", else within the option floorName's value
// floor..the option globalName's value global (0 is the broker's default).
func bytesWithin(str func(name string) (text, src string), integer func(name string, lo, hi int) int, name string,
	auto int, floorName string, floor int, globalName string, global int, fail func(format string, args ...any)) int {
	if text, _ := str(name); text == "auto" {
		return auto
	}
	n := integer(name, 1, 1<<40)
	if n > 0 && (n < floor || n > global) {
		_, src := str(name)
		fail("%s: %d must be within %s %d..%s %d", src, n, floorName, floor, globalName, global)
	}
	return n
}

// intOrAuto reads the kindIntOrAuto option name within lo..maxLimit, or auto when it is "auto".
func intOrAuto(str func(name string) (text, src string), integer func(name string, lo, hi int) int, name string, lo,
	auto int) int {
	if text, _ := str(name); text == "auto" {
		return auto
	}
	return integer(name, lo, maxLimit)
}

// apply puts the limits into the broker's options.
func (l Limits) apply(o *broker.Options) {
	o.MaxConns, o.MaxConnsPerCredential, o.MaxConnsPerRun = l.MaxConns, l.MaxConnsPerCredential, l.MaxConnsPerRun
	o.MaxPendingPerPeer = l.MaxPendingPerProcess
	o.ReservedConns = l.ReservedConns
	if l.ReservedConns == 0 {
		o.ReservedConns = -1 // the broker reads 0 as "its default"
	}
	o.IdleTimeout = l.IdleTimeout
	if l.IdleTimeout == 0 {
		o.IdleTimeout = -1
	}
	o.MaxWaitsPerConn, o.MaxWaitsPerCredential = l.MaxWaitsPerConn, l.MaxWaitsPerCredential
	o.MaxSubscriptionsPerCredential = l.MaxSubscriptionsPerCredential
	o.MaxReadsPerCredential = l.MaxReadsPerCredential
	o.OutboundBytes, o.GlobalOutboundBytes = l.OutboundBytes, int64(l.GlobalOutboundBytes)
	o.OutboundBytesPerCredential = int64(l.OutboundBytesPerCredential)
	o.OutboundBytesPerRun = int64(l.OutboundBytesPerRun)
	o.GlobalInboundBytes = int64(l.GlobalInboundBytes)
	o.InboundBytesPerCredential = int64(l.InboundBytesPerCredential)
	o.InboundBytesPerRun = int64(l.InboundBytesPerRun)
	o.RatePerCredential, o.BurstPerCredential = l.RatePerCredential, l.BurstPerCredential
	if l.RatePerCredential == 0 {
		o.RatePerCredential = -1 // the broker reads 0 as "its default"
	}
	o.RatePerRun, o.BurstPerRun = l.RatePerRun, l.BurstPerRun
	if l.RatePerRun == 0 {
		o.RatePerRun = -1
	}
}
