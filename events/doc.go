// Package events defines crewlog's event vocabulary: the dotted type names kept
// from pi-crew, one payload struct per type, the schema version of each type
// and the msgpack codec that turns a payload into bytes and back.
//
// It is a leaf package (like raft's raftpb): it imports only the standard
// library, msgpack and its own leaves events/msgpackappend and
// events/msgpacklen (which import nothing of crewlog), so every other
// package can depend on it.
//
// # Guarantees
//
//   - Every type of the contract has a constant (Type...), a payload struct and
//     a schema version; Types lists them, IsKnown and SchemaVersion answer for
//     one, NewPayload returns a pointer to a zero payload.
//   - Payload keys are pi-crew's camelCase names, identical in the json and the
//     msgpack tags, so the log, the wire and pi-crew agree on spelling.
//   - A payload carries everything the projections need: state is rebuilt
//     from events alone, never from a side file (pi-crew could not do this: its
//     run.created carried only {team, workflow}).
//   - Subject task ids travel in the payload as taskId. For delegate.* and
//     budget.* events taskId is the PARENT task and subId names the delegation.
//   - Times inside payloads (askedAt, deadline) are unix milliseconds, like
//     pi-crew's; Event.Time is the engine clock in unix nanoseconds.
//   - Secrets never appear in a payload: credential events carry a hex sha-256
//     digest only. Ledger fields (tokensGranted, reservedTokens, ...) are never
//     redacted.
//   - DecodePayload never panics: an unknown type wraps ErrUnknownType,
//     undecodable bytes wrap ErrBadPayload, a schema version this build cannot
//     read wraps ErrUnsupportedVersion.
//   - PayloadString reads one string of a payload at its type's current schema
//     version as DecodePayload reads it, without decoding the rest (a string
//     that aliases the payload), or says it cannot and leaves it to the decode.
//
// # Encoding
//
// Payloads are msgpack maps keyed by the tag names (schema-tolerant: unknown
// keys are skipped, missing keys decode as zero values). Structs are encoded
// in field order and payloads contain no Go maps, so encoding is
// deterministic: the same payload always yields the same bytes, which the
// storage layer's hash chain relies on.
//
// The encoder and the decoder of every payload type are generated from the
// struct definitions and the registry (payload_codec_gen.go, written by
// internal/gen; run `go generate ./events` after changing a payload struct
// or a schema version). The generated encoder writes byte for byte what
// msgpack's reflection encoder writes with default options (int compact,
// int64 and uint32 at full width, float64 as a double, omitempty as msgpack
// decides emptiness), so logs written before and after it are the same
// bytes; tests compare the two over random payloads of every type. The
// generated decoder reads the current schema version of every type whose
// fields it handles (all but store.migrated) into exactly what reflection
// decodes; an encoding it does not take on (a struct as an array, a
// duplicate key, an older schema version) is decoded by reflection, and a
// length that runs past the payload is refused before anything is sized by
// it. A test regenerates the file in memory and fails when the committed one
// is stale, so CI catches a struct changed without regenerating.
//
// # Schema versions and upcasting
//
// Every type is at schema version 1 but task.created, at version 2 (it
// gained kind). When a payload changes shape its version is bumped and an
// upcaster from the old version is registered in upcast.go; DecodePayload
// then rewrites old bytes step by step to the current version before
// decoding, so projections only ever see current structs. Stored events keep
// their bytes (the hash chain covers them); new events are written at the
// current version.
//
// # What this package does not do
//
// It does not validate payload contents (commands do, before an event
// exists), assign positions or write anything anywhere. The one exception
// is a payload another component acts on as it reads it: an
// ImportCheckpoint no import writes (a negative offset, say) is refused by
// DecodePayload as ErrBadPayload (ImportCheckpoint.Validate), so a reader
// is never handed a position to resume from that cannot be.
//
// It does define the bounds of what a payload may hold, which the engine's
// commands and the importers (which may use neither commands nor
// projections) both hold to, each with its own refusal or report: the
// chars of each free text and id (text_bounds.go, ImportedTexts), and the
// numbers and lists (imported_bounds.go: usage counters, a run's budget, a
// task's depth and dependencies, a question's options and id, the timeouts
// of a delegation and a question). DecodePayload does not apply them: a
// stored event is read as it was written, whatever a later bound says, so
// replay decides as the log did. The store bounds a whole payload
// (eventlog's Options.MaxPayloadBytes).
package events
