package projections

import (
	"slices"

	"github.com/crewlog/crewlog/events"
)

// Config is the engine configuration in force: the last engine.configured,
// or DefaultConfig before any.
type Config struct {
	NestingEnabled         bool   `json:"nestingEnabled" msgpack:"nestingEnabled"`
	MaxDepth               int    `json:"maxDepth" msgpack:"maxDepth"`
	MaxSlots               int    `json:"maxSlots" msgpack:"maxSlots"`
	SerializeOnPathOverlap bool   `json:"serializeOnPathOverlap" msgpack:"serializeOnPathOverlap"`
	UnmeteredDelegates     string `json:"unmeteredDelegates" msgpack:"unmeteredDelegates"`
	// ModelCatalog nil means no catalog (no model check); empty means every
	// explicit model is denied (fail-closed, D§4.5).
	ModelCatalog   []string `json:"modelCatalog" msgpack:"modelCatalog"`
	SettleGraceSec int      `json:"settleGraceSec" msgpack:"settleGraceSec"`
	// SlotShare is how many slots one run may hold while another run waits
	// for one (see State.SlotWaiters), and one worker of a run with its
	// delegations while another task of its run waits (WorkerSlotWaiters);
	// 0 switches the rule off.
	SlotShare int `json:"slotShare,omitempty" msgpack:"slotShare,omitempty"`
	// SlotWaitSec is how long a run or a task refused a slot counts as
	// waiting for one, unless it is admitted first; 0 switches fair slots
	// off.
	SlotWaitSec int `json:"slotWaitSec,omitempty" msgpack:"slotWaitSec,omitempty"`
	// Run quotas, each 0 for no limit: events in a run's stream, bytes of
	// text a run holds (RunUsage.Bytes), and messages appended to a run in
	// the last minute.
	QuotaEvents     int64 `json:"quotaEvents,omitempty" msgpack:"quotaEvents,omitempty"`
	QuotaBytes      int64 `json:"quotaBytes,omitempty" msgpack:"quotaBytes,omitempty"`
	QuotaMsgsPerMin int   `json:"quotaMsgsPerMin,omitempty" msgpack:"quotaMsgsPerMin,omitempty"`
	// QuotaReserve is the percent of each run quota kept for the run's
	// orchestrator and the admin: the run's workers together stop at the
	// rest, so a worker that floods its run can never lock its orchestrator
	// out of steering, messaging or creating tasks. 0: no reserve.
	QuotaReserve int `json:"quotaReserve,omitempty" msgpack:"quotaReserve,omitempty"`
	// QuotaWorkerMsgShare is the percent of the workers' part of the message
	// rate (the rate less the reserve) that any one worker may use, so a
	// worker flooding its run cannot silence its sibling workers for the
	// rest of every minute. 0: no share (one worker may use it all).
	QuotaWorkerMsgShare int `json:"quotaWorkerMsgShare,omitempty" msgpack:"quotaWorkerMsgShare,omitempty"`
	// QuotaWorkerShare is the percent of the workers' part of the events
	// quota and of the bytes quota (each quota less the reserve) that any
	// one worker, with the delegations it started and their results, may
	// have appended (Task.ActorEvents, ActorBytes), so a worker flooding its run
	// cannot leave its sibling workers refused until the orchestrator steps
	// in. 0: no share.
	QuotaWorkerShare int `json:"quotaWorkerShare,omitempty" msgpack:"quotaWorkerShare,omitempty"`
	// BudgetMode is events.BudgetModePicrew or events.BudgetModeNested; an
	// engine.configured written before the knob existed reads as picrew.
	BudgetMode string `json:"budgetMode" msgpack:"budgetMode"`
	// WaitMethodsEnabled lets workers park on questions (wait.request /
	// wait.resolve); off, they are refused policy-disabled with a
	// policy.action trace, as pi-crew's broker.waitMethodsEnabled=false.
	WaitMethodsEnabled bool `json:"waitMethodsEnabled" msgpack:"waitMethodsEnabled"`
	// Job limits (D§9's constants); 0 means the dispatcher's own value
	// (JobLimits).
	ProxyPayloadBytes  int64 `json:"proxyPayloadBytes,omitempty" msgpack:"proxyPayloadBytes,omitempty"`
	ProxyManifestBytes int64 `json:"proxyManifestBytes,omitempty" msgpack:"proxyManifestBytes,omitempty"`
	ProxyMaxInFlight   int   `json:"proxyMaxInFlight,omitempty" msgpack:"proxyMaxInFlight,omitempty"`
	ProxyMaxRequests   int   `json:"proxyMaxRequests,omitempty" msgpack:"proxyMaxRequests,omitempty"`
	RevokedRootLimit   int   `json:"revokedRootLimit,omitempty" msgpack:"revokedRootLimit,omitempty"`
	// RerouteEndedAttempts settles the result of a delegation made by an attempt of its parent task that a retry
	// has ended into the run inbox (rerouted), as one whose parent has ended: the new attempt is not the one that
	// asked for it. Off (every log written before the knob), the result goes to the parent task.
	RerouteEndedAttempts bool `json:"rerouteEndedAttempts,omitempty" msgpack:"rerouteEndedAttempts,omitempty"`
	// ShareByDelegator makes a worker's share of its run's quotas (QuotaWorkerShare, QuotaWorkerMsgShare) cover the
	// delegations it started: what a shadow task's worker appends and sends, and (of the events and bytes quotas
	// alone: its sender is the delegation, no task) the message delivering a delegation's result, count for the
	// workflow task whose delegation started it (shareHolder), so a worker cannot pass its share by delegating and
	// flooding from its grandchildren. Off (every log written before the knob), each task's worker has a share of
	// its own, counted by what it appended as its actor, and a result counts for none. The fold counts each event
	// by the knob in force at its position (countActor).
	//
	// NB: a knob of its own, not WorkerSlotShare's: the two are separate rules, of different resources (what a
	// run holds, what the pool lends), and a store may want the quota rule with no slot rule (a pool of one slot,
	// SlotShare 0) or the reverse.
	ShareByDelegator bool `json:"shareByDelegator,omitempty" msgpack:"shareByDelegator,omitempty"`
	// WorkerSlotShare holds a worker of a run, with the delegations it started and theirs (always counted
	// together: the rule is new with the knob), to SlotShare slots while another task of its run waits for one
	// (worker_slots.go), within SlotWaitSec. Off (every log written before the knob), only a run has a share of the
	// slots, and the fold records no task's wait (Task.SlotWaitAt).
	WorkerSlotShare bool `json:"workerSlotShare,omitempty" msgpack:"workerSlotShare,omitempty"`
	// Position of the engine.configured in force; 0 for the defaults.
	Position uint64 `json:"position" msgpack:"position"`
}

