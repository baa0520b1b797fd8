package events

// Engine event types.
const TypeEngineConfigured = "engine.configured"

// Values of EngineConfigured.UnmeteredDelegates.
const (
	UnmeteredAllow = "allow"
	UnmeteredDeny  = "deny"
)

// EngineConfigured records the admission knobs in force, written whenever
// they change, so replay re-evaluates a decision with the config that made
// it. Its stream is EngineStream.
type EngineConfigured struct {
	NestingEnabled         bool   `json:"nestingEnabled" msgpack:"nestingEnabled"`
	MaxDepth               int    `json:"maxDepth" msgpack:"maxDepth"`
	MaxSlots               int    `json:"maxSlots" msgpack:"maxSlots"`
	SerializeOnPathOverlap bool   `json:"serializeOnPathOverlap" msgpack:"serializeOnPathOverlap"`
	UnmeteredDelegates     string `json:"unmeteredDelegates" msgpack:"unmeteredDelegates"`
	// NB: nil means "no catalog" (every model allowed) and an empty,
	// non-nil slice means "empty catalog" (every explicit model denied), so
	// this field must never be omitempty.
	ModelCatalog   []string `json:"modelCatalog" msgpack:"modelCatalog"`
	SettleGraceSec int      `json:"settleGraceSec" msgpack:"settleGraceSec"`
}
