package events

// Store event types: facts about the store itself rather than about a run.
const TypeStoreMigrated = "store.migrated"

// StoreMigrated records one step of the store format ratchet, written by the
// migration in the same batch as the new format marker, so the log itself
// says when a store changed format and by which step. Its stream is
// EngineStream.
type StoreMigrated struct {
	From uint32 `json:"from" msgpack:"from"`
	To   uint32 `json:"to" msgpack:"to"`
	Name string `json:"name" msgpack:"name"`
}