// DefaultConfig is the config a log holds before its first engine.configured,
// so it must never change (replay decides with it): pi-crew's D8 defaults
// (D§2.10, D§5, SPEC §4): nesting on, maxDepth 4, wait methods on, 2 slots, serialize off, unmetered allowed, no
// catalog, 30 s settle grace, pi-crew's budget mode; and crewlog's fair
// slots and quotas: a run holds at most DefaultSlotShare of the pool while
// another run waits (a refusal counts as waiting for DefaultSlotWaitSec),
// and the Default* quotas. A worker's share covers only its own task
// (ShareByDelegator off) and no worker has a share of the slots
// (WorkerSlotShare off), as in every log written before those knobs.
func DefaultConfig() Config {
	return Config{
		NestingEnabled:     true,
		MaxDepth:           4,
		MaxSlots:           2,
		UnmeteredDelegates: events.UnmeteredAllow,
		SettleGraceSec:     30,
		SlotShare:          DefaultSlotShare(2),
		SlotWaitSec:        DefaultSlotWaitSec,
		QuotaEvents:        DefaultQuotaEvents,
		QuotaBytes:         DefaultQuotaBytes,
		QuotaMsgsPerMin:    DefaultQuotaMsgsPerMin,
		BudgetMode:         events.BudgetModePicrew,
		WaitMethodsEnabled: true,
	}
}

// Defaults of the fair-slot and quota knobs.
const (
	DefaultSlotWaitSec     = 120
	DefaultQuotaEvents     = 1_000_000
	DefaultQuotaBytes      = 256 << 20
	DefaultQuotaMsgsPerMin = 6000
	// DefaultQuotaReserve is crewd's default QuotaReserve. DefaultConfig
	// keeps none: it is what a log holds before its first engine.configured,
	// and replay decides with it.
	DefaultQuotaReserve = 10
	// DefaultQuotaWorkerMsgShare is crewd's default QuotaWorkerMsgShare
	// (DefaultConfig keeps none, as for QuotaReserve).
	DefaultQuotaWorkerMsgShare = 50
	// DefaultQuotaWorkerShare is crewd's default QuotaWorkerShare
	// (DefaultConfig keeps none, as for QuotaReserve).
	DefaultQuotaWorkerShare = 50
)

// DefaultSlotShare is the share of a pool of maxSlots: half of it (at least
// one), so that one run never holds the whole pool while another waits
// (except in a pool of one slot, which cannot be shared).
func DefaultSlotShare(maxSlots int) int { return max(1, maxSlots/2) }

func (c Config) clone() Config {
	c.ModelCatalog = cloneSlice(c.ModelCatalog)
	return c
}

func applyConfig(s *State, ev events.Event) {
	p := events.PayloadAs[events.EngineConfigured](ev)
	if p == nil {
		return
	}
	s.config = ConfigOf(p)
	s.config.Position = ev.Position
}

