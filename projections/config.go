package projections

import "github.com/crewlog/crewlog/events"

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
	// Position of the engine.configured in force; 0 for the defaults.
	Position uint64 `json:"position" msgpack:"position"`
}

// DefaultConfig is pi-crew's current defaults (D§2.10, D§5, SPEC §4):
// nesting on, maxDepth 4, 2 slots, serialize off, unmetered allowed, no
// catalog, 30 s settle grace.
func DefaultConfig() Config {
	return Config{
		NestingEnabled:     true,
		MaxDepth:           4,
		MaxSlots:           2,
		UnmeteredDelegates: events.UnmeteredAllow,
		SettleGraceSec:     30,
	}
}

func (c Config) clone() Config {
	c.ModelCatalog = cloneSlice(c.ModelCatalog)
	return c
}

func applyConfig(s *State, ev events.Event) {
	p := events.PayloadAs[events.EngineConfigured](ev)
	if p == nil {
		return
	}
	s.config = Config{
		NestingEnabled:         p.NestingEnabled,
		MaxDepth:               p.MaxDepth,
		MaxSlots:               p.MaxSlots,
		SerializeOnPathOverlap: p.SerializeOnPathOverlap,
		UnmeteredDelegates:     p.UnmeteredDelegates,
		ModelCatalog:           p.ModelCatalog,
		SettleGraceSec:         p.SettleGraceSec,
		Position:               ev.Position,
	}
}

// Config returns the engine config in force.
func (s *State) Config() Config { return s.config.clone() }
