// Package picrew imports the file state of a pi-crew crew root (the shapes
// of reference D§1–§3) into a crewlog store, as crewlog events appended
// directly with eventlog.Append (it may import only events and eventlog,
// like its parent package, so it uses neither commands nor projections).
//
// # What it reads, per run under state/runs/<runId>/
//
//   - manifest.json → run.created, and the run's status
//   - tasks.json (a bare array, or the {schemaVersion, tasks} envelope) →
//     task.created for workflow tasks (kind "workflow"); the final status,
//     times, usage and allocation of every task, shadows included
//   - events.jsonl and its archives events.jsonl.<ts>.archive.jsonl, merged
//     by metadata.seq → the run, task, delegate, budget-warning and ask
//     events crewlog has (delegate.admitted also yields budget.reserved)
//   - mailbox/{inbox,outbox}.jsonl, mailbox/tasks/<taskId>/{inbox,outbox}.jsonl
//     (and their archives) with mailbox/delivery.json → mailbox.appended,
//     mailbox.delivered, mailbox.acknowledged
//   - <artifactsRoot>/steering/<taskId>.jsonl (default
//     artifacts/<runId>/steering) → steer.pushed after the steer message
//
// pi-crew's event log is lossy (compaction keeps the last 1,000 events), so
// the state files are the truth for where things ended: after the events, a
// reconcile step per run appends what the history lacks so the imported
// run, tasks, delegations and allocations end as the files say (a shadow
// task whose delegate events were lost becomes a task.created of kind
// "shadow": its parent is unknown, so it holds no slot).
//
// # Guarantees
//
//   - Idempotent: every write has a deterministic command id
//     (import:<runId>:<what>) and ids already in the command-id table are
//     skipped, so a second import of the same files appends nothing, and an
//     import of files that grew appends only what is new.
//   - Nothing pi-crew wrote is dropped: an event type without a crewlog
//     counterpart (task.progress, hook.executed, policy.action, …) is kept as
//     foreign.imported with its type, seq, time, task, message and data; it
//     changes no projection, and the timeline, replay and events.since show
//     it (RunSummary.Foreign counts them).
//   - Tolerant and loud: corrupt lines, seq gaps and duplicates, quarantined
//     .corrupt-* files, lock and sidecar files and unknown files are skipped
//     and each is listed in the Summary; nothing is dropped without a line
//     saying so.
//   - A run's writes commit in one atomic append.
//
// It does not lock the pi-crew root (pi-crew must not be writing it) and it
// needs the store exclusively (eventlog.Open's directory lock).
package picrew