// ConfigOf is the config an engine.configured puts in force (Position 0).
func ConfigOf(p *events.EngineConfigured) Config {
	c := Config{
		NestingEnabled:         p.NestingEnabled,
		MaxDepth:               p.MaxDepth,
		MaxSlots:               p.MaxSlots,
		SerializeOnPathOverlap: p.SerializeOnPathOverlap,
		UnmeteredDelegates:     p.UnmeteredDelegates,
		ModelCatalog:           p.ModelCatalog,
		SettleGraceSec:         p.SettleGraceSec,
		SlotShare:              p.SlotShare,
		SlotWaitSec:            p.SlotWaitSec,
		QuotaEvents:            p.QuotaEvents,
		QuotaBytes:             p.QuotaBytes,
		QuotaMsgsPerMin:        p.QuotaMsgsPerMin,
		QuotaReserve:           p.QuotaReserve,
		QuotaWorkerMsgShare:    p.QuotaWorkerMsgShare,
		QuotaWorkerShare:       p.QuotaWorkerShare,
		BudgetMode:             p.BudgetMode,
		WaitMethodsEnabled:     !p.WaitMethodsDisabled,
		ProxyPayloadBytes:      p.ProxyPayloadBytes,
		ProxyManifestBytes:     p.ProxyManifestBytes,
		ProxyMaxInFlight:       p.ProxyMaxInFlight,
		ProxyMaxRequests:       p.ProxyMaxRequests,
		RevokedRootLimit:       p.RevokedRootLimit,
		RerouteEndedAttempts:   p.RerouteEndedAttempts,
		ShareByDelegator:       p.ShareByDelegator,
		WorkerSlotShare:        p.WorkerSlotShare,
	}
	if c.BudgetMode == "" {
		c.BudgetMode = events.BudgetModePicrew
	}
	return c
}

// Event is the engine.configured payload that puts c in force. The default
// budget mode is left out, so a log written in picrew mode reads the same as
// one written before the knob existed.
func (c Config) Event() *events.EngineConfigured {
	e := &events.EngineConfigured{
		NestingEnabled: c.NestingEnabled, MaxDepth: c.MaxDepth, MaxSlots: c.MaxSlots,
		SerializeOnPathOverlap: c.SerializeOnPathOverlap, UnmeteredDelegates: c.UnmeteredDelegates,
		ModelCatalog: slices.Clone(c.ModelCatalog), SettleGraceSec: c.SettleGraceSec,
		SlotShare: c.SlotShare, SlotWaitSec: c.SlotWaitSec,
		QuotaEvents: c.QuotaEvents, QuotaBytes: c.QuotaBytes, QuotaMsgsPerMin: c.QuotaMsgsPerMin,
		QuotaReserve: c.QuotaReserve, QuotaWorkerMsgShare: c.QuotaWorkerMsgShare,
		QuotaWorkerShare:    c.QuotaWorkerShare,
		WaitMethodsDisabled: !c.WaitMethodsEnabled,
		ProxyPayloadBytes:   c.ProxyPayloadBytes, ProxyManifestBytes: c.ProxyManifestBytes,
		ProxyMaxInFlight: c.ProxyMaxInFlight, ProxyMaxRequests: c.ProxyMaxRequests,
		RevokedRootLimit: c.RevokedRootLimit, RerouteEndedAttempts: c.RerouteEndedAttempts,
		ShareByDelegator: c.ShareByDelegator, WorkerSlotShare: c.WorkerSlotShare,
	}
	if c.BudgetMode != events.BudgetModePicrew {
		e.BudgetMode = c.BudgetMode
	}
	return e
}

// Config returns the engine config in force.
func (s *State) Config() Config { return s.config.clone() }

// The dispatcher's constants (D§9): the job limits in force when the config
// leaves them 0.
const (
	DefaultProxyPayloadBytes  = 16 << 20
	DefaultProxyManifestBytes = 8 << 20
	DefaultProxyMaxInFlight   = 32
	DefaultProxyMaxRequests   = 4096
	DefaultRevokedRootLimit   = 4096
)

// JobLimits are the job limits in force.
type JobLimits struct {
	PayloadBytes, ManifestBytes int64
	MaxInFlight, MaxRequests    int
	RevokedRoots                int
}

// JobLimits returns c's job limits, the dispatcher's for each knob left 0.
func (c Config) JobLimits() JobLimits {
	or := func(v, def int64) int64 {
		if v > 0 {
			return v
		}
		return def
	}
	return JobLimits{
		PayloadBytes:  or(c.ProxyPayloadBytes, DefaultProxyPayloadBytes),
		ManifestBytes: or(c.ProxyManifestBytes, DefaultProxyManifestBytes),
		MaxInFlight:   int(or(int64(c.ProxyMaxInFlight), DefaultProxyMaxInFlight)),
		MaxRequests:   int(or(int64(c.ProxyMaxRequests), DefaultProxyMaxRequests)),
		RevokedRoots:  int(or(int64(c.RevokedRootLimit), DefaultRevokedRootLimit)),
	}
}
