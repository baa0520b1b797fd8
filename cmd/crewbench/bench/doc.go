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
// frees. The implementations (Impls): the physical limit (a preallocated
// file + fdatasync behind a group committer, which decides the next group
// while one is written and synced, as crewlog's engine does), plain Pebble,
// SQLite and NATS JetStream behind the same committer, crewlog's Engine
// (under crewd's engine config but for what the workload needs) in-process
// and over its socket (a commandId with every command), crewlog as the writer of a
// JetStream cluster (commands/cluster: R1, and R3 on three servers, over
// loopback TCP, crewlog-jetstream-r1/-r3), SQLite and JetStream in their
// naive forms (a transaction, or an optimistic publish, per operation), and
// pi-crew's files as its broker writes them (D§4.2, D§6.3, D§8). Every
// alternative encodes the same payload structs crewlog records.
//
// Guarantees:
//
//   - Nothing is timed that did not pass the pre-check (check.go): a
//     sequential script whose persisted state must equal crewlog's, and 8
//     concurrent clients whose answers must match what was persisted under
//     the policy's invariants; every payload read back as written; a
//     decision's events next to each other; and sync calls that succeeded
//     on the store's files, counted under strace in a child process
//     (synccount.go), at least one per durable
//     answer given alone and one per commit under concurrency (one per
//     PhaseResult.SyncShare commits for a pipelined writer). Without
//     strace the syncs are reported as not counted.
//   - After every timed cell the store's state is read back and must hold
//     exactly the operations the clients finished, whole.
//   - An operation counts when it started (closed loop) or was scheduled
//     (open loop, Load.Rate) inside the window; those in flight at its end
//     are finished and counted, and none starts after it, but in the closed
//     loop the first of a client that first ran after it (a stalled
//     machine), not counted: every client finishes one.
//   - Every ratio is taken within one round and cell, then summarised over
//     the rounds as median and range; the implementation order rotates from
//     round to round and cell to cell.
//   - CPU per operation is the store's process's. The socket's server runs
//     in a process of its own, as crewd does (socket_server.go): its CPU per
//     operation is that process's, and the clients' (this process) is shown
//     beside it, never added to it. Every cell's timed run begins on a
//     collected heap: the collections it pays for are of its own garbage.
//
// It guarantees nothing about absolute numbers: on a shared VM they move by
// ±30 % between runs, and by 2× between runs minutes apart at times, and p99
// measures the VM. The report's host probe (probe.go: one core's SHA-256
// speed and a synced write's latency, before the rounds and after each) shows
// when the host itself moved.
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
// inbox messages, and completed unless it is one of the A. Each active run
// holds exactly HistoryOptions.ActiveEvents events in the same steps, whatever
// N and R, so crewd's active state is the same for every size of history;
// the finished runs share the rest exactly, so the store holds N events; the
// finished runs end before the active runs' last hour of work, so none is
// within crewd's retention when it starts. The store verifies like any store
// crewd wrote. MeasureHistory then runs crewd on it: exec → first answered
// ping and VmRSS once ready over a few starts, the active state those starts
// loaded (the newest snapshot's size and what it holds, read after them and
// before anything is written), the dashboard's queries for finished runs over
// the socket (p50/p99), and VmHWM while it serves and after writes into the
// active runs that make it snapshot (which come last). It guarantees the
// store's shape, not the numbers: they are this machine's on the day.
package bench
