// Package events defines crewlog's event vocabulary: the dotted type names kept
// from pi-crew, one payload struct per type, the schema version of each type
// and the msgpack codec that turns a payload into bytes and back.
//
// It is a leaf package (like raft's raftpb): it imports only the standard
// library and msgpack, so every other package can depend on it.
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
//
// # Encoding
//
// Payloads are msgpack maps keyed by the tag names (schema-tolerant: unknown
// keys are skipped, missing keys decode as zero values). Structs are encoded
// in field order and payloads contain no Go maps, so encoding is
// deterministic: the same payload always yields the same bytes, which the
// storage layer's hash chain relies on.
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
// exists), assign positions or write anything anywhere.
package events
