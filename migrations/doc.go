// Package migrations owns the store-format ratchet: the ordered list of
// format steps from FormatInitial up to eventlog.CurrentFormat, and Run,
// which applies the steps a store still needs. Its sibling package
// migrations/picrew imports pi-crew's file state into a store.
//
// # Guarantees
//
//   - The format only goes up, one step at a time, in list order (pebble's
//     FormatMajorVersion is the model). A store newer than this build is
//     refused by eventlog.Open with ErrFormatTooNew and never touched.
//   - Every step is idempotent and crash-safe: its last write, its
//     store.migrated event (stream events.EngineStream, command id
//     "migrate:<to>:<name>") and the new format marker commit in one synced
//     batch, so after a crash the store is either at the old format (run
//     the step again) or at the new one with the event recorded.
//   - Run on a current store does nothing and writes nothing.
//   - The step records and the imports are the engine's commands: their
//     outcomes are the engine principal's (events.EnginePrincipal), which no
//     client credential maps to.
//
// # Format 3: outcomes by principal
//
// The step "principal-outcomes" moves every outcome of the format-2 command
// table to its principal (eventlog.Upgrade.MoveOutcomes): the principal
// that events.EventPrincipal names from the outcome's first event (its
// actor, its stream and, for imports, its correlation id), or the admin when
// the command wrote no event (a rejection recorded without one: the admin
// may send every command, so no other principal is answered with a record
// that may not be its own; its retry is decided afresh). Moved outcomes have
// no fingerprint, and commands answers them to any retry of their principal,
// as before format 3. The fixture testdata/format2 is a store written at
// format 2 by crewlog's own engine, so the step is tested on what the old
// code wrote.
//
// # Format 4: snapshots in chunks
//
// The step "chunked-snapshots" rewrites a snapshot stored whole under
// 'n' | pos (formats 1 to 3) in sealed chunks of 64 KiB under a header
// (eventlog.Upgrade.ChunkSnapshots), byte for byte; a whole snapshot that
// fails its seal is dropped, as derived data the next start rebuilds from
// the log. Nothing else changes: the step exists so that a build of format
// 3, which reads only whole snapshots, refuses a store that holds chunks
// rather than reporting them as damage.
//
// It does not take the pre-migration backup (crewctl migrate does, with
// eventlog.Log.Checkpoint, before calling Run) and it does not stop a
// running daemon: the caller opens the store with AllowOlderFormat, which
// Pebble's directory lock keeps exclusive.
//
// It imports only events and eventlog (DESIGN.md).
package migrations
