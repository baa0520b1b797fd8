package commands

import (
	"errors"
	"fmt"
	"slices"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Bounds of the engine config (D§2.10). MaxMaxDepth is also task.create's bound of a depth (events.MaxDepth).
const (
	MinMaxDepth, MaxMaxDepth = 1, events.MaxDepth
	MinMaxSlots, MaxMaxSlots = 1, 64
	MaxSettleGraceSec        = 86400
)

// Configure puts a new engine config in force. It records engine.configured
// only when the config differs from the one in force, so a daemon that
// restarts with the same flags adds nothing to the log.
type Configure struct {
	Config projections.Config
}

// Kind implements Command.
func (*Configure) Kind() string { return "engine.configure" }

// ValidateConfig reports every problem with c at once.
func ValidateConfig(c projections.Config) error {
	var errs []error
	if c.MaxDepth < MinMaxDepth || c.MaxDepth > MaxMaxDepth {
		errs = append(errs, fmt.Errorf("maxDepth %d is outside %d..%d", c.MaxDepth, MinMaxDepth, MaxMaxDepth))
	}
	if c.MaxSlots < MinMaxSlots || c.MaxSlots > MaxMaxSlots {
		errs = append(errs, fmt.Errorf("maxSlots %d is outside %d..%d", c.MaxSlots, MinMaxSlots, MaxMaxSlots))
	}
	if c.UnmeteredDelegates != events.UnmeteredAllow && c.UnmeteredDelegates != events.UnmeteredDeny {
		errs = append(errs, fmt.Errorf("unmeteredDelegates %q is neither allow nor deny", c.UnmeteredDelegates))
	}
	if c.SettleGraceSec < 0 || c.SettleGraceSec > MaxSettleGraceSec {
		errs = append(errs, fmt.Errorf("settle grace %d s is outside 0..%d", c.SettleGraceSec, MaxSettleGraceSec))
	}
	errs = append(errs, validateFairness(c)...)
	errs = append(errs, validateJobLimits(c)...)
	if c.BudgetMode != "" && c.BudgetMode != events.BudgetModePicrew && c.BudgetMode != events.BudgetModeNested {
		errs = append(errs, fmt.Errorf("budgetMode %q is neither %s nor %s", c.BudgetMode, events.BudgetModePicrew,
			events.BudgetModeNested))
	}
	for _, m := range c.ModelCatalog {
		if m == "" || longerThan(m, MaxModelChars) {
			errs = append(errs, fmt.Errorf("model catalog entry %q must be 1..%d chars", m, MaxModelChars))
			break
		}
	}
	return errors.Join(errs...)
}

// SameConfig reports whether a and b put the same knobs in force.
func SameConfig(a, b projections.Config) bool {
	return a.NestingEnabled == b.NestingEnabled && a.MaxDepth == b.MaxDepth && a.MaxSlots == b.MaxSlots &&
		a.SerializeOnPathOverlap == b.SerializeOnPathOverlap && a.UnmeteredDelegates == b.UnmeteredDelegates &&
		a.SettleGraceSec == b.SettleGraceSec && (a.ModelCatalog == nil) == (b.ModelCatalog == nil) &&
		slices.Equal(a.ModelCatalog, b.ModelCatalog) && a.SlotShare == b.SlotShare &&
		a.SlotWaitSec == b.SlotWaitSec &&
		a.QuotaEvents == b.QuotaEvents && a.QuotaBytes == b.QuotaBytes && a.QuotaMsgsPerMin == b.QuotaMsgsPerMin &&
		a.QuotaReserve == b.QuotaReserve && a.QuotaWorkerMsgShare == b.QuotaWorkerMsgShare &&
		a.QuotaWorkerShare == b.QuotaWorkerShare &&
		recordedBudgetMode(a.BudgetMode) == recordedBudgetMode(b.BudgetMode) &&
		a.WaitMethodsEnabled == b.WaitMethodsEnabled &&
		a.ProxyPayloadBytes == b.ProxyPayloadBytes && a.ProxyManifestBytes == b.ProxyManifestBytes &&
		a.ProxyMaxInFlight == b.ProxyMaxInFlight && a.ProxyMaxRequests == b.ProxyMaxRequests &&
		a.RevokedRootLimit == b.RevokedRootLimit && a.RerouteEndedAttempts == b.RerouteEndedAttempts &&
		a.ShareByDelegator == b.ShareByDelegator && a.WorkerSlotShare == b.WorkerSlotShare
}

func (c *Configure) decide(s *projections.State, env *Env) (Decision, error) {
	if err := ValidateConfig(c.Config); err != nil {
		return Decision{}, badParams("engine.configure: %v", err)
	}
	res := map[string]any{"ok": true}
	if SameConfig(c.Config, s.Config()) {
		return Decision{Result: res}, nil
	}
	ev := env.event(events.EngineStream, events.TypeEngineConfigured, c.Config.Event())
	return Decision{Events: []events.Event{ev}, Result: res}, nil
}

// recordedBudgetMode is the budget mode as engine.configured records it: the
// default is left out, so a log written in picrew mode reads the same as one
// written before the knob existed. A config that leaves the mode empty means
// the default too.
func recordedBudgetMode(mode string) string {
	if mode == events.BudgetModePicrew {
		return ""
	}
	return mode
}
