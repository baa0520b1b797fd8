// Package bench is crewbench: a comparison of crewlog with its alternatives on
// one workload, and a simulated crew that drives a running crewd.
//
// # compare
//
// The workload is a delegate admission: read the run's state, check the slot
// cap and the parent's budget, append delegate.requested + delegate.admitted +
// budget.reserved atomically (or delegate.requested + delegate.rejected), with
// optimistic concurrency on the run; each admission is followed by its
// settlement (mailbox.appended + the terminal delegate event) so its slot
// frees. Seven implementations (Impls) run it: the physical limit (file
// append + fdatasync behind a group committer), plain Pebble behind the same
// committer, crewlog's Engine in-process, crewlog over its socket, an SQLite
// event store, NATS JetStream embedded, and pi-crew's files (D§8). Every
// alternative encodes the same payload structs crewlog records.
//
// Before it is timed, each implementation runs a sequential check script
// (200 admissions over 4 runs, 2 slots per run, budgets that run out) and
// must leave the same persisted state as crewlog — admissions, spend, events
// by type and rejections by reason per run, read back from its storage — or
// it is reported and not timed, so no alternative is measured doing less work.
//
// Cells are clients × (all on one run | each on its own run); within a cell
// every implementation runs back to back on a fresh directory, and the table
// reports admissions/s, the admission's p50 and p99, and the ratio to crewlog
// in-process in the same cell (pebble-perf.md's method: interleaved, ratios
// from one run, medians over rounds).
//
// It guarantees nothing about absolute numbers: on a noisy VM they move by
// ±30 % between runs and p99 measures the VM.
//
// # sim
//
// Simulate plays a crew against a running crewd over its socket (see its
// documentation) and prints progress and a summary.
//
// # history
//
// WriteHistory writes a store of N events over R runs, A of them left
// running, through commands.Engine in process with many concurrent
// submitters (so groups are large): each run is set up with its tasks and
// credentials, worked through delegations (admitted, spawned, settled with a
// result message, some charged, some refused), asks, usage reports and
// inbox messages, and completed unless it is one of the A. Every run gets an
// equal share of the events and the remainder is written into the active
// runs, so the store holds N events give or take one step of a run's work;
// it verifies like any store crewd wrote. MeasureHistory then runs crewd on
// it: exec → first answered ping, VmRSS once ready, the dashboard's queries
// for finished runs over the socket (p50/p99), and VmHWM while it serves and
// after writes that make it snapshot. It guarantees the store's shape, not
// the numbers: they are this machine's on the day.
package bench
